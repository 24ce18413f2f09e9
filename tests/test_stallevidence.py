"""Stall evidence (gpuops.onbox.run.stallevidence): real hung Python processes, the real py-spy when
this machine has it, real /proc; the fake nvidia-smi for the GPU snapshot."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from gpuops.onbox.run import stallevidence as se
from gpuops.onbox.host import telemetry
from tests.fixtures.fakegpu.boxes import FAKEGPU, SYSTEM_PATH, compose

# The real py-spy, found before a test narrows PATH (its pyenv shim would need pyenv's own PATH).
PY_SPY = next((p for p in (os.path.join(os.path.dirname(sys.executable), "py-spy"), shutil.which("py-spy"))
               if p and os.path.exists(p)), None)
HUNG = textwrap.dedent("""
    import sys, threading
    def all_reduce_waiting_on_rank_3():
        print("step 41 done", flush=True)
        threading.Event().wait()
    all_reduce_waiting_on_rank_3()
""")


@pytest.fixture
def box(tmp_path, monkeypatch):
    _, env = compose(tmp_path, "v2-healthy", "collective-hang")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return tmp_path


@pytest.fixture
def hung(tmp_path):
    """A job whose one rank waits forever, writing its log where a job's goes."""
    log = tmp_path / "log"
    procs = []

    def start(code=HUNG):
        with open(log, "ab") as out:
            p = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out, start_new_session=True)
        procs.append(p)
        deadline = time.time() + 20
        while time.time() < deadline and b"step 41" not in (log.read_bytes() if log.exists() else b""):
            time.sleep(0.05)
        return p

    start.log = log
    yield start
    for p in procs:
        p.kill()
        p.wait()


def _path_without_py_spy(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", f"{bin_dir}:{FAKEGPU / 'collective-hang'}:{SYSTEM_PATH}")
    return bin_dir


@pytest.mark.skipif(PY_SPY is None, reason="py-spy is not installed here")
def test_a_hung_ranks_stack_is_captured_before_the_kill(box, hung, monkeypatch):
    """Once the stall kill has run, where each rank was stuck is lost for good: the dump must
    name the function the rank waits in."""
    monkeypatch.setenv("PATH", f"{FAKEGPU / 'collective-hang'}:{os.path.dirname(PY_SPY)}:{SYSTEM_PATH}")
    p = hung()
    doc = se.capture(str(hung.log), telemetry.members(p.pid, p.pid))
    (rank,) = doc["processes"]
    assert rank["python"] is True and rank["state"] == "S"
    assert "all_reduce_waiting_on_rank_3" in rank["stack"], rank.get("stack_error")
    assert doc["log_tail"] == ["step 41 done"]
    assert doc["gpu"]["gpus"][0]["util"] == 100.0 and doc["gpu"]["gpus"][0]["power"] == 118.42


def test_without_py_spy_each_process_keeps_its_state_and_wait_channel(box, hung, monkeypatch, tmp_path):
    """The issue's stall proof stops a rank with SIGSTOP: its state says so even with no py-spy."""
    _path_without_py_spy(monkeypatch, tmp_path)
    p = hung()
    os.kill(p.pid, signal.SIGSTOP)
    deadline = time.time() + 10
    while time.time() < deadline and se.process_facts(p.pid)["state"] != "T":
        time.sleep(0.02)
    try:
        doc = se.capture(str(hung.log), [p.pid])
    finally:
        os.kill(p.pid, signal.SIGCONT)
    (rank,) = doc["processes"]
    assert doc["py_spy"] is None and "stack" not in rank and "stack_error" not in rank
    assert rank["state"] == "T" and rank["threads"] == {"T": 1} and rank["comm"].startswith("python")
    assert rank["wchan"] is not None and sum(rank["thread_wchans"].values()) == 1


def test_a_py_spy_that_hangs_is_killed_at_its_deadline(box, hung, monkeypatch, tmp_path):
    """py-spy attaching to a process in the kernel's grip can block; the stall kill must not wait
    on it. (A stand-in py-spy that never answers: the real one cannot be made to hang on cue.)"""
    bin_dir = _path_without_py_spy(monkeypatch, tmp_path)
    fake = bin_dir / "py-spy"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    p = hung()
    started = time.time()
    doc = se.capture(str(hung.log), [p.pid], budget_s=5, per_process_s=1)
    assert time.time() - started < 4
    assert doc["processes"][0]["stack_error"] == "py-spy: timed out"


def test_a_spent_budget_skips_the_dumps_and_says_so(box, hung, monkeypatch, tmp_path):
    bin_dir = _path_without_py_spy(monkeypatch, tmp_path)
    (bin_dir / "py-spy").write_text("#!/bin/sh\necho should-not-run\n")
    (bin_dir / "py-spy").chmod(0o755)
    p = hung()
    doc = se.capture(str(hung.log), [p.pid], budget_s=0)
    assert doc["skipped"] == [{"pid": p.pid, "why": "the evidence budget was spent"}]
    assert doc["processes"][0]["state"] in ("S", "R")


def test_the_evidence_stays_under_its_bound_with_a_noisy_log(box, tmp_path):
    log = tmp_path / "log"
    log.write_bytes((b"x" * 5000 + b"\n") * 3000 + b"progress 1\rprogress 2\rlast line\n")
    doc = se.capture(str(log), [os.getpid()], max_bytes=16 << 10, budget_s=0)
    assert len(json.dumps(doc)) <= 16 << 10 and doc["truncated"] is True
    assert doc["log_tail"][-1] == "last line" and all(len(line) <= se.LINE_MAX for line in doc["log_tail"])


def test_the_log_tail_reads_only_the_end_of_a_huge_log(tmp_path):
    log = tmp_path / "log"
    with open(log, "wb") as f:
        f.write(b"early line\n" * 2_000_000)
        f.write(b"".join(b"step %d\n" % n for n in range(500)))
    tail = se.log_tail(str(log), lines=3)
    assert tail == ["step 497", "step 498", "step 499"]
    assert se.log_tail(str(tmp_path / "missing")) == []


def test_a_process_gone_before_the_capture_is_left_out(box, tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    doc = se.capture(str(tmp_path / "log"), [gone.pid, os.getpid()], budget_s=0)
    assert [p["pid"] for p in doc["processes"]] == [os.getpid()]


def test_a_broken_gpu_query_leaves_the_rest_of_the_evidence(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", SYSTEM_PATH)
    monkeypatch.setenv("GPUOPS_ROOT", str(tmp_path))
    doc = se.capture(str(tmp_path / "log"), [os.getpid()], budget_s=0)
    assert "not found on PATH" in doc["gpu"]["error"] and doc["processes"][0]["pid"] == os.getpid()


def test_the_evidence_is_saved_beside_the_jobs_record(tmp_path):
    path = se.save(str(tmp_path), 2, {"at": 1.0, "processes": []})
    assert path == str(tmp_path / "stall-2.json") and json.loads(open(path).read())["at"] == 1.0
