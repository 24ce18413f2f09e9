"""Human output, one module per verb; machines get the envelope instead (gpuops.envelope).

Every renderer takes the envelope an operation returned and a rich Console, and reads nothing
else, so what a person sees can be redesigned here without touching an operation.
"""

import sys

_STYLE = {"fail": "bold red", "warn": "yellow", "info": "cyan", "ok": "green"}


def console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def severity_text(sev):
    return f"[{_STYLE.get(sev, '')}]{sev.upper()}[/]"


def findings_table(findings, title=None):
    from rich.table import Table

    from ..findings import SEVERITIES

    order = {s: i for i, s in enumerate(SEVERITIES)}
    rows = sorted(findings, key=lambda f: (-order[f["severity"]], f["id"]))
    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("finding")
    table.add_column("evidence")
    table.add_column("fix")
    for f in rows:
        evidence = ", ".join(f"{k}={v}" for k, v in (f.get("evidence") or {}).items())
        title_text = f["title"] + (f" [dim]({f['gotcha']})[/]" if f.get("gotcha") else "")
        table.add_row(severity_text(f["severity"]), f["id"], title_text, evidence[:160], f.get("fix") or "")
    return table


def render_errors(doc):
    """One line per failed host on stderr: the expected-error contract (no traceback)."""
    for d in doc.get("hosts") or [doc]:
        err = d.get("error")
        if err:
            print(f"gpuops: {err['message']}", file=sys.stderr)


def summary_line(doc, con):
    style = "green" if doc.get("ok") else "bold red"
    host = f"{doc.get('host')}: " if doc.get("host") else ""
    con.print(f"[{style}]{host}{doc.get('summary')}[/]", soft_wrap=True)
    for step in doc.get("next") or []:
        con.print(f"  next: {step}", markup=False, soft_wrap=True)


def state_text(row):
    """A job's state in its style, with the exit code or signal."""
    from ..jobs.states import style

    s = row.get("state") or "?"
    extra = f" {row['exit_code']}" if row.get("exit_code") is not None else ""
    extra += f" {row['signal']}" if row.get("signal") else ""
    return f"[{style(s)}]{s}{extra}[/]"
