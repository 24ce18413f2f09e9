"""A run's curves that go nowhere, found by its own supervisor in its first minutes (U35, U39), over
the real sshd rig: a job that prints wandb's real header but never its Syncing line, a job told
WANDB_MODE=offline, and one whose event files no running TensorBoard reads, each reported by
status, diagnose and triage --job, and for a run as a tracker-warning event; a healthy one (the
Syncing line printed) has no finding. The window is GPUOPS_TRACKER_CHECK_S, set small here; every
wait is on the box's own records (the tracker record, a run event)."""

import json
import sys
from pathlib import Path

import pytest

from gpuops.jobs import runpolicy
from gpuops.ops import jobs as op, wait as waiting
from gpuops.ops.diagnose import diagnose
from gpuops.ops.triage import triage_remote
from tests.conftest import FIXTURES
from tests.jobs.helpers import wait_for
from tests.test_trackers import fake_tensorboard

TRACKED = FIXTURES / "runs" / "tracked.py"
QUICK = {"GPUOPS_TRACKER_CHECK_S": "0.5", "OMP_NUM_THREADS": "1"}


def launch(box, jobs_dir, args, env=None, workdir=None, policy=None):
    doc = op.launch(box, command=f"{sys.executable} {TRACKED} {args}", jobs_dir=str(jobs_dir),
                    env=dict(QUICK, **(env or {})), workdir=workdir, policy=policy)
    assert doc["ok"], doc["summary"]
    return doc["data"]["job"]["job_id"]


def checked(jobs_dir, job):
    """The supervisor's record once it has finished looking (both looks, or one that told)."""
    path = Path(jobs_dir) / job / "trackers.json"
    assert wait_for(lambda: path.exists() and json.loads(path.read_text()).get("done"), timeout=60), \
        path.read_text() if path.exists() else "no tracker record"
    return json.loads(path.read_text())


def row_of(box, jobs_dir, job):
    doc = json.loads(json.dumps(op.status(box, job=job, jobs_dir=str(jobs_dir)), default=list))
    [row] = doc["data"]["jobs"]
    return row


def said(doc):
    return [(f["id"], f["gotcha"]) for f in json.loads(json.dumps(doc, default=lambda f: f.as_dict()))["findings"]]


def test_wandb_that_prints_its_header_but_never_syncs_is_reported_by_status_diagnose_and_triage(
        box, jobs_dir, tmp_path):
    job = launch(box, jobs_dir, "--wandb silent --seconds 30", workdir=str(tmp_path))
    rec = checked(jobs_dir, job)
    assert rec["wandb"] == "not-syncing" and [f["gotcha"] for f in rec["findings"]] == ["U35"]
    row = row_of(box, jobs_dir, job)
    assert row["trackers"][0]["gotcha"] == "U35" and "its curves go nowhere: U35" in row["hint"]
    assert ("tracker.wandb-run", "U35") in said(diagnose(box, job=job, jobs_dir=str(jobs_dir)))
    triaged = triage_remote(box, job=job, jobs_dir=str(jobs_dir))
    [f] = [f for f in json.loads(json.dumps(triaged, default=lambda f: f.as_dict()))["findings"]
           if f["id"] == "tracker.wandb-run"]
    assert "never printed 'Syncing run'" in f["title"] and "gpuops preflight" in f["fix"] and f["gotcha"] == "U35"
    op.stop(box, job=job, jobs_dir=str(jobs_dir), yes=True, grace=1)


def test_wandb_mode_offline_in_the_jobs_environment_is_a_finding_before_wandb_says_anything(box, jobs_dir):
    job = launch(box, jobs_dir, "--seconds 30", env={"WANDB_MODE": "offline"})
    rec = checked(jobs_dir, job)
    [f] = rec["findings"]
    assert (f["id"], f["gotcha"], f["evidence"]["state"]) == ("tracker.wandb-run", "U35", "offline")
    assert "wandb sync" in f["fix"]
    assert said(diagnose(box, job=job, jobs_dir=str(jobs_dir))) == [("tracker.wandb-run", "U35")]
    op.stop(box, job=job, jobs_dir=str(jobs_dir), yes=True, grace=1)


def test_a_run_that_syncs_has_no_finding(box, jobs_dir, tmp_path):
    job = launch(box, jobs_dir, "--wandb online --seconds 30", workdir=str(tmp_path))
    rec = checked(jobs_dir, job)
    assert rec["wandb"] == "syncing" and rec["findings"] == [] and rec["looks"] == 2
    row = row_of(box, jobs_dir, job)
    assert "trackers" not in row and "curves" not in (row.get("hint") or "")
    assert said(diagnose(box, job=job, jobs_dir=str(jobs_dir))) == []
    op.stop(box, job=job, jobs_dir=str(jobs_dir), yes=True, grace=1)


@pytest.fixture
def tensorboard_reads(tmp_path):
    """A TensorBoard (as /proc shows one) reading an empty directory."""
    proc = fake_tensorboard(tmp_path, "tb", "6008")
    yield tmp_path / "tb"
    proc.kill()
    proc.wait()


def test_event_files_no_running_tensorboard_reads_are_a_run_event_and_a_finding(
        box, jobs_dir, tmp_path, tensorboard_reads):
    runs = tmp_path / "runs" / "exp1"
    policy = runpolicy.build(max_retries="0")
    run = launch(box, jobs_dir, f"--wandb silent --events {runs} --seconds 60", workdir=str(tmp_path), policy=policy)
    seen, after = [], 0
    while len([e for e in seen if e["kind"] == "tracker-warning"]) < 2:
        doc = waiting.wait(box, job=run, jobs_dir=str(jobs_dir), until=(waiting.EVENT,), timeout_s=60,
                           after_event=after)
        assert doc["data"]["reason"] == "event", (doc["summary"], seen)
        seen += doc["data"]["events"]
        after = seen[-1]["seq"]
    warned = {e["gotcha"]: e for e in seen if e["kind"] == "tracker-warning"}
    assert set(warned) == {"U35", "U39"}
    assert str(runs) in warned["U39"]["why"] and str(tensorboard_reads) in warned["U39"]["why"]
    rec = checked(jobs_dir, run)
    assert rec["tb_writes"] == [str(runs)]
    assert ("tb.logdir", "U39") in said(diagnose(box, job=run, jobs_dir=str(jobs_dir)))
    op.stop(box, job=run, jobs_dir=str(jobs_dir), yes=True, grace=1)
