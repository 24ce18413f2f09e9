"""Every screen the CLI issue names, at 80 and 140 columns, against its snapshot.

Envelopes recorded from real runs (tests/fixtures/screens/*.json, paths and pids made stable) go
through the real renderers at each width; the help, usage errors, profiles and gotchas come from
the real program. A change to a screen fails here until its snapshot is rewritten
(GPUOPS_WRITE_SCREENS=1) and read: the README's screens are these files. Each screen also keeps
the rules: no colour codes with NO_COLOR, and no line wider than the terminal except the ones
that must stay whole to be copied (a fix, a next step, a command, a verdict a terminal folds)."""

import io
import json
import os
import re
from functools import partial
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from gpuops.render import diagnose, fleet, jobs, preflight, reap, report, sync, teardown, triage
from tests.conftest import gpuops

SCREENS = Path(__file__).resolve().parent / "fixtures" / "screens"
WIDTHS = (80, 140)
WRITE = bool(os.environ.get("GPUOPS_WRITE_SCREENS"))

RENDERED = {
    "preflight-local": preflight.render,
    "preflight-healthy": preflight.render,
    "preflight-sick": preflight.render,
    "preflight-riser": preflight.render,  # a GPU on an x4 riser, no P2P (issue 39)
    "preflight-two-hosts": preflight.render,
    "status": jobs.status,
    # a retried run is one row, its attempt in the state column; why each ended under --verbose
    "status-runs": jobs.status,
    "status-runs-verbose": partial(jobs.status, verbose=True),
    "stop-dry-run": jobs.stop,
    "launch-failed": jobs.started,
    "wait-interrupted": jobs.waited,
    "logs-ended": None,
    "logs-timed-out": None,
    "logs-interrupted": None,
    "verify-drift": sync.render,
    "reap-plan": reap.render,
    "teardown-autodl": teardown.render,
    "fleet": fleet.render,
    "fleet-watch": fleet.render,  # the report --watch ends with: a row per GPU, its bars and processes
    "preflight-xid": preflight.render,
    # the same envelopes with each finding in full (--verbose): evidence wrapped, never cut
    "preflight-sick-verbose": partial(preflight.render, verbose=True),
    "preflight-xid-verbose": partial(preflight.render, verbose=True),
    "triage": triage.render,  # doctor-style like every verb's, not Markdown
    "triage-verbose": partial(triage.render, verbose=True),
    "diagnose": diagnose.render,
    "diagnose-127": diagnose.render,  # the shell's own exit code: command not found
    "diagnose-stalled": diagnose.render,  # an attempt the run's --stall-after stopped
    "push-resumed": sync.render,  # a push that went on from an interrupted one says so
}
# What a terminal of 24 rows has left for one box's report at 80 columns, counted in wrapped
# rows: the prompt and the command that made it take two. Several hosts, --verbose and the help
# pages (bare `gpuops` prints the short usage) may run longer.
SCREEN_ROWS = 22
LONGER = ("status-runs-verbose", "preflight-two-hosts", "fleet", "fleet-watch", "preflight-sick-verbose", "preflight-xid-verbose",
          "triage-verbose")
PROGRAM = {
    "usage": [],
    "help": ["--help"],
    "help-all": ["help", "all"],
    "help-launch": ["help", "launch"],
    "help-exit-codes": ["help", "exit-codes"],
    "help-verify": ["help", "verify"],  # --src/--dst as push takes them
    "unknown-job": ["logs", "--host", "local", "--job", "no-such-job"],  # points to status
    "help-logs": ["logs", "--help"],
    "typo": ["statsu"],
    "missing-flag": ["logs"],
    "profiles": ["profiles"],
    "profile-autodl": ["profiles", "autodl"],
    "gotcha": ["gotcha", "U7"],
}
# Lines kept whole at any width: copied as they are (a fix, a next step, advice, a command), or a
# verdict the terminal folds itself.
WHOLE = re.compile(r"^(    fix: |  next: |  advice: |    command: |gpuops: |\d+ box(es)?: |\S+: .*(READY|FAILED|drift|dry run|"
                   r"RUNNING|reaped|deletes|verified|hosts ok|confidence\)| \d+ of \d+ steps$))")


def rendered(name, width):
    doc = json.loads((SCREENS / f"{name.removesuffix('-verbose')}.json").read_text())
    out = io.StringIO()
    con = Console(file=out, width=width, height=24, no_color=True, highlight=False, soft_wrap=False,
                  force_terminal=False)
    if RENDERED[name] is None:  # logs: the raw log goes to stdout, this line to stderr
        jobs.logs_trailer(doc, stream=out)
    else:
        report(doc, RENDERED[name], con, err=out)
    return out.getvalue()


def program(name, width):
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    r = gpuops(*PROGRAM[name], env={**env, "COLUMNS": str(width), "NO_COLOR": "1", "HOME": "/home/me"})
    return r.stdout + r.stderr


def _check(name, width, text):
    assert "\x1b[" not in text, f"{name}: colour codes with NO_COLOR or in a pipe"
    wide = [line for line in text.splitlines() if len(line) > width and not WHOLE.match(line)]
    assert not wide, f"{name} at {width} columns: {wide[:3]}"
    text = "".join(line.rstrip() + "\n" for line in text.splitlines())  # a table's padding shows as nothing
    snap = SCREENS / f"{name}.{width}.txt"
    if WRITE:
        snap.write_text(text)
    assert snap.exists(), f"no snapshot {snap.name}: run with GPUOPS_WRITE_SCREENS=1 and read it"
    assert text == snap.read_text(), f"{name} at {width} columns changed: rewrite with GPUOPS_WRITE_SCREENS=1"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(RENDERED))
def test_rendered_screens(name, width):
    _check(name, width, rendered(name, width))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(PROGRAM))
def test_program_screens(name, width):
    _check(name, width, program(name, width))


def test_the_readme_shows_the_screens_as_they_are():
    """Each ```text block after a `<!-- screen: NAME.WIDTH -->` marker is that snapshot."""
    readme = (SCREENS.parent.parent.parent / "README.md").read_text()
    shown = re.findall(r"<!-- screen: (\S+) -->\n```text\n(.*?)```", readme, re.S)
    assert len(shown) >= 6
    for snap, block in shown:
        assert block == (SCREENS / f"{snap}.txt").read_text(), f"README's {snap} is not the current screen"


def rows(text, width):
    """The rows `text` takes on a terminal `width` columns wide: a longer line folds."""
    return sum(max(1, -(-cell_len(line) // width)) for line in text.splitlines())


@pytest.mark.parametrize("width", WIDTHS)
def test_bare_gpuops_and_help_fit_a_screen_and_help_all_is_the_whole_reference(width):
    """Bare `gpuops` printed the whole 70-row help, and later `gpuops help` did (two rows for most
    verbs): now each verb is one row of `help`, its whole summary under `help all`."""
    text = program("usage", width)
    assert rows(text, width) <= SCREEN_ROWS and "gpuops help exit-codes" in text
    index = program("help", width)
    assert rows(index, width) <= SCREEN_ROWS + 1 and len(index.splitlines()) == rows(index, width)
    from gpuops.cli.lite import VERBS

    named = [line.split()[1] if line[0] != " " else line.split()[0] for line in index.splitlines()[1:-1]]
    assert sorted(named) == sorted(VERBS)
    assert rows(program("help-all", width), width) > 24


@pytest.mark.parametrize("name", sorted(set(RENDERED) - set(LONGER)))
def test_a_single_box_report_fits_a_24_row_terminal_at_80_columns(name):
    """A sick box's preflight was 80 rows at 80 columns (three screens); the local no-GPU one was
    27, since the fold counted lines, not the rows a terminal folds them into."""
    text = rendered(name, 80)
    assert rows(text, 80) <= SCREEN_ROWS
    if name.startswith(("preflight-", "diagnose", "triage", "reap", "stop")):  # the reports issue 38 names
        doc = json.loads((SCREENS / f"{name}.json").read_text())
        assert doc["summary"][:40] in text.splitlines()[0], f"{name}: the verdict is not on the first row"


REPORTS = sorted(n for n in RENDERED if n.startswith(("preflight-", "diagnose", "triage", "reap", "stop"))
                 and n != "preflight-two-hosts")  # several hosts end with the line that rolls them up


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", REPORTS)
def test_a_single_box_report_ends_with_its_verdict_on_one_row(name, width):
    """The reports ended with next steps and advice, the verdict above them (or scrolled off):
    now the last row is the verdict again, its head whole, cut after a clause or word to one row."""
    doc = json.loads((SCREENS / f"{name.removesuffix('-verbose')}.json").read_text())
    last = [line for line in rendered(name, width).splitlines() if line.strip()][-1]
    assert cell_len(last) <= width, f"{name}: the last verdict takes more than a row"
    at = last.find(doc["summary"][:20])
    assert at == 0 or last[:at].endswith(": "), f"{name}: the last row is not the verdict: {last!r}"  # its box
    kept = last[at:].removesuffix("…")
    assert doc["summary"].startswith(kept) and len(kept) >= 30, f"{name}: the last row is not the verdict: {last!r}"
    assert last.endswith("…") == (kept != doc["summary"])



def test_no_color_on_a_terminal_keeps_the_text_and_drops_every_colour():
    from tests import terminal

    code, raw = terminal.run("preflight", env={**os.environ, "NO_COLOR": "1"})
    colours = re.findall(r"\x1b\[([0-9;]*)m", raw)
    assert code in (0, 1) and re.search(r"\d+ failed, \d+ warnings, \d+ ok", raw)
    assert not [c for c in colours if re.search(r"(^|;)(3[0-8]|9[0-7]|4[0-8])(;|$)", c)], set(colours)
    code, raw = terminal.run("preflight")
    assert re.search(r"\x1b\[[0-9;]*3[12]m", raw), "a terminal without NO_COLOR gets the verdict's colour"


def test_diagnose_says_each_evidence_line_once():
    """diagnose's table listed the evidence line its verdict then ended with again."""
    text = rendered("diagnose", 140)
    doc = json.loads((SCREENS / "diagnose.json").read_text())
    last = doc["data"]["evidence"][-1]
    assert doc["summary"].endswith(last)
    body = [line for line in text.splitlines() if not line.startswith("local: ")]
    assert not [line for line in body if last in line], body


def suggested(text):
    """Each `next:` command of a screen as a shell reads it pasted: its folded lines joined."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("  next: "):
            cmd = line.removeprefix("  next: ")
            while cmd.endswith(" \\"):
                i += 1
                cmd = cmd[:-2] + " " + lines[i].strip()
            found.append(cmd)
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_every_suggested_command_fits_the_width_and_pastes_as_a_command_gpuops_takes(width):
    """A next step wider than the terminal was folded by the terminal inside a word
    (`--from-offset 71|2`, `gpuop|s push`): now it folds between words with a backslash."""
    import shlex

    from gpuops import surface
    from gpuops.engines import flags as engine_flags

    commands = 0
    for snap in sorted(SCREENS.glob(f"*.{width}.txt")):
        text = snap.read_text()
        for line in text.splitlines():
            if line.startswith(("  next: ", " " * 8)) and len(line) > width:
                assert len(line.split()) <= 3, f"{snap.name}: {line!r}"  # one piece alone, too wide to fold
        for cmd in suggested(text):
            argv = shlex.split(cmd)
            assert argv[0] == "gpuops" and argv[1] in surface.verbs(), (snap.name, cmd)
            verb = surface.verbs()[argv[1]]
            known = {p.flag for p in verb.params} | ({f"--{f}" for f in engine_flags()} if verb.engine_flags else set())
            given = {a.split("=")[0] for a in argv[2:] if a.startswith("--")}
            assert given <= known | {"--json"}, (snap.name, given - known)
            commands += 1
    assert commands >= 5


@pytest.mark.parametrize("width", WIDTHS)
def test_status_is_a_row_per_run_with_its_attempt_and_its_details_only_under_verbose(width):
    """`status` of 7 jobs was 50 rows at 80 columns (each job's reason, hint, run and telemetry on
    wrapped lines of their own) and a retried run read as two: now a row a job, the run's attempt
    in its state, and the details with --verbose."""
    doc = json.loads((SCREENS / "status-runs.json").read_text())
    jobs_ = doc["data"]["jobs"]
    text = rendered("status-runs", width)
    table = [line for line in text.splitlines() if line[:8].isdigit()]
    assert [line.split()[0] for line in table] == [r["job_id"] for r in jobs_]
    run = next(r for r in jobs_ if r.get("run"))
    assert f"RUNNING attempt {run['run']['attempt']}/{run['run']['of']}" in table[0]
    assert rows(text, width) == len(jobs_) + 3  # the header, the hint to --verbose, the summary
    verbose = rendered("status-runs-verbose", width)
    assert run["run"]["id"] in verbose and run["run"]["id"] not in text
