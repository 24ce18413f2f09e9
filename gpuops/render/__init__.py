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
ID_COLUMN = 24  # passing checks line their titles up after ids up to this long


def screen_lines(con):
    """How long a report may be before its passing checks fold into one line: the terminal's
    height, at most a 24-row one's, less the prompt and the command that made it."""
    return min(con.height, 24) - 4


def print_findings(findings, con, show_all=False, around=0):
    """The findings doctor-style (flutter/brew doctor): a block per problem, worst first, with its
    evidence as `key: value` lines and its fix on one line of its own (never wrapped nor cut, so
    it can be copied whole); then one `✓ id  title` line per passing check, unless with the
    `around` lines the rest of the report takes that is more than a screen and not `show_all`:
    then one line counts them."""
    from rich.text import Text

    from ..findings import SEVERITIES

    order = {s: i for i, s in enumerate(SEVERITIES)}
    problems = sorted((f for f in findings if f["severity"] != "ok"), key=lambda f: (-order[f["severity"]], f["id"]))
    used = 0
    for f in problems:
        for line, how in _problem_block(f):
            used += _height(con, line, how)
            _print(con, line, how)
    passed = sorted((f for f in findings if f["severity"] == "ok"), key=lambda f: f["id"])
    if not passed:
        return
    if show_all or used + len(passed) + around <= screen_lines(con):
        pad = min(max(len(f["id"]) for f in passed), ID_COLUMN)
        for f in passed:
            _print(con, Text.assemble((f"{_MARK['ok']} ", _STYLE["ok"]), f"{f['id']:<{pad}}  ", f["title"]), "cut")
    else:
        con.print(Text.assemble((f"{_MARK['ok']} ", _STYLE["ok"]), f"{len(passed)} checks passed ",
                                ("(--all lists them)", "dim")))


def _problem_block(f):
    """[(line, how it meets the edge)] of a warn, fail or info finding: its head wraps with the
    title's continuation under the title, evidence is cut at the edge, and the fix is one soft
    line (a terminal folds it, a copy gets it whole)."""
    from rich.text import Text

    sev = f["severity"]
    lead = Text.assemble((f"{_MARK.get(sev, '?')} {sev.upper():<4} ", _STYLE.get(sev, "")), (f["id"], "bold"), "  ")
    title = Text(f["title"])
    if f.get("gotcha"):
        title.append(f" ({f['gotcha']})", style="dim")
    lines = [(hanging(lead, title), "wrap")]
    evidence = [(k, v) for k, v in (f.get("evidence") or {}).items() if v not in (None, "", [], {})]
    for key, value in evidence[:EVIDENCE_KEYS]:
        lines.append((Text(f"    {key}: {_evidence(value)}"), "cut"))
    if len(evidence) > EVIDENCE_KEYS:
        lines.append((Text(f"    ... {len(evidence) - EVIDENCE_KEYS} more in --json", style="dim"), "cut"))
    if f.get("fix"):
        lines.append((Text.assemble(("    fix: ", "bold"), f["fix"]), "soft"))
    return lines


def hanging(lead, text, width=None):
    """`lead` then `text`, whose wrapped lines go on under its first word (a hanging indent)."""
    from rich.table import Table

    grid = Table.grid()
    grid.add_column(no_wrap=True, width=width)
    grid.add_column()
    grid.add_row(lead, text)
    return grid


def _print(con, renderable, how):
    """how: 'wrap' at the width, 'cut' there with an ellipsis, or 'soft' (one line, whole)."""
    if how == "soft":
        con.print(renderable, soft_wrap=True, crop=False)
    elif how == "cut":
        con.print(renderable, no_wrap=True, overflow="ellipsis")
    else:
        con.print(renderable)


def _height(con, renderable, how="wrap"):
    """The lines `renderable` takes on `con`'s terminal, printed as _print prints it `how`."""
    from rich.cells import cell_len

    if how == "soft":
        return max(1, -(-cell_len(renderable.plain) // con.width))
    return 1 if how == "cut" else len(con.render_lines(renderable, con.options, pad=False))


def _evidence(value):
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        value = ", ".join(map(str, value))
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def doctor(doc, con, blocks=(), show_all=False):
    """A report doctor-style: the verdict, what the verb shows (`blocks`: rich renderables), the
    findings, and the verdict again with the next steps. The first verdict is left out when
    nothing would stand between the two."""
    findings = doc.get("findings") or []
    if blocks or findings:
        verdict_line(doc, con)
    steps = doc.get("next") or []
    around = 2 + len(steps) + sum(1 for x in steps if x.get("why")) + len(doc.get("advice") or [])
    around += sum(_height(con, b) for b in blocks)
    for b in blocks:
        con.print(b)
    print_findings(findings, con, show_all, around)
    summary_line(doc, con)


def _verdict_style(doc):
    """Green when fine; yellow for what is no failure (a dry run's plan, a wait that ran out of
    time or was stopped: the job is as it was); else red."""
    from ..envelope import CODE_KEY
    from ..errors import INTERRUPTED, REFUSED, WAIT_TIMED_OUT

    if doc.get("ok"):
        return "green"
    calm = (REFUSED, WAIT_TIMED_OUT, *INTERRUPTED.values())
    return "yellow" if doc.get(CODE_KEY) in calm and not doc.get("error") else "bold red"


def verdict_line(doc, con):
    """The verdict alone, for the top of a report (summary_line repeats it at the end, with next steps)."""
    from rich.markup import escape

    host = f"{doc.get('host')}: " if doc.get("host") else ""
    con.print(f"[{_verdict_style(doc)}]{escape(host + str(doc.get('summary')))}[/]", soft_wrap=True)


_UNREACHED = ("unreachable", "timed-out")


def report(doc, human, con, err=None):
    """A verb's envelope for people: each host's report (`human(doc, con)`), one stderr line per
    host that failed, and for several hosts one line that rolls them up."""
    for d in doc.get("hosts") or [doc]:
        if not d.get("error"):
            human(d, con)
    render_errors(doc, err)
    if doc.get("hosts"):
        rollup_line(doc, con)


def render_errors(doc, stream=None):
    """One line per failed host on stderr: the expected-error contract (no traceback). For a host
    that could not be reached the line ends saying how to see why, and how to check this machine."""
    for d in doc.get("hosts") or [doc]:
        err = d.get("error")
        if err:
            hint = ""
            if err.get("kind") in _UNREACHED and d.get("host"):
                hint = f" (try: {_ssh_command(d['host'])} for the SSH client's own words; --host local checks this machine)"
            print(f"gpuops: {err['message']}{hint}", file=stream or sys.stderr)


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
    extra = f" {row['exit_code']}" if row.get("exit_code") else ""  # a COMPLETED row's 0 goes without saying
    extra += f" {row['signal']}" if row.get("signal") else ""
    return f"[{style(s)}]{s}{extra}[/]"
