"""gpuops.onbox.triage.logclass: the verdict the box's supervisor will retry on is the workstation's
`gpuops triage` verdict, on every log of the triage corpus (tests/fixtures/triage and the
frameworks' logs), whichever way it runs: in-process, as the shipped bundle under this machine's
python3 and under python3.6 -S, and through the resident helper on a real sshd box.

The bug this prevents: a second copy of triage's rules for the box (issue 26), or a bundle that
ships them to an interpreter they do not run on, drifting from what `gpuops triage` says of the
same log: a run retried on a class triage would not give, or given up on one it would retry.
"""

import json
import subprocess
import sys
from datetime import datetime

import pytest

from gpuops import onbox
from gpuops.onbox.triage import logclass
from gpuops.ops.triage import read_excerpt
from gpuops.remote import wrap
from gpuops.remote.local import LocalTarget
from gpuops.remote.targets import target_for
from gpuops.onbox.triage.logtriage import triage_file, triage_pieces
from tests.test_onbox_bundle import _python36
from tests.test_resident import _armed_box, box_runtime, reuse  # noqa: F401 - fixtures
from tests.triage.helpers import EXPECTED, FIXTURES, log, long_noisy_hanging_log, now_of, state_of

_FRAMEWORKS = json.loads((FIXTURES / "frameworks" / "expected.json").read_text())
# (id, log, the clock triage reads it at, the job's state): every log the triage corpus tests.
CASES = [(name, log(name), now_of(name), state_of(name)) for name in sorted(EXPECTED)] + [
    ("frameworks/" + name, FIXTURES / "frameworks" / (name + ".log"), datetime.fromisoformat(e["now"]),
     e["slurm_state"]) for name, e in sorted(_FRAMEWORKS.items())]
IDS = [c[0] for c in CASES]
_WORKSTATION = {}


def _workstation(case):
    """What `gpuops triage --log LOG` answers (gpuops.ops.triage.triage_local, given the state and
    clock), on the keys the box's answer has."""
    name, path, now, state = case
    if name not in _WORKSTATION:
        data = triage_file(path, now=now, slurm_state=state).data
        _WORKSTATION[name] = {k: data[k] for k in logclass.KEYS}
    return _WORKSTATION[name]


def _batch():
    return {"logs": [{"log": str(path), "now": now.timestamp(), "job_state": state} for _, path, now, state in CASES]}


def _shipped(python=None):
    """The answers of the logclass bundle run as an exec channel runs it: `python3 -S -c BOOTSTRAP`,
    the script and then the request on stdin."""
    src = onbox.script("logclass")
    line = wrap.python_line(len(src), (), site=False, python=python)
    out = subprocess.run(["sh", "-c", line], input=src + json.dumps(_batch()).encode(), capture_output=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    answers = json.loads(out.stdout)["answers"]
    assert [a["log"] for a in answers] == [str(c[1]) for c in CASES]
    return {c[0]: answer for c, answer in zip(CASES, answers)}


def _verdict(answer):
    assert "error" not in answer, answer
    return {k: answer[k] for k in logclass.KEYS}


@pytest.fixture(scope="module")
def under_python3():
    return _shipped()


@pytest.fixture(scope="module")
def under_python36():
    python = _python36()
    if python is None:
        pytest.skip("no python3.6 on this machine (pyenv's 3.6.15 is where the suite looks): the oldest python3 a "
                    "box may have is not tried")
    return _shipped(python)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_in_process_the_box_says_what_gpuops_triage_says(case):
    _, path, now, state = case
    assert logclass.classify_log(path, now=now, job_state=state) == _workstation(case)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_shipped_bundle_says_what_gpuops_triage_says(case, under_python3):
    assert _verdict(under_python3[case[0]]) == _workstation(case)
    assert under_python3[case[0]]["size"] == case[1].stat().st_size


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_under_python36_without_site_the_bundle_says_what_gpuops_triage_says(case, under_python36):
    assert _verdict(under_python36[case[0]]) == _workstation(case)


def test_through_the_resident_helper_the_box_says_what_gpuops_triage_says(rig, reuse, box_runtime):  # noqa: F811
    """The helper compiled triage's modules when it was armed (gpuops.onbox.sources ships them);
    the call is a fork on the box, no exec channel."""
    box = _armed_box(rig, "logclass-res", box_runtime)
    before = box.exec_requests()
    t = target_for(box.spec)
    try:
        doc = t.run_onbox("logclass", stdin=json.dumps(_batch()).encode(), timeout_s=300)
    finally:
        t.close()
    assert box.exec_requests() == before, "the call rode the resident helper"
    got = {c[0]: _verdict(a) for c, a in zip(CASES, doc["answers"])}
    assert len(doc["answers"]) == len(CASES)
    wrong = sorted(name for name, verdict in got.items() if verdict != _workstation(next(c for c in CASES
                                                                                         if c[0] == name)))
    assert not wrong, wrong


def test_a_log_longer_than_its_excerpt_is_read_as_triage_job_reads_it(tmp_path, monkeypatch):
    """A config dump pushed the first step past the head and a hung job printed more noise after its
    last step than the tail holds: the box reads the same head, step lines and tail that
    `triage --job` fetches, so it finds the same last step (316, not the tail's none)."""
    monkeypatch.setenv("GPUOPS_JOBS_DIR", str(tmp_path))
    (tmp_path / "j1").mkdir()
    path = tmp_path / "j1" / "log"
    path.write_bytes(b"".join(long_noisy_hanging_log()))
    head, tail = 16 << 10, 256 << 10
    _, pieces, _, _, _ = read_excerpt(LocalTarget(), "j1", head=head, tail=tail)
    now = now_of("status_hanging")
    job = triage_pieces(pieces, now=now, slurm_state="RUNNING").data
    box = logclass.classify_log(path, now=now, job_state="RUNNING", head=head, tail=tail)
    assert box == {k: job[k] for k in logclass.KEYS}
    assert (box["status"], box["primary"], box["progress"]["last_step"]) == ("hanging", "hang", 316)


def test_the_supervisors_own_record_decides_as_it_does_for_triage_job():
    """A log that just stops: the exit record the supervisor writes says the job ended, on the box
    as in `triage --job` (without it, nothing says so and no death is claimed)."""
    path, now = log("status_unknown_death"), now_of("status_unknown_death")
    record = {"exit_code": None, "signal": "SIGKILL"}
    box = logclass.classify_log(path, now=now, job_state="KILLED", exit_record=record)
    data = triage_pieces([(1, path.read_bytes())], now=now, slurm_state="KILLED", exit_record=record).data
    assert box == {k: data[k] for k in logclass.KEYS} and box["status"] == "failed"
    assert logclass.classify_log(path, now=now)["status"] == "unknown"


def test_one_unreadable_log_is_answered_as_such_and_the_others_still_are(tmp_path, capsys, monkeypatch):
    import io

    good = log(sorted(EXPECTED)[0])
    request = {"logs": [{"log": str(tmp_path / "gone.log")}, {"log": str(good), "now": "today"},
                        {"log": str(good), "now": now_of(good.stem).timestamp()}, {"nolog": 1}]}
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(request).encode())))
    assert logclass.main([]) == 0
    gone, bad_now, ok, nameless = json.loads(capsys.readouterr().out)["answers"]
    assert gone["error"].startswith("cannot read ") and "No such file" in gone["error"]
    assert "now is epoch seconds" in bad_now["error"]
    assert _verdict(ok) == _workstation(CASES[0]) and ok["size"] == good.stat().st_size
    assert nameless["log"] is None and "names its log" in nameless["error"]


def test_a_request_that_is_not_one_is_a_usage_error(capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"[1, 2]")))
    assert logclass.main([]) == 2
    assert "usage: logclass" in capsys.readouterr().err
