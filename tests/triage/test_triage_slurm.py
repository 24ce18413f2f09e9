"""`gpuops triage --slurm-id` against a real single-node Slurm (tests/rig/slurm.py).

Real sbatch jobs write MaxText-like step lines into an outputs/ folder laid out as the harness
lays it out, and triage asks the real `scontrol show job` for the state when --slurm-state is not
given: a stalled job that Slurm still runs is hanging; once it is cancelled or has died without a
JOB SUMMARY the same log reads as cancelled or unknown; without scontrol on PATH the state is
unknown. --now is always given, so the stall is judged at a known time (an hour after the steps).
"""

import json
import subprocess
import time
from datetime import datetime, timedelta

import pytest

from tests.rig.slurm import SlurmError, SlurmRig, unavailable

STEPS = 8
NAME = "llama2-7b"


@pytest.fixture(scope="module")
def slurm():
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    rig = SlurmRig()
    try:
        rig.start()
    except (SlurmError, OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"the Slurm daemons cannot run on this machine: {e}")
    yield rig
    rig.stop()


def _script(outputs, layout, ending):
    """A batch script that prints the harness's header and STEPS timestamped step lines, then `ending`.
    layout 'dir': outputs/<id>-<name>/log is a symlink to the sibling <id>-<name>.log (the harness);
    'log': only outputs/<id>-<name>.log."""
    link = (f'mkdir -p "{outputs}/$SLURM_JOB_ID-{NAME}" && '
            f'ln -s "../$SLURM_JOB_ID-{NAME}.log" "{outputs}/$SLURM_JOB_ID-{NAME}/log"\n') if layout == "dir" else ""
    return (
        "#!/bin/bash\n"
        + link
        + 'ts() { date "+%F %T"; }\n'
        'echo "== Job $SLURM_JOB_ID on 1 node(s): $(hostname -s)"\n'
        'echo "SLURM_JOB_ID=$SLURM_JOB_ID"\n'
        'echo "PASSTHROUGH_ARGS=steps=100 enable_checkpointing=true"\n'
        'echo "[$(ts)] == Training START"\n'
        f"for i in $(seq 0 {STEPS - 1}); do\n"
        '  echo "[$(ts)] completed step: $i, seconds: 0.050, TFLOP/s/device: 301.250, '
        'Tokens/s/device: 4100.500, total_weights: 65536, loss: 3.100"\n'
        "  sleep 0.05\n"
        "done\n"
        + ending + "\n"
    )


@pytest.fixture
def submit(slurm, tmp_path):
    """submit(layout, ending) -> (job id, outputs dir, log path) once the last step line is in the log.
    Jobs still queued at the end of the test are cancelled, so the node's CPUs are free for the next."""
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    ids = []

    def _submit(layout="dir", ending="sleep 300"):
        script = tmp_path / f"job{len(ids)}.sh"
        script.write_text(_script(outputs, layout, ending))
        job = slurm.sbatch(f"--job-name={NAME}", f"--output={outputs}/%j-{NAME}.log", f"--chdir={tmp_path}",
                           str(script))
        ids.append(job)
        log = outputs / f"{job}-{NAME}.log"
        last = f"completed step: {STEPS - 1},".encode()
        deadline = time.monotonic() + 20
        while not (log.exists() and last in log.read_bytes()):
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job} ({slurm.state(job)}) did not log step {STEPS - 1}:\n{slurm.log_tail()}")
            time.sleep(0.05)
        return job, outputs, log

    yield _submit
    live = [j for j in ids if slurm.state(j) in ("PENDING", "RUNNING", "CONFIGURING")]
    if live:
        slurm.run("scancel", *live, check=False)
        for job in live:
            slurm.wait_state(job, ("CANCELLED", "COMPLETED", "FAILED"))


def _later(hours=1):
    return (datetime.now() + timedelta(hours=hours)).isoformat(timespec="seconds")


def triage(cli, env, job, outputs, now):
    proc = cli("triage", "--slurm-id", job, "--outputs", str(outputs), "--now", now, "--json", env=env)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_running_job_is_running_then_hanging_once_its_steps_stop(slurm, submit, cli):
    job, outputs, _ = submit(layout="dir")
    assert slurm.state(job) == "RUNNING"

    rc, doc = triage(cli, slurm.env(), job, outputs, datetime.now().isoformat(timespec="seconds"))
    assert (rc, doc["data"]["status"], doc["data"]["primary"]) == (0, "running", None)

    rc, doc = triage(cli, slurm.env(), job, outputs, _later())
    data = doc["data"]
    assert (rc, data["status"], data["primary"]) == (1, "hanging", "hang")
    assert (data["progress"]["first_step"], data["progress"]["last_step"]) == (0, STEPS - 1)
    assert {"argv": ["scancel", str(job)]} in doc["next"], doc["next"]  # live: stopping it is a runnable step


def test_cancelled_job_reads_as_cancelled(slurm, submit, cli):
    job, outputs, log = submit(layout="log")
    slurm.run("scancel", job)
    assert slurm.wait_state(job, ("CANCELLED",)) == "CANCELLED"
    # slurmstepd writes its `*** JOB <id> ON <host> CANCELLED AT <time> ***` line as the job goes.
    deadline = time.monotonic() + 10
    while b"CANCELLED AT" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)

    rc, doc = triage(cli, slurm.env(), job, outputs, _later())
    data = doc["data"]
    # Cancelled a second after its last step: the cancel is the mechanism and nothing was hung.
    assert (rc, data["status"], data["primary"]) == (1, "cancelled", "cancelled")
    assert "hang" not in data["also"]


def test_job_killed_without_a_summary_is_an_unknown_death(slurm, submit, cli):
    # SIGKILL, as the OOM killer or a preemption would: no chance to print a JOB SUMMARY.
    job, outputs, _ = submit(layout="dir", ending="kill -KILL $$")
    state = slurm.wait_state(job, ("FAILED", "COMPLETED", "CANCELLED"))
    assert state == "FAILED"

    rc, doc = triage(cli, slurm.env(), job, outputs, _later())
    data = doc["data"]
    assert (rc, data["status"], data["primary"]) == (1, "unknown", "unknown-death")
    assert data["progress"]["last_step"] == STEPS - 1


def test_without_scontrol_on_path_the_state_is_unknown(slurm, submit, cli, tmp_path):
    job, outputs, _ = submit(layout="dir")
    assert slurm.state(job) == "RUNNING"     # what scontrol would have said: hanging, as above
    empty = tmp_path / "bin"
    empty.mkdir()

    rc, doc = triage(cli, slurm.env(PATH=str(empty)), job, outputs, _later())
    # Nothing says the job ended (no state, no end in the log): no death is claimed (issue 27).
    assert (rc, doc["data"]["status"], doc["data"]["primary"]) == (1, "unknown", None)
