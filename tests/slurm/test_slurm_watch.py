"""The run's watcher inside a Slurm job (gpuops.onbox.engines.slurm_watch): under --engine slurm a hung
command (SIGSTOPped, or a silent busy loop) is stopped with its evidence saved, then requeued or
ended as the policy says; a healthy one is never stopped; --notify hears the events,
--keep-checkpoints prunes only what it may, and a stop is never retried. Real Slurm, reached
through the login node's real sshd; the job is real bash and python."""

import json
import os
import signal
import subprocess
import time

import pytest

from gpuops import onbox
from gpuops.errors import UsageError
from gpuops.jobs import runpolicy
from gpuops import states
from gpuops.onbox.run import runevents
from gpuops.onbox.engines import slurm_script
from gpuops.ops import jobs as op
from gpuops.ops import wait
from tests.jobs.helpers import wait_for
from tests.slurm.conftest import CHECKPOINTING, start_requeued

STALL_S = 6
# The bound the watcher keeps: a stall is seen, its evidence taken and the tree stopped within it.
DETECT_S = STALL_S + 30

# Steps, then (first start only) a hang: `stop` SIGSTOPs itself, `busy` spins printing nothing;
# or `raise`: a Python exception.
JOB = r"""exec python3 - "$@" <<'EOF'
import os, signal, sys, time
hang, ckpt = sys.argv[1], sys.argv[2]
first = os.environ.get("SLURM_RESTART_COUNT", "0") == "0"
for step in range(1, 7):
    print("step %d" % step, flush=True)
    if ckpt != "-":
        os.makedirs(os.path.join(ckpt, ".tmp"), exist_ok=True)
        os.rename(os.path.join(ckpt, ".tmp"), os.path.join(ckpt, "step-%d" % step))
    time.sleep(0.3)
if first and hang == "raise":
    raise RuntimeError("the first start fails")
if first:
    print("hanging at %.3f" % time.time(), flush=True)
    if hang == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    while True:
        pass
print("done", flush=True)
EOF"""

# Healthy: a step every second, with quiet stretches shorter than --stall-after.
HEALTHY = r"""exec python3 - <<'EOF'
import time
for step in range(1, 200):
    print("step %d" % step, flush=True)
    time.sleep(4.0 if step % 5 == 0 else 0.5)
EOF"""


def launched(box, jobs_dir, tmp_path, command, **policy):
    script = tmp_path / "job.sh"
    script.write_text(command)
    doc = op.launch(box, command=f"bash {script} " + " ".join(policy.pop("argv", [])), engine="slurm",
                    jobs_dir=str(jobs_dir), workdir=str(tmp_path),
                    policy=runpolicy.build(stall_after=f"{STALL_S}s", notify=f"cat >> {tmp_path}/heard.jsonl",
                                           **policy))
    assert doc["ok"], doc["summary"]
    return doc["data"]["job"]["job_id"], doc["data"]["meta"]["slurm_job_id"]


def events(jobs_dir, job):
    return runevents.read(str(jobs_dir / job))


def kinds(jobs_dir, job):
    return [e["kind"] for e in events(jobs_dir, job)]


def heard(tmp_path):
    path = tmp_path / "heard.jsonl"
    return [json.loads(line)["kind"] for line in path.read_text().splitlines()] if path.exists() else []


def hung_at(log):
    return float(log.split("hanging at ", 1)[1].split()[0])


def log_of(jobs_dir, job):
    path = jobs_dir / job / "log"
    return path.read_text() if path.exists() else ""  # Slurm makes it when the job starts


def said(jobs_dir, job, slurm):
    return log_of(jobs_dir, job) + "\n" + json.dumps(events(jobs_dir, job)) + slurm.log_tail(20)


def test_a_sigstopped_job_is_stopped_with_evidence_requeued_and_its_next_start_completes(box, slurm, jobs_dir,
                                                                                         tmp_path):
    job, slurm_id = launched(box, jobs_dir, tmp_path, JOB, argv=["stop", "-"], max_retries="1")
    assert wait_for(lambda: "retrying" in kinds(jobs_dir, job), timeout=DETECT_S + 60), said(jobs_dir, job, slurm)
    log = log_of(jobs_dir, job)
    found = dict((e["kind"], e) for e in events(jobs_dir, job))
    assert found["retrying"]["at"] - hung_at(log) <= DETECT_S, said(jobs_dir, job, slurm)
    assert found["attempt-failed"]["class"] == "hang" and found["retrying"]["next_attempt"] == 2
    evidence = json.loads((jobs_dir / job / "attempt-1" / "stall-1.json").read_text())
    assert found["stalled"]["evidence"] == str(jobs_dir / job / "attempt-1" / "stall-1.json")
    assert "step 6" in evidence["log_tail"] and any(p["state"] == "T" for p in evidence["processes"]), evidence
    # the requeue is Slurm's own: its restart count is the retry resume.py counts
    start_requeued(slurm, slurm_id)
    done = wait.wait(box, job=job, timeout_s=120, jobs_dir=str(jobs_dir))
    row = done["data"]["job"]
    assert row["state"] == states.COMPLETED, said(jobs_dir, job, slurm)
    assert (row["run"]["attempt"], row["run"]["of"], row["restarts"]) == (2, 2, 1)
    assert wait_for(lambda: "completed" in heard(tmp_path), timeout=10), heard(tmp_path)
    assert heard(tmp_path) == ["stalled", "attempt-failed", "retrying", "completed"]


def test_a_failure_retry_on_names_is_requeued_and_one_it_does_not_name_is_not(box, slurm, jobs_dir, tmp_path):
    job, slurm_id = launched(box, jobs_dir, tmp_path, JOB, argv=["raise", "-"], max_retries="1",
                             retry_on="python-exception")
    assert wait_for(lambda: "retrying" in kinds(jobs_dir, job), timeout=90), said(jobs_dir, job, slurm)
    failed = [e for e in events(jobs_dir, job) if e["kind"] == "attempt-failed"]
    assert [e["class"] for e in failed] == ["python-exception"] and "stalled" not in kinds(jobs_dir, job)
    start_requeued(slurm, slurm_id)
    row = wait.wait(box, job=job, timeout_s=120, jobs_dir=str(jobs_dir))["data"]["job"]
    assert row["state"] == states.COMPLETED and (row["run"]["attempt"], row["restarts"]) == (2, 1), \
        said(jobs_dir, job, slurm)
    # by default a Python exception would fail again: the job ends FAILED, nothing requeued
    other, _ = launched(box, jobs_dir, tmp_path, JOB, argv=["raise", "-"], max_retries="1")
    row = wait.wait(box, job=other, timeout_s=90, jobs_dir=str(jobs_dir))["data"]["job"]
    assert row["state"] == states.FAILED and row["restarts"] in (0, None), said(jobs_dir, other, slurm)
    assert "not a failure retried by default" in row["reason"] and "retrying" not in kinds(jobs_dir, other)


def test_a_silent_busy_loop_past_its_retries_is_failed_and_retention_prunes_only_checkpoints(box, slurm, jobs_dir,
                                                                                            tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "notes-v2.txt").write_text("the user's own")
    job, _ = launched(box, jobs_dir, tmp_path, JOB, argv=["busy", str(ckpt)], max_retries="0",
                      checkpoint_dir=f"{ckpt}:step-*", keep_checkpoints="2", checkpoint_every_s=1)
    # a second run on the same directory would prune and resume from this one's checkpoints
    with pytest.raises(UsageError, match=f"run {job} is using {ckpt}"):
        launched(box, jobs_dir, tmp_path, JOB, argv=["busy", str(ckpt)], checkpoint_dir=str(ckpt))
    done = wait.wait(box, job=job, timeout_s=DETECT_S + 90, jobs_dir=str(jobs_dir))
    row = done["data"]["job"]
    log = log_of(jobs_dir, job)
    assert row["state"] == states.FAILED, said(jobs_dir, job, slurm)
    found = dict((e["kind"], e) for e in events(jobs_dir, job))
    assert found["stalled"]["at"] - hung_at(log) <= DETECT_S and "retrying" not in found
    assert found["gave-up"]["class"] == "hang" and row["run"]["final"]["class"] == "gave-up"
    assert "no retries left of 0" in row["reason"], row
    evidence = json.loads((jobs_dir / job / "attempt-1" / "stall-1.json").read_text())
    assert any(p["state"] == "R" and p["python"] for p in evidence["processes"]), evidence
    assert sorted(p.name for p in ckpt.iterdir()) == ["notes-v2.txt", "step-5", "step-6"]
    assert heard(tmp_path) == ["stalled", "attempt-failed", "gave-up"]


def test_a_healthy_job_is_never_stopped_and_a_stop_during_it_is_never_retried(box, slurm, jobs_dir, tmp_path):
    job, slurm_id = launched(box, jobs_dir, tmp_path, HEALTHY, max_retries="2")
    assert wait_for(lambda: "step 16" in log_of(jobs_dir, job), timeout=90), said(jobs_dir, job, slurm)
    assert kinds(jobs_dir, job) == ["attempt-started", "attempt-started"], said(jobs_dir, job, slurm)
    stopped = op.stop(box, job=job, yes=True, jobs_dir=str(jobs_dir))
    assert stopped["ok"], stopped["summary"]
    row = op.status(box, job=job, jobs_dir=str(jobs_dir))["data"]["jobs"][0]
    assert row["state"] == states.CANCELLED, said(jobs_dir, job, slurm)
    assert wait_for(lambda: "stopped" in kinds(jobs_dir, job), timeout=10), said(jobs_dir, job, slurm)
    time.sleep(3)  # long enough for a requeue to show
    assert slurm.state(slurm_id) in ("CANCELLED", None), slurm.run("scontrol", "show", "job", slurm_id).stdout
    assert not {"stalled", "attempt-failed", "retrying"} & set(kinds(jobs_dir, job)), kinds(jobs_dir, job)
    assert heard(tmp_path) == ["stopped"]


def test_a_stop_while_the_watcher_handles_a_stall_wins_over_its_requeue(box, slurm, jobs_dir, tmp_path):
    """Whatever the order (the stop before the watcher's look, between it and its requeue, or
    after: Slurm requeues a cancelled job too), the job ends cancelled and never starts again."""
    job, slurm_id = launched(box, jobs_dir, tmp_path, JOB, argv=["stop", "-"], max_retries="3")
    assert wait_for(lambda: "stalled" in kinds(jobs_dir, job), timeout=DETECT_S + 60), said(jobs_dir, job, slurm)
    stopped = op.stop(box, job=job, yes=True, jobs_dir=str(jobs_dir))
    assert stopped["ok"], stopped["summary"] + said(jobs_dir, job, slurm)
    time.sleep(5)  # long enough for a requeue to show
    assert slurm.state(slurm_id) in ("CANCELLED", None), slurm.run("scontrol", "show", "job", slurm_id).stdout
    row = op.status(box, job=job, jobs_dir=str(jobs_dir))["data"]["jobs"][0]
    assert row["state"] == states.CANCELLED, row
    log = log_of(jobs_dir, job)
    assert "requeued by Slurm" not in log and log.count("step 1\n") == 1, log


def test_under_the_watcher_the_batch_shells_checkpoint_signal_still_reaches_the_command(tmp_path):
    """Real bash, no scheduler: pause's `scancel --batch --signal` reaches the batch shell, which
    hands it to the watcher's group; the watcher hands it to the command and ends nothing."""
    jdir = tmp_path / "job"
    jdir.mkdir()
    (jdir / "cmd").write_text(CHECKPOINTING)
    policy = runpolicy.build(max_retries="1", notify=f"cat >> {tmp_path}/heard.jsonl")
    (jdir / "meta.json").write_text(json.dumps({"job_id": "job", "engine": "slurm", "slurm_job_id": "7", "kind": "cmd",
                                                "workdir": str(tmp_path), "policy": policy}))
    (jdir / "resume.py").write_bytes(onbox.script("slurm_resume"))
    (jdir / "watch.py").write_bytes(onbox.script("slurm_watch"))
    script = jdir / "batch.sh"
    script.write_text(slurm_script.render({"job_id": "job", "job_dir": str(jdir), "resume": True, "watch": True}))
    env = dict(os.environ, GPUOPS_JOBS_DIR=str(tmp_path))
    proc = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=tmp_path, env=env)
    assert wait_for(lambda: "ready" in log_of(tmp_path, "job"), timeout=30)
    os.kill(proc.pid, signal.SIGUSR1)  # what `scancel --batch --signal=USR1` does
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3, out
    assert log_of(tmp_path, "job").splitlines()[-1] == "checkpoint", log_of(tmp_path, "job")
    # exit 3 is a failure no policy retries by default: the run gives up, it is not requeued
    assert kinds(tmp_path, "job") == ["attempt-started", "attempt-started", "attempt-failed", "gave-up"]
    assert heard(tmp_path) == ["attempt-failed", "gave-up"]
    assert not (jdir / "run.json").exists()  # the run's record is Slurm's and the events
