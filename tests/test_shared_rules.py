"""Where two verbs judge the same thing, they judge it by the same rule (gpuops' one home for each):
status and triage on progress, preflight, diagnose and triage on Xid codes, every screen on states."""

import ast
import os
from datetime import datetime
from pathlib import Path

import pytest

from gpuops import checks, engines, xid
from gpuops.diagnose import verdict
from gpuops import states
from gpuops.engines import statusrow
from gpuops.onbox.jobs import job_facts
from gpuops.onbox.triage import steps
from gpuops.onbox.triage import timestamps
from gpuops.onbox.triage.logtriage import classify_bytes, triage_file
from tests.triage.helpers import EXPECTED, log, now_of

WITH_STEPS = sorted(n for n, e in EXPECTED.items() if e["expect"]["progress"]["last_step"] is not None)


def _last_step_line(raw):
    """(form, the line holding the log's last step line, where that line ends)."""
    form = steps.pick(raw)
    last = form.last(raw)
    start = max(raw.rfind(b"\n", 0, last.start), raw.rfind(b"\r", 0, last.start)) + 1
    end = raw.find(b"\n", last.start)
    return form, raw[start:len(raw) if end < 0 else end], len(raw) if end < 0 else end + 1


def _stamped(name):
    """Whether the fixture's step lines print their own time: then the growth samples a supervisor
    writes (status's clock) and the text (triage's clock) date each step alike."""
    _, line, _ = _last_step_line(log(name).read_bytes())
    return timestamps.last_in(line) is not None


STAMPED = [n for n in WITH_STEPS if _stamped(n)]


def _unfinished(name):
    """Whether the fixture's last step line is short of its final step: cut there, a log that has
    done its final step reads as completed to triage (it is finishing: a checkpoint, an upload),
    while status still sees a live process; the stall rule is about a run still stepping."""
    p = EXPECTED[name]["expect"]["progress"]
    return p["total_steps"] is None or p["last_step"] < p["total_steps"] - 1


STEPPING = [n for n in STAMPED if _unfinished(n)]


def _job_dir(tmp_path, raw, now):
    """A job directory holding `raw` as its log, with the growth samples its supervisor would have
    written: each line reached the log at the time the line itself prints."""
    jdir = tmp_path / "job"
    jdir.mkdir()
    (jdir / "log").write_bytes(raw)
    samples, offset = [], 0
    for line in raw.split(b"\n"):
        offset += len(line) + 1
        found = timestamps.last_in(line)
        if found:
            samples.append("%.2f %d\n" % (found[1].epoch(now), min(offset, len(raw))))
    (jdir / "growth").write_text("".join(samples))
    return jdir


def _status(tmp_path, raw, now):
    jdir = _job_dir(tmp_path, raw, now)
    facts = {"job_id": "j", "now": now.timestamp(), "meta": {"launched_at": now.timestamp() - 86400},
             "liveness": "alive", "exit": None, "log_size": len(raw),
             "progress": job_facts._progress(str(jdir), str(jdir / "log"), None, 1 << 20)}
    return statusrow.derive(facts)


def _until_last_step(name):
    """The fixture up to its last step line: how the log looked while the job was training."""
    raw = log(name).read_bytes()
    form, line, end = _last_step_line(raw)
    return raw[:end], timestamps.last_in(line)[1], form


@pytest.mark.parametrize("quiet_s", [300, 2 * 3600])
@pytest.mark.parametrize("name", STEPPING)
def test_a_live_job_is_stalled_for_status_exactly_when_triage_calls_it_hanging(tmp_path, name, quiet_s):
    """status called a job STALLED after 10 step times (60 s floor) while triage waited 10 steps
    and at least 10 minutes: the same log read RUNNING in one and hanging in the other."""
    raw, stamp, form = _until_last_step(name)
    now = now_of(name) or datetime(2025, 3, 2, 12, 0)
    now = datetime.fromtimestamp(stamp.epoch(now) + quiet_s)
    by_triage = classify_bytes(raw, now=now, slurm_state="RUNNING")["status"]
    row = _status(tmp_path, raw, now)
    assert (row["state"], by_triage) in ((states.RUNNING, "running"), (states.STALLED, "hanging")), row.get("reason")
    # Status shows the log's own number; triage's projection is 0-indexed (a form that counts steps
    # done shows N for index N - 1: gpuops.onbox.triage.steps.counts_done).
    shown = EXPECTED[name]["expect"]["progress"]["last_step"] + (1 if steps.counts_done(form, form.first(raw)) else 0)
    assert row["progress"]["last"]["step"] == shown


@pytest.mark.parametrize("name", [n for n in STAMPED if EXPECTED[n]["expect"]["status"] in ("running", "hanging")])
def test_the_fixtures_own_verdict_is_status_state_too(tmp_path, name):
    now = now_of(name)
    by_triage = triage_file(log(name), now=now, slurm_state="RUNNING").data["status"]
    row = _status(tmp_path, log(name).read_bytes(), now)
    assert {"running": states.RUNNING, "hanging": states.STALLED}[by_triage] == row["state"], row.get("reason")


def _preflight_severity(code):
    facts = {"kernlog": {"readable": True, "xid": [{"code": code, "pci": "0000:3b:00", "count": 1,
                                                    "last_line": f"NVRM: Xid (PCI:0000:3b:00): {code}, pid=1"}]},
             "gpu": {"devices": [{"index": 0, "bus_id": "00000000:3B:00.0"}]}}
    return next(f.severity for f in checks.evaluate(facts) if f.id == "gpu.xid")


def _diagnose_blames_the_gpu(code):
    ev = {"exit": {"exit_code": 1, "signal": None}, "boot_id_then": "b", "boot_id_now": "b", "kernel_readable": True,
          "xid_after_launch": [{"code": code, "pci": "0000:3b:00", "line": f"NVRM: Xid (PCI:0000:3b:00): {code}, x"}]}
    return verdict.decide(ev)["verdict"] == "gpu-fault"


def _triage_blames_the_gpu(code):
    data = classify_bytes(b"[Sun Mar  2 10:20:00 2025] NVRM: Xid (PCI:0000:3b:00): %d, pid=1, name=python, x\n" % code)
    return data["primary"] == "gpu-fault"


def test_enough_fixtures_date_their_steps_in_more_than_one_form():
    """The comparisons above are only as good as the fixtures they run on: bars (tqdm) print no
    time of their own, but MaxText's and the `step N` forms do."""
    assert len(STAMPED) >= 30
    assert {steps.pick(log(n).read_bytes()).name for n in STAMPED} >= {"maxtext", "step"}


@pytest.mark.parametrize("code", sorted(xid.TABLE) + [999])
def test_one_xid_table_decides_preflight_diagnose_and_triage_alike(code):
    fatal = xid.is_fatal(code)
    assert (_preflight_severity(code) == "fail") is fatal
    assert _diagnose_blames_the_gpu(code) is fatal
    assert _triage_blames_the_gpu(code) is fatal


def test_the_table_has_the_codes_every_rule_once_named():
    # The fatal sets that lived in checks/kernlog.py and diagnose/verdict.py (they differed by 18).
    once_fatal = {46, 48, 54, 61, 62, 64, 74, 79, 95, 110, 119, 120, 136, 140, 143, 155, 157, 158, 167, 168, 169,
                  171, 172} | {63, 92, 94, 121, 150, 154}
    assert once_fatal <= set(xid.TABLE)
    assert {13, 31, 43, 45, 68, 109} <= {c for c, x in xid.TABLE.items() if x.kind == xid.APPLICATION}


def test_no_state_name_is_spelled_outside_the_state_table():
    """Adding a state means adding its row, not grepping for 'VANISHED' across packages."""
    package = Path(checks.__file__).resolve().parent.parent
    allowed = {package / "states.py"}
    names = set(states.NAMES)
    found = []
    for path in package.rglob("*.py"):
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(package)}:{node.lineno} {node.value!r}")
    # Slurm's own words for its states are Slurm's (triage maps them; each engine maps its own in
    # its modules, gpuops.engines), not gpuops' table.
    slurm = {"gpuops/onbox/triage/signatures.py", "gpuops/onbox/triage/classify.py"}
    found = [f for f in found if not any(f.startswith(os.path.relpath(s, "gpuops")) for s in slurm)]
    # An engine's box half (onbox/engines/slurm_watch.py asks Slurm whether the job still runs) is the engine's too.
    found = [f for f in found if not any(f.startswith((f"engines/{e}_", f"engines/{e}.py", f"onbox/engines/{e}_"))
                                         for e in engines.names())]
    assert not found, found
