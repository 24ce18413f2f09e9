"""A run's supervisor does no harm (issue 34), against the real sshd box: a stop is never lost to
a hand-over and --notify runs after the next attempt has started; a full disk neither kills the
supervisor nor costs the run its retries; a run whose supervisor died says so and is not said to
have vanished while its processes train on; a run reads as one run (one row, each attempt's own
log, the run's own state and duration). Every wait is on the box's own records."""

import json
import os
import signal
import sys

import pytest

from gpuops.jobs import runpolicy
from gpuops.onbox.host import procs
from gpuops.onbox.run import runevents
from gpuops.ops import diagnose, jobs as op, joblogs, triage, wait as waiting
from tests.jobs.helpers import event_kinds as kinds, kill_everything, run_record as record, tmpfs, wait_for
from tests.jobs.helpers import wait_run_end as wait_end
from tests.jobs.test_runloop import launch, wait_line

def live(jobs_dir, run):
    """Pids of every attempt of the run that still live (by the GPUOPS_JOB_ID they carry)."""
    ids = set(record(jobs_dir, run)["attempts"])
    return [p for p in procs.pids() if procs.job_tag(p) in ids and (procs.stat(p) or {}).get("state") not in ("Z", "X")]


NOTIFY = """import json, os, pathlib, sys, time
event = json.load(sys.stdin)
if event["kind"] == "resumed":
    meta = pathlib.Path({jobs!r}, event["job"], "meta.json")
    started = meta.exists() and bool(json.loads(meta.read_text()).get("pid"))
    pathlib.Path({heard!r}).write_text(json.dumps({{"started": started}}))
    t = time.time()
    while not os.path.exists({go!r}) and time.time() - t < 6:  # a slow alert, bounded like notify's own 8 s
        time.sleep(0.05)
"""


def test_a_stop_while_notify_is_told_of_the_next_attempt_stops_it_and_the_run(box, jobs_dir, tmp_path):
    ckpt, heard, go = tmp_path / "ckpt", tmp_path / "heard", tmp_path / "go"
    ckpt.mkdir()
    hook = tmp_path / "notify.py"
    hook.write_text(NOTIFY.format(jobs=str(jobs_dir), heard=str(heard), go=str(go)))
    cmd = (f'if [ -n "$GPUOPS_RESUME_FROM" ]; then echo second; sleep 600; else mkdir -p {ckpt}/.t; '
           f'echo x > {ckpt}/.t/data; mv {ckpt}/.t {ckpt}/step-5; kill -9 $$; fi')
    run = launch(box, jobs_dir, cmd, max_retries="3", checkpoint_dir=str(ckpt),
                 notify=f"{sys.executable} {hook}")
    assert wait_for(heard.exists, timeout=60), "the next attempt was never announced"
    # notify runs once the attempt has started: never inside the hand-over
    assert json.loads(heard.read_text()) == {"started": True}
    doc = op.stop(box, job=run, jobs_dir=str(jobs_dir), yes=True, grace=2)
    go.write_text("")
    assert doc["ok"], doc["summary"]
    rec = record(jobs_dir, run)
    assert rec["phase"] == "ended" and rec["final"]["class"] == "cancelled" and len(rec["attempts"]) == 2
    assert wait_for(lambda: not live(jobs_dir, run), timeout=10), "an attempt trains on after the stop"


def test_a_stop_between_attempts_ends_the_run_and_says_so(box, jobs_dir):
    run = launch(box, jobs_dir, "kill -9 $$", max_retries="3", backoff_s=60)
    assert wait_for(lambda: record(jobs_dir, run)["phase"] == "backoff", timeout=30)
    doc = op.stop(box, job=run, jobs_dir=str(jobs_dir), yes=True, grace=2)
    assert doc["ok"] and doc["summary"].startswith(f"stopped run {run} between attempts"), doc["summary"]
    assert (jobs_dir / run / "run-stop.json").exists()
    rec = record(jobs_dir, run)
    assert rec["phase"] == "ended" and rec["attempts"] == [run] and rec["final"]["class"] == "cancelled"


@pytest.fixture
def full_jobs_dir(tmp_path):
    """A jobs directory on a 2 MiB tmpfs: the disk a job can fill."""
    with tmpfs(tmp_path / "small", "2m") as where:
        yield where / "jobs"
        kill_everything(where / "jobs")


def test_a_full_disk_costs_the_run_nothing_but_time(box, full_jobs_dir, tmp_path):
    heard, marker = tmp_path / "heard.jsonl", tmp_path / "failed-once"
    fill = full_jobs_dir / "fill"
    cmd = (f"if [ -e {marker} ]; then echo fine; else touch {marker}; head -c 4M /dev/zero > {fill}; "
           f"kill -9 $$; fi")
    run = launch(box, full_jobs_dir, cmd, max_retries="2", notify=f"cat >> {heard}")
    # while the disk is full: the failure and the retry are still told, and nothing can be written
    assert wait_for(lambda: heard.exists() and '"retrying"' in heard.read_text(), timeout=60), \
        heard.read_text() if heard.exists() else "nothing heard"
    assert not (full_jobs_dir / run / "exit.json").exists()
    fill.unlink()
    doc = wait_end(box, full_jobs_dir, run, timeout=90)
    rec = record(full_jobs_dir, run)
    assert len(rec["attempts"]) == 2 and rec["final"]["class"] is None
    first_end = json.loads((full_jobs_dir / run / "exit.json").read_text())  # written once the disk took it
    assert first_end["signal"] == "SIGKILL"
    assert kinds(doc) == ["attempt-started", "attempt-failed", "retrying", "attempt-started", "completed"]
    told = [json.loads(line)["kind"] for line in heard.read_text().splitlines()]
    assert told == ["attempt-failed", "retrying", "completed"]


def test_a_run_that_gives_up_on_a_full_disk_says_so_and_records_it_once_it_can(box, full_jobs_dir, tmp_path):
    heard, fill = tmp_path / "heard.jsonl", full_jobs_dir / "fill"
    run = launch(box, full_jobs_dir, f"head -c 4M /dev/zero > {fill}; exit 3", max_retries="0",
                 notify=f"cat >> {heard}")
    assert wait_for(lambda: heard.exists() and '"gave-up"' in heard.read_text(), timeout=60)
    assert record(full_jobs_dir, run)["phase"] == "running"  # what the disk holds: nothing newer fits
    fill.unlink()
    assert wait_for(lambda: record(full_jobs_dir, run)["phase"] == "ended", timeout=20)
    assert json.loads((full_jobs_dir / run / "exit.json").read_text())["exit_code"] == 3
    assert [e["kind"] for e in runevents.read(str(full_jobs_dir / run))] == ["attempt-started", "attempt-failed",
                                                                           "gave-up"]


def test_a_run_whose_supervisor_died_says_so_and_is_not_vanished_while_it_trains(box, jobs_dir):
    run = launch(box, jobs_dir, "echo up; sleep 600; echo done", max_retries="2")
    wait_line(box, jobs_dir, run, "^up$", timeout=30)
    meta = json.loads((jobs_dir / run / "meta.json").read_text())
    os.kill(meta["wrapper_pid"], signal.SIGKILL)
    assert wait_for(lambda: not procs.alive(meta["wrapper_pid"]), timeout=10)
    row = op.status(box, job=run, jobs_dir=str(jobs_dir))["data"]["jobs"][0]
    assert row["state"] == "RUNNING" and row["run"]["unsupervised"]
    assert "unsupervised: retries, stall kill, time limit and retention are off" in row["hint"]
    said = diagnose.diagnose(box, job=run, jobs_dir=str(jobs_dir))
    assert any("unsupervised" in e for e in said["data"]["evidence"]), said["data"]["evidence"]
    # the leader killed too (a `pkill -9 -f gpuops` matches its `bash .../cmd`): its child trains on
    os.kill(meta["pid"], signal.SIGKILL)
    assert wait_for(lambda: not procs.alive(meta["pid"], meta["start_ticks"]), timeout=10)
    row = op.status(box, job=run, jobs_dir=str(jobs_dir))["data"]["jobs"][0]
    assert row["state"] == "RUNNING" and "process(es) of the job still run" in row["reason"], row
    for pid in live(jobs_dir, run):
        os.kill(pid, signal.SIGKILL)
    row = wait_for(lambda: (lambda r: r if r["state"] == "VANISHED" else None)(
        op.status(box, job=run, jobs_dir=str(jobs_dir))["data"]["jobs"][0]), timeout=15)
    assert row and row["state"] == "VANISHED"


def test_a_run_reads_as_one_run_its_attempts_each_as_themselves(box, jobs_dir, tmp_path):
    marker, ckpt = tmp_path / "failed-once", tmp_path / "ckpt"
    ckpt.mkdir()
    cmd = (f'echo "attempt $GPUOPS_ATTEMPT from ${{GPUOPS_RESUME_FROM:-nothing}}"; if [ -e {marker} ]; then '
           f'echo up; sleep 3; echo fine; else mkdir -p {ckpt}/.t; echo x > {ckpt}/.t/data; '
           f'mv {ckpt}/.t {ckpt}/step-5; touch {marker}; kill -9 $$; fi')
    doc = op.launch(box, command=cmd, jobs_dir=str(jobs_dir), key="K1",
                    policy=runpolicy.build(max_retries="2", checkpoint_dir=str(ckpt), backoff_s=0.5))
    run = doc["data"]["job"]["job_id"]
    wait_line(box, jobs_dir, run, "^up$", timeout=60)
    rows = op.status(box, jobs_dir=str(jobs_dir))["data"]["jobs"]
    assert [(r["job_id"], r["state"]) for r in rows] == [(record(jobs_dir, run)["current"], "RUNNING")], rows
    assert rows[0]["run"]["attempt"] == 2 and rows[0]["earlier_attempts"] == 1
    every = op.status(box, jobs_dir=str(jobs_dir), all_attempts=True)["data"]["jobs"]
    first = every[0]["earlier"][0]
    assert first["job_id"] == run and first["state"] == "KILLED" and first["run"]["resumed_from"] is None
    assert every[0]["run"]["resumed_from"] == f"{ckpt}/step-5"  # the attempt's own, not the run's latest
    page = joblogs.logs(box, job=run, jobs_dir=str(jobs_dir), attempt=1)
    assert page["data"]["text"].startswith("attempt 1 from nothing\n"), page["data"]
    assert "--attempt 1 " in " ".join(page["next"][0]["argv"]) + " "  # its next page is the same log's
    waited = waiting.wait(box, job=run, jobs_dir=str(jobs_dir), timeout_s=60)
    assert waited["data"]["job_id"] == run and waited["data"]["job"]["job_id"] != run
    assert waited["summary"].startswith(f"{run}: COMPLETED after ") and waited["data"]["duration_s"] >= 3
    assert diagnose.diagnose(box, job=run, jobs_dir=str(jobs_dir), attempt=1)["data"]["job"] == run
    assert triage.triage_remote(box, job=run, jobs_dir=str(jobs_dir), attempt=1)["data"]["run"]["attempt"] == 1
    again = op.launch(box, command=cmd, jobs_dir=str(jobs_dir), key="K1")
    assert again["data"]["existing"] and again["data"]["job"]["state"] == "COMPLETED", again["summary"]
    assert f"run {run} (COMPLETED)" in again["summary"]


def test_a_retry_of_a_run_whose_supervisor_is_gone_keeps_its_policy_and_resumes(box, jobs_dir, tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    cmd = (f'if [ -n "$GPUOPS_RESUME_FROM" ]; then echo "resumed from $GPUOPS_RESUME_FROM"; exit 0; fi; '
           f'for i in 5 10; do mkdir -p {ckpt}/.t; echo x > {ckpt}/.t/data; mv {ckpt}/.t {ckpt}/step-$i; done; '
           f'echo saved; sleep 600')
    run = launch(box, jobs_dir, cmd, max_retries="2", checkpoint_dir=str(ckpt), stall_after="10m")
    wait_line(box, jobs_dir, run, "^saved$", timeout=30)
    kill_everything(jobs_dir)  # the supervisor and the job, as a reboot would
    doc = op.retry(box, job=run, jobs_dir=str(jobs_dir))
    assert doc["ok"] and doc["summary"].endswith(f"resuming from {ckpt}/step-10"), doc["summary"]
    new = doc["data"]["job"]["job_id"]
    meta = json.loads((jobs_dir / new / "meta.json").read_text())
    assert meta["run"] == {"id": new, "attempt": 1} and meta["parent_job_id"] == run
    assert meta["policy"]["max_retries"] == 2 and meta["policy"]["stall_after_s"] == 600
    assert meta["resumed_from"] == f"{ckpt}/step-10"
    done = wait_end(box, jobs_dir, new, timeout=60)
    assert "resumed" in kinds(done) and (jobs_dir / new / "log").read_text() == f"resumed from {ckpt}/step-10\n"
