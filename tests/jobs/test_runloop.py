"""Runs that look after themselves, against a real sshd box and real torch (CPU, gloo): the
supervisor on the box retries what is transient from the newest complete checkpoint, ends a
stalled attempt after saving evidence, ends the run at its time limit, and tells the --notify
command every event in order (issue 26's proof list). Every wait is on the box's own records:
a log line, an event, the run's end; no sleep decides an outcome."""

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from gpuops.jobs import runpolicy
from gpuops.ops import jobs as op, wait as waiting
from gpuops.onbox.host import procs
from gpuops.onbox.triage import retrypolicy
from gpuops.onbox.run import runevents
from tests.conftest import FIXTURES
from tests.jobs.helpers import event_kinds as kinds, run_record as record, tmpfs, wait_run_end as wait_end

DDP = FIXTURES / "runs" / "ddp_resume.py"
FAST = {"backoff_s": 0.5}


def ddp(ckpt, *extra, steps=30):
    return (f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 2 {DDP} --ckpt {ckpt} "
            f"--steps {steps} --every 5 --step-seconds 0.2 " + " ".join(extra))


def launch(box, jobs_dir, command, workdir=None, **policy):
    flags = {k: v for k, v in policy.items() if k in runpolicy.FLAGS}
    extra = {k: v for k, v in policy.items() if k not in runpolicy.FLAGS}
    doc = op.launch(box, command=command, jobs_dir=str(jobs_dir), env={"OMP_NUM_THREADS": "1"}, workdir=workdir,
                    policy=runpolicy.build(**flags, **dict(FAST, **extra)))
    assert doc["ok"], doc["summary"]
    return doc["data"]["job"]["job_id"]


def wait_line(box, jobs_dir, run, regex, timeout=180):
    doc = waiting.wait(box, job=run, jobs_dir=str(jobs_dir), log_regex=regex, timeout_s=timeout)
    assert doc["data"]["reason"] == "match", doc["summary"]
    return doc


def attempt_pids(jobs_dir, run):
    """{local rank or 'launcher': pid} of the run's current attempt."""
    current = record(jobs_dir, run)["current"]
    out = {}
    for pid in procs.pids():
        if procs.job_tag(pid) != current:
            continue
        cmd = procs.cmdline(pid) or ""
        if "torch.distributed.run" in cmd:
            out["launcher"] = pid
        elif "ddp_resume" in cmd:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            rank = next((int(e[11:]) for e in env if e.startswith(b"LOCAL_RANK=")), None)
            out[rank] = pid
    return out


@pytest.fixture
def ckpt(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    return d


def test_a_rank_killed_with_sigkill_is_retried_from_the_newest_complete_checkpoint(box, jobs_dir, ckpt):
    run = launch(box, jobs_dir, ddp(ckpt), max_retries="2", checkpoint_dir=str(ckpt),
                 resume_arg="--resume {checkpoint}")
    wait_line(box, jobs_dir, run, r"^step 12 ")
    os.kill(attempt_pids(jobs_dir, run)[1], signal.SIGKILL)
    doc = wait_end(box, jobs_dir, run)
    rec = record(jobs_dir, run)
    # transient: a kill with no OOM (unknown-death), or the peer's broken collective (nccl-timeout),
    # whichever rank 0's last lines show before torchrun stops it
    assert len(rec["attempts"]) == 2 and rec["decisions"][0]["class"] in retrypolicy.TRANSIENT
    resumed = next(e for e in doc["data"]["events"] if e["kind"] == "resumed")
    step = int(resumed["checkpoint"].rsplit("-", 1)[1])
    assert step >= 10 and step % 5 == 0
    log = (jobs_dir / rec["attempts"][1] / "log").read_text()
    assert f"resumes from checkpoint {ckpt}/checkpoint-{step} (the newest complete one)" in log
    assert f"resumed from {ckpt}/checkpoint-{step} at step {step + 1}" in log and "final step 30" in log
    child = json.loads((jobs_dir / rec["attempts"][1] / "meta.json").read_text())
    assert child["parent_job_id"] == run and child["run"] == {"id": run, "attempt": 2}


def test_a_stopped_rank_is_a_stall_evidence_first_then_the_tree_stopped_and_retried(box, jobs_dir, ckpt):
    run = launch(box, jobs_dir, ddp(ckpt), max_retries="1", checkpoint_dir=str(ckpt),
                 resume_arg="--resume {checkpoint}", stall_after="20s")
    wait_line(box, jobs_dir, run, r"^step 8 ")
    first = record(jobs_dir, run)["current"]
    stopped = attempt_pids(jobs_dir, run)
    os.kill(stopped[1], signal.SIGSTOP)
    doc = wait_end(box, jobs_dir, run)
    assert kinds(doc)[:4] == ["attempt-started", "stalled", "attempt-failed", "retrying"]
    evidence = json.loads((jobs_dir / first / "stall-1.json").read_text())
    states = {p["pid"]: p["state"] for p in evidence["processes"]}
    assert states[stopped[1]] == "T" and evidence["log_tail"][-1].startswith("step ")
    ended = json.loads((jobs_dir / first / "exit.json").read_text())
    assert ended["ended_by"] == "stall" and ended["stall_evidence"] == "stall-1.json"
    assert not any(procs.alive(p) for p in stopped.values())  # the whole tree, the stopped rank too
    rows = op.status(box, jobs_dir=str(jobs_dir), all_attempts=True)["data"]["jobs"]  # the run's row: its last
    earlier = [e for r in rows for e in r.get("earlier") or []]
    assert "stalled (class hang)" in next(e for e in earlier if e["job_id"] == first)["reason"]


def test_a_python_exception_is_not_retried(box, jobs_dir, ckpt):
    run = launch(box, jobs_dir, ddp(ckpt, "--fail-at 3"), max_retries="3", checkpoint_dir=str(ckpt),
                 resume_arg="--resume {checkpoint}")
    doc = wait_end(box, jobs_dir, run, state="FAILED")
    rec = record(jobs_dir, run)
    assert rec["attempts"] == [run] and rec["final"]["class"] == "python-exception"
    assert kinds(doc) == ["attempt-started", "attempt-failed", "gave-up"]


def test_max_runtime_ends_the_run_on_the_box_as_timeout(box, jobs_dir):
    run = launch(box, jobs_dir, "echo started; sleep 600", max_retries="3", max_runtime="10s")
    doc = wait_end(box, jobs_dir, run, timeout=60, state="TIMEOUT")
    assert 10 <= doc["data"]["job"]["duration_s"] < 25
    assert kinds(doc) == ["attempt-started", "timed-out"] and len(record(jobs_dir, run)["attempts"]) == 1


def test_a_sigterm_from_outside_is_a_preemption_retried_and_resumed(box, jobs_dir, ckpt):
    run = launch(box, jobs_dir, ddp(ckpt), max_retries="2", checkpoint_dir=str(ckpt),
                 resume_arg="--resume {checkpoint}")
    wait_line(box, jobs_dir, run, r"^step 12 ")
    # a spot reclaim signals every process of the box, the run's supervisor among them
    for pid in attempt_pids(jobs_dir, run).values():
        os.kill(pid, signal.SIGTERM)
    os.kill(json.loads((jobs_dir / run / "meta.json").read_text())["wrapper_pid"], signal.SIGTERM)
    doc = wait_end(box, jobs_dir, run)
    assert record(jobs_dir, run)["decisions"][0]["class"] == "preempted"
    assert "resumed" in kinds(doc)


def test_a_checkpoint_being_written_when_the_run_dies_is_never_resumed_from(box, jobs_dir, ckpt, tmp_path):
    run = launch(box, jobs_dir, ddp(ckpt, f"--die-mid-save 15 --once {tmp_path / 'once'}"), max_retries="2",
                 checkpoint_dir=str(ckpt), resume_arg="--resume {checkpoint}")
    doc = wait_end(box, jobs_dir, run)
    resumed = next(e for e in doc["data"]["events"] if e["kind"] == "resumed")
    assert resumed["checkpoint"] == f"{ckpt}/checkpoint-10"
    assert {"name": "checkpoint-15", "why": "no trainer_state.json, which its writer puts there last"} in \
        resumed["skipped"]


def test_notify_hears_every_notified_event_in_order_on_its_stdin(box, jobs_dir, tmp_path):
    heard = tmp_path / "heard.jsonl"
    marker = tmp_path / "failed-once"
    command = f"if [ -e {marker} ]; then echo fine; else touch {marker}; kill -9 $$; fi"
    run = launch(box, jobs_dir, command, max_retries="2", notify=f"cat >> {heard}")
    doc = wait_end(box, jobs_dir, run)
    recorded = [e for e in runevents.read(str(jobs_dir / run)) if e["kind"] in runevents.NOTIFIED]
    got = [json.loads(line) for line in heard.read_text().splitlines()]
    assert got == recorded and [e["kind"] for e in got] == ["attempt-failed", "retrying", "completed"]


def test_gpuops_stop_ends_the_run_and_is_never_retried(box, jobs_dir):
    run = launch(box, jobs_dir, "echo up; sleep 600", max_retries="3")
    wait_line(box, jobs_dir, run, "^up$", timeout=30)
    doc = op.stop(box, job=run, jobs_dir=str(jobs_dir), yes=True, grace=2)
    assert doc["ok"] and doc["data"]["state"] == "KILLED", doc["summary"]
    rec = record(jobs_dir, run)
    assert rec["phase"] == "ended" and rec["attempts"] == [run] and rec["final"]["class"] == "cancelled"


def saves(ckpt, count, size, pause):
    """A job that saves `count` checkpoints of `size` bytes, each through a hidden name and a rename."""
    return (f"for i in $(seq 1 {count}); do mkdir -p {ckpt}/.tmp-$i; head -c {size} /dev/zero > {ckpt}/.tmp-$i/data "
            f"|| true; mv {ckpt}/.tmp-$i {ckpt}/step-$i; echo step $i; sleep {pause}; done")


def test_retention_keeps_the_k_newest_complete_checkpoints(box, jobs_dir, ckpt):
    run = launch(box, jobs_dir, saves(ckpt, 8, 1000, 0.5), checkpoint_dir=str(ckpt), keep_checkpoints="2",
                 checkpoint_every_s=1)
    wait_end(box, jobs_dir, run, timeout=60)
    assert sorted(p.name for p in ckpt.iterdir()) == ["step-7", "step-8"]
    assert set(record(jobs_dir, run)["pruned"]) == {f"step-{i}" for i in range(1, 7)}


@pytest.fixture
def small_disk(tmp_path):
    with tmpfs(tmp_path / "small", "1m") as where:
        yield where


def test_a_filling_checkpoint_disk_is_a_disk_low_event(box, jobs_dir, small_disk):
    ckpt = small_disk / "ckpt"
    run = launch(box, jobs_dir, saves(ckpt, 6, 300_000, 1.5), checkpoint_dir=str(ckpt), checkpoint_every_s=0.5)
    seen, after = [], 0
    while "disk-low" not in seen:
        doc = waiting.wait(box, job=run, jobs_dir=str(jobs_dir), until=(waiting.EVENT,), timeout_s=60,
                           after_event=after)
        assert doc["data"]["reason"] == "event", (doc["summary"], seen)
        seen += [e["kind"] for e in doc["data"]["events"]]
        after = doc["data"]["events"][-1]["seq"]
    low = next(e for e in doc["data"]["events"] if e["kind"] == "disk-low")
    assert low["free_bytes"] < low["need_bytes"] and low["dir"] == str(ckpt)
    op.stop(box, job=run, jobs_dir=str(jobs_dir), yes=True, grace=1)


def test_checkpoint_names_reach_the_command_quoted_and_unsafe_ones_are_skipped(box, jobs_dir, ckpt, tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(f"""if [ -e {tmp_path}/m ]; then printf 'arg[%s]\\n' "$@"; exit 0; fi
touch {tmp_path}/m
mkdir '{ckpt}/step-99$(touch PWNED)' {ckpt}/$'step-100\\nx' '{ckpt}/step-101..x'
kill -9 $$
""")
    # a glob: `step-99$(touch PWNED)` is no name a library writes, so without one it is no checkpoint at all
    run = launch(box, jobs_dir, f"bash {script}", workdir=str(tmp_path), max_retries="1",
                 checkpoint_dir=f"{ckpt}:step-*", resume_arg="--resume {checkpoint}")
    doc = wait_end(box, jobs_dir, run, timeout=60)
    log = (jobs_dir / record(jobs_dir, run)["attempts"][1] / "log").read_text()
    assert f"arg[--resume]\narg[{ckpt}/step-99$(touch PWNED)]\n" in log
    assert not (tmp_path / "PWNED").exists()
    skipped = {e["name"]: e["why"] for e in doc["data"]["events"] if e["kind"] == "checkpoint-skipped"}
    assert skipped == {"step-100\nx": "a control character in its name", "step-101..x": "'..' in its name"}
