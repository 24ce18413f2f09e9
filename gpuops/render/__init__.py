"""Human output, one module per verb; machines get the envelope instead (gpuops.envelope).

Every renderer takes the envelope an operation returned and a rich Console, and reads nothing
else, so what a person sees can be redesigned here without touching an operation.
"""

import json
import os
import sys

_STYLE = {"fail": "bold red", "warn": "yellow", "info": "cyan", "ok": "green"}


PIPE_WIDTH = 1000


def console():
    """The Console every renderer prints to. A pipe gets whole lines (so `grep` finds whole ids and
    values), unless COLUMNS asks for a width; a terminal is wrapped to its own width."""
    from rich.console import Console

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(highlight=False, soft_wrap=False, width=width)


class LazyConsole:
    """console(), made when a renderer first uses it: one that writes plain text (gotcha) never
    loads rich."""

    def __init__(self):
        self._real = None

    def __getattr__(self, name):
        if self._real is None:
            self._real = console()
        return getattr(self._real, name)


def plain_width() -> int:
    """For a renderer writing plain text, the width console() would use: a terminal's own (or
    COLUMNS), else PIPE_WIDTH."""
    import shutil

    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return shutil.get_terminal_size().columns
    return PIPE_WIDTH


def bold(text) -> str:
    """`text` in bold where a terminal shows it (not under NO_COLOR or TERM=dumb, as rich does)."""
    tty = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    return f"\x1b[1m{text}\x1b[0m" if tty else text


def severity_text(sev):
    return f"[{_STYLE.get(sev, '')}]{sev.upper()}[/]"


_MARK = {"fail": "✗", "warn": "!", "info": "i", "ok": "✓"}
EVIDENCE_KEYS = 8


def print_findings(findings, con):
    """The findings doctor-style (flutter/brew doctor): a block per problem, worst first, with its
    evidence as `key: value` lines and its fix on one line of its own (never wrapped nor cut, so
    it can be copied whole); every passing check condensed into one wrapped ✓ line."""
    from rich.text import Text

    from ..findings import SEVERITIES

    order = {s: i for i, s in enumerate(SEVERITIES)}
    problems = sorted((f for f in findings if f["severity"] != "ok"), key=lambda f: (-order[f["severity"]], f["id"]))
    for f in problems:
        sev = f["severity"]
        head = Text.assemble((f"{_MARK.get(sev, '?')} {sev.upper():<4} ", _STYLE.get(sev, "")), (f["id"], "bold"),
                             "  ", f["title"])
        if f.get("gotcha"):
            head.append(f" ({f['gotcha']})", style="dim")
        con.print(head)
        evidence = [(k, v) for k, v in (f.get("evidence") or {}).items() if v not in (None, "", [], {})]
        for key, value in evidence[:EVIDENCE_KEYS]:
            con.print(Text(f"    {key}: {_evidence(value)}", no_wrap=True, overflow="ellipsis"))
        if len(evidence) > EVIDENCE_KEYS:
            con.print(Text(f"    ... {len(evidence) - EVIDENCE_KEYS} more in --json", style="dim"))
        if f.get("fix"):
            con.print(Text.assemble(("    fix: ", "bold"), f["fix"]), soft_wrap=True, crop=False)
    passed = sorted(f["id"] for f in findings if f["severity"] == "ok")
    if passed:
        con.print(Text.assemble((f"{_MARK['ok']} ", _STYLE["ok"]), f"{len(passed)} passed: ", ", ".join(passed)))


def _evidence(value):
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def verdict_line(doc, con):
    """The verdict alone, for the top of a report (summary_line repeats it at the end, with next steps)."""
    style = "green" if doc.get("ok") else "bold red"
    host = f"{doc.get('host')}: " if doc.get("host") else ""
    con.print(f"[{style}]{host}{doc.get('summary')}[/]", soft_wrap=True)


_UNREACHED = ("unreachable", "timed-out")


def render_errors(doc):
    """One line per failed host on stderr: the expected-error contract (no traceback). For a host
    that could not be reached the line ends saying how to see why, and how to check this machine."""
    for d in doc.get("hosts") or [doc]:
        err = d.get("error")
        if err:
            hint = ""
            if err.get("kind") in _UNREACHED and d.get("host"):
                hint = f" (try: {_ssh_command(d['host'])} for the SSH client's own words; --host local checks this machine)"
            print(f"gpuops: {err['message']}{hint}", file=sys.stderr)


def _ssh_command(spec):
    from ..remote.hostspec import parse

    try:
        user, host, port = parse(spec)
    except Exception:  # noqa: BLE001 - a hint must never be what fails
        return f"ssh {spec}"
    return "ssh " + (f"-p {port} " if port else "") + (f"{user}@" if user else "") + host


def rollup_line(doc, con):
    """The one line that ends a several-host report."""
    style = "green" if doc.get("ok") else "bold red"
    con.print(f"[{style}]{doc['command']} on {len(doc['hosts'])} hosts: {doc.get('summary')}[/]", soft_wrap=True)


def step_text(step) -> str:
    """A next step as the command line to paste: its argv shell-quoted, never re-split."""
    from ..remote.wrap import join

    return join(step["argv"])


def print_next(doc, con):
    """The next steps, one whole command line each (with why on its own line, so the command can be
    copied alone), then the advice."""
    for step in doc.get("next") or []:
        con.print(f"  next: {step_text(step)}", markup=False, soft_wrap=True, crop=False)
        if step.get("why"):
            con.print(f"        ({step['why']})", markup=False, soft_wrap=True, style="dim")
    for text in doc.get("advice") or []:
        con.print(f"  advice: {text}", markup=False, soft_wrap=True)


def summary_line(doc, con):
    verdict_line(doc, con)
    print_next(doc, con)


def state_text(row):
    """A job's state in its style, with the exit code or signal."""
    from ..jobs.states import style

    s = row.get("state") or "?"
    extra = f" {row['exit_code']}" if row.get("exit_code") is not None else ""
    extra += f" {row['signal']}" if row.get("signal") else ""
    return f"[{style(s)}]{s}{extra}[/]"
