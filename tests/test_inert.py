"""Box text reaches a person's terminal inert (issue 23, item 2): a GPU name, a job name, a log
line or a path holding escape sequences is shown escaped by every human-readable output, on a
terminal and through a pipe, while --json keeps the exact value. The hostile box is a real sshd
box whose fake nvidia-smi names its GPUs with escapes and whose job records (as a box may write
them) name a job so; `logs` prints the job's own bytes on purpose (the README says so)."""

import json
import os
import time

import pytest

from gpuops.render.inert import envelope, text
from tests.fixtures.fakegpu.boxes import FAKEGPU, SYSTEM_PATH, compose
from tests.test_fleet import _record

HOSTILE = "\x1b[2J\x1b]0;pwned\x07"
SHOWN = "\\x1b[2J\\x1b]0;pwned\\x07"
RAW = ("\x1b[2J", "\x1b]0;pwned", "\x07")
JOB = "20261124-040000-eeeeee"
MARKUP_JOB = "20261124-040001-ffffff"


def test_control_characters_are_shown_escaped_and_the_rest_kept():
    assert text(f"GPU {HOSTILE} ok") == f"GPU {SHOWN} ok"
    assert text("a\nb\tc\r\x9b\u202eé 日本") == "a\\nb\\tc\\r\\x9b\\u202eé 日本"
    assert text("bad byte \udcff") == "bad byte \\xff"
    assert text(text(HOSTILE)) == SHOWN  # idempotent: an envelope made inert twice reads the same
    doc = {"summary": HOSTILE, "data": {"hosts": [{HOSTILE: [HOSTILE, 3, None, True]}]}}
    assert envelope(doc) == {"summary": SHOWN, "data": {"hosts": [{SHOWN: [SHOWN, 3, None, True]}]}}
    assert doc["summary"] == HOSTILE  # the envelope itself is left as it was, for --json


@pytest.fixture(scope="module")
def hostile(rig, tmp_path_factory):
    """A box whose two GPUs are named with escapes and whose jobs dir holds a failed job so named,
    with a log line holding them too; a fleet file naming it."""
    base = tmp_path_factory.mktemp("inert")
    scenario = base / "hostile-gpu"
    scenario.mkdir()
    (scenario / "scenario.json").write_text(json.dumps(
        {"base": str(FAKEGPU / "healthy"), "patch": {"0": {"name": f"H100 {HOSTILE}"},
                                                      "1": {"name": f"H100 {HOSTILE}"}}}))
    smi = scenario / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\nexec "${{FAKE_NVIDIA_SMI_PYTHON:-python3}}" -S {FAKEGPU}/fake_nvidia_smi.py '
                   f'{scenario} "$@"\n')
    smi.chmod(0o755)
    root, env = compose(base, "v2-healthy", "healthy", name="hostile-root")
    env["PATH"] = f"{scenario}:{SYSTEM_PATH}"
    jobs = base / "jobs"
    jobs.mkdir()
    boot = (root / "proc/sys/kernel/random/boot_id").read_text().strip()
    now = time.time()
    _record(jobs, JOB, {"pid": 999997, "start_ticks": 1, "boot_id": boot, "launched_at": now - 60, "name": HOSTILE},
            {"exit_code": 1, "signal": None, "ended_at": now - 30})
    _record(jobs, MARKUP_JOB, {"pid": 999996, "start_ticks": 1, "boot_id": boot, "launched_at": now - 50,
                               "name": "a[/]b [bold]c"}, {"exit_code": 0, "signal": None, "ended_at": now - 45})
    (jobs / JOB / "log").write_text(f"step 1\nRuntimeError: CUDA out of memory. {HOSTILE}\n")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now - 40))
    with open(root / "var/log/kern.log", "a") as f:
        f.write(f"{stamp} gpubox kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid=999997, GPU has fallen off the bus. "
                f"{HOSTILE}\n")
    rig.box("inert-box", env={**env, "GPUOPS_JOBS_DIR": str(jobs)})
    config = base / "config"
    (config / "gpuops").mkdir(parents=True)
    (config / "gpuops/fleet.toml").write_text('[[host]]\nalias = "inert-box"\n\n[fleet.f]\nhosts = ["inert-box"]\n')
    return {"env": {**rig.env(), "XDG_CONFIG_HOME": str(config)}, "jobs": jobs}


SURFACES = {
    "fleet": ["fleet", "--host", "inert-box", "--window", "0.2"],
    "launch-fleet": ["launch", "--fleet", "f", "--gpus", "4", "--cmd", "true"],
    "status": ["status", "--host", "inert-box"],
    "preflight": ["preflight", "--host", "inert-box"],
    "diagnose": ["diagnose", "--host", "inert-box", "--job", JOB],  # the Xid line
    "triage": ["triage", "--host", "inert-box", "--job", JOB],
}


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_box_text_reaches_a_pipe_escaped(cli, hostile, surface):
    r = cli(*SURFACES[surface], env=hostile["env"])
    out = r.stdout + r.stderr
    assert not [raw for raw in RAW if raw in out], out
    assert SHOWN in out, out


def test_json_keeps_the_exact_value(cli, hostile):
    fleet = json.loads(cli("fleet", "--host", "inert-box", "--window", "0.2", "--json", env=hostile["env"]).stdout)
    assert fleet["data"]["hosts"][0]["gpus"][0]["model"] == f"H100 {HOSTILE}"
    status = json.loads(cli("status", "--host", "inert-box", "--json", env=hostile["env"]).stdout)
    assert {j["job_id"]: j["name"] for j in status["data"]["jobs"]}[JOB] == HOSTILE


def test_a_name_that_reads_as_markup_is_shown_as_it_is_not_parsed(cli, hostile):
    """rich would read "[/]" as a closing tag with nothing to close and crash the table (exit 70)."""
    r = cli("status", "--host", "inert-box", env=hostile["env"])
    assert r.returncode == 0, r.stderr  # a listing, not a crash (70)
    assert "a[/]b [bold]c" in r.stdout


@pytest.mark.parametrize("surface", ["fleet", "status", "preflight"])
def test_box_text_reaches_a_terminal_escaped(hostile, surface):
    from tests import terminal

    code, raw = terminal.run(*SURFACES[surface], cols=140, env=hostile["env"])
    assert code in (0, 1), raw
    assert not [r for r in RAW if r in raw], raw
    assert SHOWN in raw


def test_fleet_watch_redraws_the_hostile_name_escaped(hostile):
    from tests import terminal

    code, raw = terminal.run("fleet", "--host", "inert-box", "--window", "0.2", "--watch", cols=140,
                             env=hostile["env"], interrupt_after=lambda out: b"Ctrl-C ends" in out)
    assert code in (0, 1, 130), raw
    assert not [r for r in RAW if r in raw], raw
    assert raw.count(SHOWN) >= 2  # the live frame and the last report


def test_logs_shows_the_jobs_colours_and_every_other_sequence_escaped(cli, hostile):
    """A log line is the box's text too: `logs` keeps its colours and line controls (a progress
    bar's \r) and shows a screen clear or a window title escaped, on stdout and in what gpuops says
    about it on stderr; --raw is the job's bytes as `cat` would show them."""
    r = cli("logs", "--host", "inert-box", "--job", JOB, "--follow", env=hostile["env"])
    assert SHOWN in r.stdout and not [raw for raw in RAW if raw in r.stdout], r.stdout
    assert SHOWN in r.stderr and not [raw for raw in RAW if raw in r.stderr], r.stderr
    exact = cli("logs", "--host", "inert-box", "--job", JOB, "--raw", env=hostile["env"])
    assert HOSTILE in exact.stdout


def test_a_log_keeps_colours_and_progress_bars_and_escapes_the_rest_whatever_the_chunks():
    from gpuops.render.inert import LogBytes

    data = "10%\r\x1b[1;32mok\x1b[0m \x1b[2J\x1b]0;pwned\x07\u202eevil\xff\n".encode("utf-8", "surrogateescape")
    data = data.replace("\xff".encode("utf-8", "surrogateescape"), b"\xff")
    want = b"10%\r\x1b[1;32mok\x1b[0m \\x1b[2J\\x1b]0;pwned\\x07\\u202eevil\\xff\n"
    for size in (1, 2, 3, 7, len(data)):
        f = LogBytes()
        assert b"".join(f.feed(data[i:i + size]) for i in range(0, len(data), size)) + f.close() == want, size


def test_a_next_step_naming_box_text_is_inert_and_still_the_same_command():
    """A next step is pasted: its words keep their exact bytes (bash's $'...'), none reaches the
    terminal raw."""
    import subprocess

    from gpuops.render import step_text

    argv = ["gpuops", "logs", "--host", "box 1", "--job", f"x{HOSTILE}\n'y\\z"]
    shown = step_text(envelope({"argv": argv}))
    assert not [raw for raw in RAW if raw in shown] and "\n" not in shown
    words = subprocess.run(["bash", "-c", f'printf "%s\\0" {shown}'], capture_output=True).stdout.split(b"\0")[:-1]
    assert words == [w.encode() for w in argv]
