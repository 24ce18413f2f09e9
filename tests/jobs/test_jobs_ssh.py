"""Detached jobs against a real sshd: survival, exit records, liveness, logs, stop, retry, queue."""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gpuops.ops import jobs as op
from gpuops.remote import target_for
from tests.jobs.helpers import meta_of, wait_for


def job_state(box, jobs_dir, job, **kw):
    doc = op.status(box, job=job, jobs_dir=str(jobs_dir), **kw)
    return doc["data"]["jobs"][0]


def launched(box, jobs_dir, command, **kw):
    doc = op.launch(box, command=command, jobs_dir=str(jobs_dir), **kw)
    assert doc["ok"], doc["summary"]
    return doc["data"]["job"]["job_id"]


def ended(box, jobs_dir, job, timeout=10):
    return wait_for(lambda: (r := job_state(box, jobs_dir, job))["state"] not in ("RUNNING", "STARTING") and r,
                    timeout=timeout)


def test_job_survives_the_ssh_connection_being_cut(box, jobs_box, jobs_dir):
    job = launched(box, jobs_dir, "for i in $(seq 1 8); do echo tick $i; sleep 0.25; done; echo finished")
    meta = meta_of(jobs_dir, job)
    # launch returned only after the start record existed, with a live pid in its own session
    assert os.getsid(meta["pid"]) == meta["pid"] == meta["pgid"]
    assert os.getsid(meta["wrapper_pid"]) != os.getsid(0)
    cut = jobs_box.kill_session_children()
    assert cut, "there was a live SSH connection to cut"
    box.close()
    assert job_state(box, jobs_dir, job)["state"] == "RUNNING"
    row = ended(box, jobs_dir, job)
    assert row["state"] == "COMPLETED"
    log = (jobs_dir / job / "log").read_text()
    assert log.splitlines()[-1] == "finished" and "tick 8" in log


def test_nonzero_exit_is_failed_with_its_code(box, jobs_dir):
    job = launched(box, jobs_dir, "echo about to fail; exit 3")
    row = ended(box, jobs_dir, job)
    assert (row["state"], row["exit_code"]) == ("FAILED", 3)
    doc = op.status(box, job=job, jobs_dir=str(jobs_dir))
    assert doc["ok"] is False and "FAILED (exit 3)" in doc["summary"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_killed_by_signal_records_the_signal_name(box, jobs_dir, sig):
    job = launched(box, jobs_dir, "sleep 30")
    os.kill(meta_of(jobs_dir, job)["pid"], sig)
    row = ended(box, jobs_dir, job)
    assert (row["state"], row["signal"], row["exit_code"]) == ("KILLED", sig.name, None)


def test_idempotency_key_returns_the_existing_job(box, jobs_dir):
    first = op.launch(box, command="sleep 5", key="train-42", jobs_dir=str(jobs_dir))
    second = op.launch(box, command="sleep 5", key="train-42", jobs_dir=str(jobs_dir))
    assert second["data"]["existing"] is True and first["data"]["existing"] is False
    assert second["data"]["job"]["job_id"] == first["data"]["job"]["job_id"]
    assert len(list(jobs_dir.glob("*/meta.json"))) == 1
    assert job_state(box, jobs_dir, "train-42")["job_id"] == first["data"]["job"]["job_id"]


def test_follow_resumes_after_a_cut_without_losing_or_repeating_bytes(box, jobs_box, jobs_dir):
    job = launched(box, jobs_dir, "for i in $(seq 1 40); do echo \"line $i ünï\"; sleep 0.05; done")
    got, notices = bytearray(), []
    result = {}

    def follow():
        t = target_for(jobs_box.spec)
        try:
            result["doc"] = op.logs(t, job=job, follow=True, from_offset=0, jobs_dir=str(jobs_dir),
                                    sink=got.extend, reconnect_s=20, notice=notices.append)
        finally:
            t.close()

    th = threading.Thread(target=follow)
    th.start()
    assert wait_for(lambda: b"line 5 " in got, timeout=10)
    jobs_box.kill_session_children()
    th.join(timeout=30)
    doc = result["doc"]
    assert notices and doc["data"]["reconnects"] >= 1
    log = (jobs_dir / job / "log").read_bytes()
    assert bytes(got) == log and log.count(b"\n") == 40
    assert doc["data"]["next_offset"] == len(log)
    assert doc["data"]["state"] == "COMPLETED" and doc["ok"]
