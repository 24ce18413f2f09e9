"""Runs on a real Ray cluster: `launch --engine ray` with a run policy makes the Ray job's driver the
run's supervisor (gpuops.onbox.engines.ray_run), so the policy is enforced inside the Ray job, on the head,
by triage's classifier: a transient death is retried from the newest complete checkpoint, a Python
exception is not, the run's time limit is TIMEOUT, and a stop ends the run. Every wait is on the
records the head keeps; no sleep decides an outcome."""

import json

from gpuops.jobs import runpolicy
from gpuops import states
from gpuops.ops import diagnose, jobs as op, wait as waiting
from tests.jobs.helpers import event_kinds as kinds, run_record as record, wait_run_end as wait_end

# Attempt 1 saves two complete checkpoints, leaves a third half-written, and dies of SIGKILL (no
# OOM: a kill from outside, transient); a resumed attempt says what it was given and completes.
TRAIN = """
if [ -n "$GPUOPS_RESUME_FROM" ]; then
  echo "resumed with $* from env $GPUOPS_RESUME_FROM"; echo "step 3/3"; exit 0
fi
mkdir -p ckpt
echo "step 1/3"; echo one > ckpt/step-1.pt
echo "step 2/3"; echo two > ckpt/step-2.pt
echo partial > ckpt/step-3.pt.tmp
kill -9 $$
"""


def launch(box, jobs_dir, command, workdir=None, **policy):
    flags = {k: v for k, v in policy.items() if k in runpolicy.FLAGS}
    doc = op.launch(box, command=command, engine="ray", jobs_dir=str(jobs_dir), workdir=workdir,
                    policy=runpolicy.build(**flags, backoff_s=0.5))
    assert doc["ok"], doc["summary"]
    job = doc["data"]["job"]
    assert job["engine"] == "ray" and job["ray_submission_id"] == f"gpuops-{job['job_id']}"
    return job["job_id"]


def test_a_sigkill_is_retried_inside_the_ray_job_from_the_newest_complete_checkpoint(box, jobs_dir, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.sh").write_text(TRAIN)
    run = launch(box, jobs_dir, "bash train.sh", workdir=str(work), max_retries="2", checkpoint_dir="ckpt",
                 resume_arg="--resume {checkpoint}")
    doc = wait_end(box, jobs_dir, run, state=states.COMPLETED)
    rec = record(jobs_dir, run)
    assert len(rec["attempts"]) == 2 and rec["decisions"][0]["class"] == "unknown-death"
    assert kinds(doc) == ["attempt-started", "attempt-failed", "retrying", "resumed", "attempt-started", "completed"]
    newest = str(work / "ckpt" / "step-2.pt")
    assert rec["resumed_from"] == newest
    second = rec["attempts"][1]
    log = (jobs_dir / second / "log").read_text()
    assert f"resumes from checkpoint {newest} (the newest complete one)" in log
    assert f"resumed with --resume {newest} from env {newest}" in log
    child = json.loads((jobs_dir / second / "meta.json").read_text())
    assert child["engine"] == "ray" and child["ray_submission_id"] == f"gpuops-{run}"
    assert child["parent_job_id"] == run and child["run"] == {"id": run, "attempt": 2}
    listed = op.status(box, jobs_dir=str(jobs_dir), all_attempts=True)["data"]["jobs"]  # a run is one row
    rows = {r["job_id"]: r for row in listed for r in [row] + (row.get("earlier") or [])}
    # attempt 1 as it ended, though Ray still ran the submission: bash exits 137 for its killed child
    assert (rows[run]["state"], rows[run]["exit_code"]) == (states.FAILED, 137)
    assert rows[second]["state"] == states.COMPLETED and rows[second]["run"]["attempt"] == 2
    assert rows[second]["run"]["ended"] and rows[second]["run"]["last_event"]["kind"] == "completed"
    why = diagnose.diagnose(box, job=run, jobs_dir=str(jobs_dir))  # the run's id: its last attempt
    assert why["data"]["run"]["attempt"] == 2 and why["data"]["engine"] == "ray"


def test_a_python_exception_is_not_retried_on_ray(box, jobs_dir):
    run = launch(box, jobs_dir, "echo 'step 1/3'; python3 -c 'raise ValueError(\"bad learning rate\")'",
                 max_retries="3")
    doc = wait_end(box, jobs_dir, run, state=states.FAILED)
    rec = record(jobs_dir, run)
    assert rec["attempts"] == [run] and rec["final"]["class"] == "python-exception"
    assert kinds(doc) == ["attempt-started", "attempt-failed", "gave-up"]
    assert doc["data"]["job"]["exit_code"] == 1


def test_max_runtime_ends_the_ray_run_as_timeout(box, jobs_dir):
    run = launch(box, jobs_dir, "echo started; sleep 600", max_retries="3", max_runtime="8s")
    doc = wait_end(box, jobs_dir, run, state=states.TIMEOUT, timeout=60)
    assert 8 <= doc["data"]["job"]["duration_s"] < 25
    assert record(jobs_dir, run)["attempts"] == [run]


def test_gpuops_stop_ends_the_ray_run_and_is_never_retried(box, jobs_dir):
    run = launch(box, jobs_dir, "echo up; sleep 600", max_retries="3")
    up = waiting.wait(box, job=run, jobs_dir=str(jobs_dir), log_regex="^up$", timeout_s=60)
    assert up["data"]["reason"] == "match", up["summary"]
    doc = op.stop(box, job=run, jobs_dir=str(jobs_dir), yes=True)
    assert doc["ok"] and doc["data"]["state"] == states.CANCELLED, doc["summary"]
    rec = record(jobs_dir, run)
    assert rec["phase"] == "ended" and rec["attempts"] == [run] and rec["final"]["class"] == "cancelled"


def test_a_stall_on_ray_is_evidence_then_a_retry_and_notify_hears_each_event_on_the_head(box, jobs_dir, tmp_path):
    from gpuops.onbox.run import runevents

    heard = tmp_path / "heard.jsonl"
    # two steps, then the hang: a count that never moved gets the start-up allowance, not --stall-after
    command = 'echo "step 1/3"; echo "step 2/3"; if [ "$GPUOPS_ATTEMPT" = 1 ]; then sleep 600; fi; echo "step 3/3"'
    run = launch(box, jobs_dir, command, max_retries="1", stall_after="4s", notify=f"cat >> {heard}")
    first = waiting.wait(box, job=run, jobs_dir=str(jobs_dir), until=(waiting.EVENT,), after_event=0, timeout_s=60)
    assert kinds(first)[:1] == ["attempt-started"], first["summary"]  # the run's, once its driver began it
    doc = wait_end(box, jobs_dir, run, state=states.COMPLETED, timeout=90)
    assert kinds(doc) == ["attempt-started", "stalled", "attempt-failed", "retrying", "attempt-started", "completed"]
    ended = json.loads((jobs_dir / run / "exit.json").read_text())
    assert ended["ended_by"] == "stall" and (jobs_dir / run / ended["stall_evidence"]).exists()
    listed = op.status(box, jobs_dir=str(jobs_dir), all_attempts=True)["data"]["jobs"]  # a run is one row
    rows = {r["job_id"]: r for row in listed for r in [row] + (row.get("earlier") or [])}
    assert "stalled (class hang)" in rows[run]["reason"]
    recorded = [e for e in runevents.read(str(jobs_dir / run)) if e["kind"] in runevents.NOTIFIED]
    got = [json.loads(line) for line in heard.read_text().splitlines()]
    assert got == recorded and [e["kind"] for e in got] == ["stalled", "attempt-failed", "retrying", "completed"]
