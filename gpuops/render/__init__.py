"""Human output, one module per verb; machines get the envelope instead (gpuops.envelope).

Every renderer takes the envelope an operation returned and a rich Console, and reads nothing
else, so what a person sees can be redesigned here without touching an operation.
"""

import json
import os
import sys
from typing import Optional

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

    def __init__(self) -> None:
        self._real = None

    def __getattr__(self, name: str):
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


def bold(text: str) -> str:
    """`text` in bold where a terminal shows it (not under NO_COLOR or TERM=dumb, as rich does)."""
    tty = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    return f"\x1b[1m{text}\x1b[0m" if tty else text


_MARK = {"fail": "✗", "warn": "!", "info": "i", "ok": "✓"}
EVIDENCE_KEYS = 8
ID_COLUMN = 24  # passing checks line their titles up after ids up to this long


def screen_lines(con):
    """How long a report may be before its passing checks fold into one line: the terminal's
    height, at most a 24-row one's, less the prompt and the command that made it."""
    return min(con.height, 24) - 4


def print_findings(findings, con, show_all=False, around=0, verbose: bool = False, elsewhere=()) -> None:
    """The findings doctor-style (flutter/brew doctor), worst first. At the default verbosity a
    problem is one line (its mark, id and title, cut at the edge), and its fix on a line of its
    own unless the report shows it anyway (`elsewhere`: its advice and next steps): a sick box
    fits a screen. With `verbose` (or `show_all`) each is a block: the title wrapped, its evidence
    as `key: value` lines and its fix, never wrapped nor cut, so it can be copied whole. Then one
    `✓ id  title` line per passing check, unless with the `around` rows the rest of the report
    takes that is more than a screen and not `show_all`: then one line counts them."""
    from rich.text import Text

    from ..findings import SEVERITIES

    order = {s: i for i, s in enumerate(SEVERITIES)}
    problems = sorted((f for f in findings if f["severity"] != "ok"), key=lambda f: (-order[f["severity"]], f["id"]))
    detailed = verbose or show_all
    pad = min(max([len(f["id"]) for f in problems] or [0]), ID_COLUMN)
    used = 0
    for f in problems:
        for line, how in _problem_block(f) if detailed else _problem_line(f, elsewhere, pad):
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
        hint = "(--verbose: evidence and fixes; --all: every check)" if problems and not detailed else \
            "(--all lists them)"
        _print(con, Text.assemble((f"{_MARK['ok']} ", _STYLE["ok"]), f"{len(passed)} checks passed ", (hint, "dim")),
               "cut")


def _lead(f, pad=0):
    from rich.text import Text

    sev = f["severity"]
    return Text.assemble((f"{_MARK.get(sev, '?')} {sev.upper():<4} ", _STYLE.get(sev, "")), (f["id"], "bold"),
                         " " * max(2, pad - len(f["id"]) + 2))


def _title(f):
    from rich.text import Text

    title = Text(f["title"])
    if f.get("gotcha"):
        title.append(f" ({f['gotcha']})", style="dim")
    return title


def _fix(f):
    from rich.text import Text

    return Text.assemble(("    fix: ", "bold"), f["fix"])


def _problem_line(f, elsewhere, pad):
    """[(line, how it meets the edge)] of a finding at the default verbosity: one line, cut at
    the edge, titles lined up after ids up to `pad` long; a failure's fix after it (one soft
    line) unless the report shows it anyway (`elsewhere`: its advice and next steps). A
    warning's fix is in the advice, or under --verbose."""
    from rich.text import Text

    lines = [(Text.assemble(_lead(f, pad), _title(f)), "cut")]
    if f.get("fix") and f["severity"] == "fail" and f["fix"] not in elsewhere:
        lines.append((_fix(f), "soft"))
    return lines


def _problem_block(f):
    """[(line, how it meets the edge)] of a warn, fail or info finding in full: its head and each
    evidence line wrap with their continuation indented (the words that matter in a kernel line
    are often its last), and the fix is one soft line (a terminal folds it, a copy gets it whole)."""
    from rich.text import Text

    lines = [(hanging(_lead(f), _title(f)), "wrap")]
    evidence = [(k, v) for k, v in (f.get("evidence") or {}).items() if v not in (None, "", [], {})]
    for key, value in evidence[:EVIDENCE_KEYS]:
        lines.append((hanging(Text(f"    {key}: "), Text(_evidence(value))), "wrap"))
    if len(evidence) > EVIDENCE_KEYS:
        lines.append((Text(f"    ... {len(evidence) - EVIDENCE_KEYS} more in --json", style="dim"), "cut"))
    if f.get("fix"):
        lines.append((_fix(f), "soft"))
    return lines


def hanging(lead, text, width: Optional[int]=None):
    """`lead` then `text`, whose wrapped lines go on under its first word (a hanging indent)."""
    from rich.table import Table

    grid = Table.grid()
    grid.add_column(no_wrap=True, width=width)
    grid.add_column()
    grid.add_row(lead, text)
    return grid


def cut(text):
    """`text` (a rich Text) as one line cut at the terminal's edge with an ellipsis, even where it
    is printed among other renderables (a Group, a report's blocks)."""
    from rich.table import Table

    line = Table.grid()
    line.add_column(no_wrap=True, overflow="ellipsis")
    line.add_row(text)
    return line


def _print(con, renderable, how) -> None:
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


def doctor(doc, con, blocks=(), show_all=False, verbose: bool = False) -> None:
    """A report doctor-style: the verdict, what the verb shows (`blocks`: rich renderables), the
    findings (one line each unless `verbose`), the next steps and advice, and the verdict again
    as the last row (closing)."""
    findings = doc.get("findings") or []
    verdict_line(doc, con)
    around = summary_rows(doc, con) + sum(_height(con, b) for b in blocks) + 1  # + the closing row
    for b in blocks:
        con.print(b)
    elsewhere = set(doc.get("advice") or []) | {step_text(s) for s in doc.get("next") or []}
    print_findings(findings, con, show_all, around, verbose, elsewhere)
    closing(doc, con, bool(blocks or findings))


def _soft_rows(con, text: str):
    from rich.cells import cell_len

    return max(1, -(-cell_len(text) // con.width))


def summary_rows(doc, con):
    """The rows summary_line takes on `con`'s terminal, each soft line folded at its width."""
    from . import fold

    rows = _soft_rows(con, _verdict_text(doc))
    for s in doc.get("next") or []:
        rows += sum(_soft_rows(con, line) for line in next_lines(s, con.width))
        rows += sum(_soft_rows(con, line) for line in fold.prose(f"({s['why']})", con.width, " " * 8)) if s.get("why") else 0
    return rows + sum(_soft_rows(con, line) for text in doc.get("advice") or []
                      for line in fold.advice(text, con.width, "  advice: ", " " * 10))


def _verdict_style(doc):
    """Green when fine; yellow for what is no failure (a dry run's plan, a wait that ran out of
    time or was stopped: the job is as it was); else red."""
    from ..envelope import CODE_KEY
    from ..errors import INTERRUPTED, REFUSED, WAIT_TIMED_OUT

    if doc.get("ok"):
        return "green"
    calm = (REFUSED, WAIT_TIMED_OUT, *INTERRUPTED.values())
    return "yellow" if doc.get(CODE_KEY) in calm and not doc.get("error") else "bold red"


def _verdict_text(doc):
    return (f"{doc.get('host')}: " if doc.get("host") else "") + str(doc.get("summary"))


def verdict_line(doc, con) -> None:
    """The verdict alone, whole (a terminal folds it), for the top of a report."""
    con.print(_verdict_text(doc), style=_verdict_style(doc), markup=False, soft_wrap=True)


def closing(doc, con, between: bool) -> None:
    """How a single-box report ends (preflight, diagnose, triage, reap, stop: issue 38): the next
    steps and advice, then the verdict once more on the last row, cut at the terminal's edge, so
    that what is left above the prompt says how it went when the first row has scrolled away.
    Where nothing stands `between` the first verdict and this one, it is not said twice."""
    from rich.cells import cell_len
    from rich.text import Text

    print_next(doc, con)
    if not (between or doc.get("next") or doc.get("advice")):
        return
    text, summary = _verdict_text(doc), str(doc.get("summary"))
    if cell_len(text) > con.width and cell_len(text) - cell_len(summary) > con.width // 2:
        text = summary  # a long name (triage's log path) would leave the verdict no room
    con.print(Text(short(text, con.width), style=_verdict_style(doc)), no_wrap=True, overflow="ellipsis")


def short(text: str, width: int) -> str:
    """`text` in one row of `width` cells: whole if it fits, else cut after its last whole clause
    (`; `) where that keeps half the row, else after its last whole word, and marked with `…`."""
    from rich.cells import cell_len

    if cell_len(text) <= width:
        return text
    used, room = 0, text
    for i, ch in enumerate(text):
        used += cell_len(ch)
        if used > width - 1:
            room = text[:i]
            break
    end = room.rfind("; ")
    if end < 0 or cell_len(room[:end]) < width // 2:
        end = room.rfind(" ")
    return (room[:end] if end > 0 else room).rstrip(" ,;:") + "…"


_UNREACHED = ("unreachable", "timed-out")


def report(doc, human, con, err=None) -> None:
    """A verb's envelope for people: each host's report (`human(doc, con)`), one stderr line per
    host that failed, and for several hosts one line that rolls them up. What the box sent is
    shown inert (gpuops.render.inert): a renderer never sees a raw control character."""
    from .inert import envelope

    doc = envelope(doc)
    for d in doc.get("hosts") or [doc]:
        if not d.get("error"):
            human(d, con)
    render_errors(doc, err)
    if doc.get("hosts"):
        rollup_line(doc, con)


def render_errors(doc, stream=None) -> None:
    """One line per failed host on stderr: the expected-error contract (no traceback). For a host
    that could not be reached the line ends saying how to see why, and how to check this machine."""
    for d in doc.get("hosts") or [doc]:
        err = d.get("error")
        if err:
            print(f"gpuops: {err['message']}{_hint(d, err)}", file=stream or sys.stderr)


def _hint(d, err) -> str:
    """What to try after an error, for a person: how to see why a box was not reached, which key
    to give one that refused every key, where to find the job a verb could not."""
    import re

    host, kind = d.get("host"), err.get("kind")
    if kind in _UNREACHED and host not in (None, "local"):
        return f" (try: {_ssh_command(host)} for the SSH client's own words; --host local checks this machine)"
    if kind == "auth-failed":
        spec = _ssh_command(host).removeprefix("ssh ") if host else "HOST"
        return (f" (the box took none of the keys offered: give its key with --identity FILE or ssh-add it; "
                f"ssh -v {spec} shows which keys were tried)")
    job = re.match(r"(?:(\S+): )?no job ", err.get("message") or "")
    if kind == "not-found" and job:
        return f" (gpuops status --host {host or job.group(1) or 'local'} lists its jobs)"
    return ""


def _ssh_command(spec):
    from ..sshspec import parse

    try:
        user, host, port = parse(spec)
    except Exception:  # noqa: BLE001 - a hint must never be what fails
        return f"ssh {spec}"
    return "ssh " + (f"-p {port} " if port else "") + (f"{user}@" if user else "") + host


def rollup_line(doc, con) -> None:
    """The one line that ends a several-host report."""
    style = "green" if doc.get("ok") else "bold red"
    con.print(f"{doc['command']} on {len(doc['hosts'])} hosts: {doc.get('summary')}", style=style, markup=False,
              soft_wrap=True)


def step_text(step) -> str:
    """A next step as the command line to paste: its argv shell-quoted, never re-split, a word
    with a control character in bash's $'...' (inert on the screen, the same bytes when run)."""
    from shlex import quote

    from .inert import shell_word

    return " ".join(shell_word(w, quote) for w in step["argv"])


def next_lines(step, width: int):
    """A next step as the lines to paste: its command on a line of its own, folded between words
    with a trailing backslash where it is wider than the terminal (gpuops.render.fold)."""
    from shlex import quote

    from . import fold
    from .inert import shell_word

    return fold.command(fold.units([shell_word(w, quote) for w in step["argv"]]), width, "  next: ", " " * 8)


def print_next(doc, con) -> None:
    """The next steps, each command on lines of its own (with why after it, so the command can be
    copied alone), then the advice, folded between words."""
    from . import fold

    for step in doc.get("next") or []:
        for line in next_lines(step, con.width):
            con.print(line, markup=False, soft_wrap=True, crop=False)
        if step.get("why"):
            for line in fold.prose(f"({step['why']})", con.width, " " * 8):
                con.print(line, markup=False, soft_wrap=True, style="dim")
    for text in doc.get("advice") or []:
        for line in fold.advice(text, con.width, "  advice: ", " " * 10):
            con.print(line, markup=False, soft_wrap=True)


def summary_line(doc, con) -> None:
    verdict_line(doc, con)
    print_next(doc, con)


def state_text(row):
    """A job's state in its style, with the exit code or signal (a Text: what the box recorded is
    never read as markup)."""
    from rich.text import Text

    from ..states import style

    s = row.get("state") or "?"
    extra = f" {row['exit_code']}" if row.get("exit_code") else ""  # a COMPLETED row's 0 goes without saying
    extra += f" {row['signal']}" if row.get("signal") else ""
    return Text(f"{s}{extra}", style=style(s))
