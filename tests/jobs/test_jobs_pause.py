"""pause and resume on the box's own supervisor, over the real sshd: the checkpoint signal, the
marker, a stop that keeps the record PAUSED, and a resume that is a child run from the checkpoint."""

from gpuops import states
from gpuops.ops import jobs as op, pause
from tests.jobs.helpers import wait_for

TRAIN = r"""import os, signal, sys, time
ckpt = os.path.join(os.environ["GPUOPS_JOB_DIR"], "..", "ckpt")
step = int(open(ckpt).read()) if "--resume" in sys.argv[1:] else 0
print("from step %d" % step, flush=True)
wanted = []
signal.signal(signal.SIGUSR1, lambda s, f: wanted.append(s))
while step < 40:
    step += 1
    if wanted:
        open(ckpt, "w").write(str(step))
        print("checkpoint saved at step %d" % step, flush=True)
        wanted.clear()
    time.sleep(0.05)
print("done", flush=True)
"""


def test_pause_keeps_the_record_paused_and_resume_runs_a_child_from_the_checkpoint(box, jobs_dir, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    doc = op.launch(box, command=f"python3 {tmp_path / 'train.py'}", jobs_dir=str(jobs_dir))
    job = doc["data"]["job"]["job_id"]
    wait_for(lambda: (jobs_dir / job / "log").exists() and b"from step 0" in (jobs_dir / job / "log").read_bytes())
    paused = pause.pause(box, job=job, ckpt_regex="checkpoint saved", timeout_s=20, jobs_dir=str(jobs_dir))
    assert paused["ok"] and paused["data"]["state"] == states.PAUSED, paused["summary"]
    saved = int(paused["data"]["marker"]["log"].rsplit(" ", 1)[1])
    assert op.status(box, job=job, jobs_dir=str(jobs_dir))["data"]["jobs"][0]["state"] == states.PAUSED
    again = pause.pause(box, job=job, ckpt_regex="checkpoint saved", jobs_dir=str(jobs_dir))
    assert again["ok"] and "already paused" in again["summary"]
    resumed = pause.resume(box, job=job, resume_arg="--resume", jobs_dir=str(jobs_dir))
    child = resumed["data"]["child"]
    assert resumed["ok"] and child["parent_job_id"] == job
    log = jobs_dir / child["job_id"] / "log"
    assert wait_for(lambda: log.exists() and b"done" in log.read_bytes(), timeout=20)
    assert log.read_text().startswith(f"from step {saved}\n")
    parent = op.status(box, job=job, jobs_dir=str(jobs_dir))["data"]["jobs"][0]
    assert parent["state"] != states.PAUSED and f"resumed as {child['job_id']}" in parent["hint"]


def test_without_the_marker_nothing_is_stopped(box, jobs_dir):
    doc = op.launch(box, command="sleep 30", jobs_dir=str(jobs_dir))
    job = doc["data"]["job"]["job_id"]
    out = pause.pause(box, job=job, ckpt_regex="never printed", signal="USR2", timeout_s=1, jobs_dir=str(jobs_dir))
    assert not out["ok"] and out["exit_code_hint"] == 6
    # sleep dies of USR2 (no handler): the job ended, so nothing was left to stop and it is not PAUSED
    assert out["data"]["state"] != states.PAUSED
