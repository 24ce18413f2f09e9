"""gpuops jobs on a real Slurm, through the login node's real sshd: the same verbs as on a box.

Each test launches with --engine slurm into its own jobs directory and follows the job with
status, wait, logs, stop, pause, resume and retry, checking gpuops' states against what Slurm
itself says (scontrol) and what the record holds on the shared filesystem.
"""

import json
import re
import time

from gpuops import states
from gpuops.ops import diagnose, joblogs, jobs as op, pause, triage, wait
from tests.jobs.helpers import wait_for


def launched(box, jobs_dir, tmp_path, command, **kw):
    doc = op.launch(box, command=command, engine="slurm", jobs_dir=str(jobs_dir), workdir=str(tmp_path), **kw)
    assert doc["ok"], doc["summary"]
    assert doc["data"]["job"]["engine"] == "slurm"
    return doc["data"]["job"]["job_id"], doc["data"]["meta"]["slurm_job_id"]


def waited(box, jobs_dir, job, until=states.TERMINAL, timeout=30, slurm=None):
    doc = wait.wait(box, job=job, until=until, timeout_s=timeout, jobs_dir=str(jobs_dir))
    assert doc["data"]["reached"], doc["summary"] + "\n" + evidence(jobs_dir, job, slurm)
    return doc["data"]["job"]


def evidence(jobs_dir, job, slurm=None):
    """The job's own log and records (and the daemons' logs), so a failure on a CI machine says
    what the job and Slurm did."""
    parts = []
    for name in ("log", "pause.json", "exit.json"):
        path = jobs_dir / job / name
        if path.exists():
            parts.append("--- %s\n%s" % (name, "\n".join(path.read_text(errors="replace").splitlines()[-40:])))
    return "\n".join(parts + ([slurm.log_tail(25)] if slurm is not None else []))


def row(box, jobs_dir, job):
    return op.status(box, job=job, jobs_dir=str(jobs_dir))["data"]["jobs"][0]


def test_launch_runs_to_completed_with_an_exit_record(box, slurm, jobs_dir, tmp_path):
    job, slurm_id = launched(box, jobs_dir, tmp_path, "echo started; sleep 2; echo finished", name="hello",
                             labels={"team": "nlp"})
    running = waited(box, jobs_dir, job, until=(states.RUNNING,))
    assert running["state"] == states.RUNNING and running["slurm_job_id"] == slurm_id
    assert slurm.state(slurm_id) == "RUNNING"
    ended = waited(box, jobs_dir, job)
    assert (ended["state"], ended["exit_code"], ended["scheduler_state"]) == (states.COMPLETED, 0, "COMPLETED")
    record = json.loads((jobs_dir / job / "exit.json").read_text())
    assert (record["engine_state"], record["exit_code"], record["scheduler"]["JobId"]) == ("COMPLETED", 0, slurm_id)
    meta = json.loads((jobs_dir / job / "meta.json").read_text())
    assert (meta["engine"], meta["labels"], meta["name"]) == ("slurm", {"team": "nlp"}, "hello")
    assert '{"team":"nlp"}' in slurm.run("scontrol", "show", "job", slurm_id).stdout  # labels as --comment
    page = joblogs.logs(box, job=job, from_offset=0, jobs_dir=str(jobs_dir))
    assert page["data"]["text"] == "started\nfinished\n"
    # The record answers once Slurm has moved on, and a Slurm job id finds the job too.
    assert row(box, jobs_dir, slurm_id)["job_id"] == job
    listed = op.status(box, labels={"team": "nlp"}, jobs_dir=str(jobs_dir))
    assert [r["job_id"] for r in listed["data"]["jobs"]] == [job]


def test_a_nonzero_exit_is_failed_with_its_code_and_explained(box, jobs_dir, tmp_path):
    job, _ = launched(box, jobs_dir, tmp_path, "echo about to fail; exit 3")
    ended = waited(box, jobs_dir, job)
    assert (ended["state"], ended["exit_code"]) == (states.FAILED, 3)
    doc = op.status(box, job=job, jobs_dir=str(jobs_dir))
    assert not doc["ok"] and "FAILED (exit 3)" in doc["summary"]
    why = diagnose.diagnose(box, job=job, jobs_dir=str(jobs_dir))
    assert why["data"]["verdict"] == "failed-exit" and why["data"]["scheduler"]["exit_code"] == "3:0"
    read = triage.triage_remote(box, job=job, jobs_dir=str(jobs_dir))
    assert read["data"]["status"] == "failed"


def test_scancel_is_cancelled_and_a_dry_run_changes_nothing(box, slurm, jobs_dir, tmp_path):
    job, slurm_id = launched(box, jobs_dir, tmp_path, "sleep 120")
    waited(box, jobs_dir, job, until=(states.RUNNING,))
    plan = op.stop(box, job=job, jobs_dir=str(jobs_dir))
    assert plan["data"]["dry_run"] and plan["exit_code_hint"] == 5
    assert plan["data"]["targets"][0]["slurm_job_id"] == int(slurm_id)
    time.sleep(1)
    assert slurm.state(slurm_id) == "RUNNING" and row(box, jobs_dir, job)["state"] == states.RUNNING
    done = op.stop(box, job=job, yes=True, plan=plan["data"]["plan"]["plan_id"], jobs_dir=str(jobs_dir))
    assert done["ok"], done["summary"]
    assert done["data"]["state"] == states.CANCELLED and slurm.state(slurm_id) == "CANCELLED"
    assert diagnose.diagnose(box, job=job, jobs_dir=str(jobs_dir))["data"]["verdict"] == "stopped"


CHECKPOINTING = r"""python3 - <<'EOF'
import os, signal, sys, time
ckpt = os.path.join(os.environ["GPUOPS_JOB_DIR"], "..", "ckpt-" + os.environ["GPUOPS_JOB_ID"])
step = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
print("resumed from step %d (restart %s)" % (step, os.environ.get("SLURM_RESTART_COUNT", "0")), flush=True)
wanted = []
signal.signal(signal.SIGUSR1, lambda s, f: wanted.append(s))
while step < 60:
    step += 1
    print("step %d" % step, flush=True)
    if wanted:
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(ckpt + ".tmp", ckpt)
        print("checkpoint saved at step %d" % step, flush=True)
        wanted.clear()
    time.sleep(0.1)
print("done at step %d" % step, flush=True)
EOF"""


def test_pause_checkpoints_then_resume_continues_from_the_checkpoint(box, slurm, jobs_dir, tmp_path):
    job, slurm_id = launched(box, jobs_dir, tmp_path, CHECKPOINTING)
    waited(box, jobs_dir, job, until=(states.RUNNING,))
    wait_for(lambda: b"step 5\n" in (jobs_dir / job / "log").read_bytes(), timeout=20)
    paused = pause.pause(box, job=job, ckpt_regex=r"checkpoint saved at step \d+", timeout_s=30,
                         jobs_dir=str(jobs_dir))
    assert paused["ok"] and paused["data"]["state"] == states.PAUSED, paused["summary"]
    saved = int(paused["data"]["marker"]["log"].rsplit(" ", 1)[1])
    assert slurm.state(slurm_id) == "PENDING"  # requeued and held: its CPU is free
    assert row(box, jobs_dir, job)["state"] == states.PAUSED
    resumed = pause.resume(box, job=job, jobs_dir=str(jobs_dir))
    assert resumed["ok"], resumed["summary"]
    assert waited(box, jobs_dir, job, until=(states.RUNNING,), slurm=slurm)["restarts"] == 1
    ended = waited(box, jobs_dir, job, timeout=60, slurm=slurm)
    assert ended["state"] == states.COMPLETED, evidence(jobs_dir, job, slurm)
    log = (jobs_dir / job / "log").read_text()
    first, _, second = log.partition("DUE TO JOB REQUEUE")
    assert "resumed from step 0 (restart 0)" in first
    # The run continues from the last checkpoint its first run wrote: the one pause waited for,
    # or a later one, should the signal reach it twice.
    last = int(re.findall(r"checkpoint saved at step (\d+)", first)[-1])
    assert last >= saved
    assert f"resumed from step {last} (restart 1)" in second and "done at step 60" in second


def test_a_retry_with_a_new_time_limit_is_a_child(box, slurm, jobs_dir, tmp_path):
    job, _ = launched(box, jobs_dir, tmp_path, "exit 1", resources={"time": "3"})
    waited(box, jobs_dir, job)
    doc = op.retry(box, job=job, resources={"time": "7"}, jobs_dir=str(jobs_dir))
    assert doc["ok"], doc["summary"]
    child = doc["data"]["job"]
    assert child["parent_job_id"] == job and child["job_id"] != job
    meta = doc["data"]["meta"]
    assert meta["sbatch_options"] == ["--time=7"] and meta["resources"] == {"time": "7"}
    assert "TimeLimit=00:07:00" in slurm.run("scontrol", "show", "job", meta["slurm_job_id"]).stdout
    assert waited(box, jobs_dir, child["job_id"])["state"] == states.FAILED


def test_an_impossible_request_is_pending_and_said_so_plainly(box, slurm, jobs_dir, tmp_path):
    job, slurm_id = launched(box, jobs_dir, tmp_path, "true", resources={"nodes": 2})
    wait_for(lambda: slurm.run("squeue", "-h", "-j", slurm_id, "-o", "%r").stdout.strip() not in ("", "None"))
    doc = op.status(box, job=job, jobs_dir=str(jobs_dir))
    got = doc["data"]["jobs"][0]
    assert got["state"] == states.PENDING and got["never_runs"] and not doc["ok"]
    assert got["reason"] == "asked for 2 nodes; partition debug has 1: it can never run there"
    job, _ = launched(box, jobs_dir, tmp_path, "true", resources={"cpus_per_task": 64})
    got = row(box, jobs_dir, job)
    assert got["reason"] == "asked for 64 CPUs per task; the nodes of partition debug have at most 2"
    assert diagnose.diagnose(box, job=job, jobs_dir=str(jobs_dir))["data"]["verdict"] == "never-runs"


def test_a_queue_is_a_dependency_chain_slurm_runs(box, slurm, jobs_dir, tmp_path):
    out = tmp_path / "order"
    doc = op.queue(box, name="chain", content=f"sleep 1; echo one >> {out}\necho two >> {out}\n", engine="slurm",
                   workdir=str(tmp_path), jobs_dir=str(jobs_dir))
    first, second = doc["data"]["entries"]
    assert doc["data"]["engine"] == "slurm" and first["job_id"] and second["job_id"]
    meta = json.loads((jobs_dir / second["job_id"] / "meta.json").read_text())
    assert any(o.startswith("--dependency=afterany:") for o in meta["sbatch_options"])
    done = op.queue(box, name="chain", wait=30, jobs_dir=str(jobs_dir))
    assert done["ok"] and done["data"]["done"], done["summary"]
    assert out.read_text() == "one\ntwo\n"
