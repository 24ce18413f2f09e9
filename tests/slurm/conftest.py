"""Fixtures for gpuops jobs on Slurm: the suite's real single-node Slurm (tests/rig/slurm.py),
reached as a login node through the suite's real sshd, and a jobs directory per test whose
Slurm jobs are cancelled when the test ends, so the node's two CPUs are free for the next.

The login box carries SLURM_CONF (so its sbatch, squeue, scontrol and sacct find the rig) and a
PATH that starts with this interpreter's directory, as a login node with the project's venv
active would: the job's torchrun and python are that environment's.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuops.remote.targets import target_for
from tests.jobs.helpers import wait_for
from tests.rig.slurm import SlurmError, SlurmRig, accounting_unavailable, unavailable

# A command line that says it got the checkpoint signal (USR1) and exits 3 a few seconds after it starts.
CHECKPOINTING = ("python3 -c '\n"
                 "import signal, sys, time\n"
                 "signal.signal(signal.SIGUSR1, lambda s, f: print(\"checkpoint\", flush=True))\n"
                 "print(\"ready\", flush=True)\n"
                 "time.sleep(3)\n"
                 "sys.exit(3)'\n")
# The controller forgets an ended job this many seconds after it ended (on its 60 s purge cycle),
# so a test that runs longer sees status answered from sacct.
MIN_JOB_AGE_S = 2


def _bring_up(**kw):
    rig = SlurmRig(**kw)
    try:
        rig.start()
    except (SlurmError, RuntimeError, OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"the Slurm daemons cannot run on this machine: {e}")
    return rig


@pytest.fixture(scope="session")
def slurm():
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    rig = _bring_up(min_job_age=MIN_JOB_AGE_S)
    yield rig
    rig.stop()


@pytest.fixture(scope="session")
def slurm_accounted():
    """A second cluster with slurmdbd and MariaDB: plain sacct answers, with MaxRSS per step."""
    reason = accounting_unavailable()
    if reason:
        pytest.skip(reason)
    rig = _bring_up(accounting=True, min_job_age=MIN_JOB_AGE_S)
    yield rig
    rig.stop()


def login_env(slurm, **extra):
    return {"SLURM_CONF": str(slurm.conf), "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"],
            **extra}


@pytest.fixture(scope="session")
def login(rig, slurm):
    return rig.box("slurmlogin", env=login_env(slurm))


@pytest.fixture
def box(login):
    t = target_for(login.spec)
    yield t
    t.close()


@pytest.fixture
def jobs_dir(tmp_path, slurm):
    d = tmp_path / "jobs"
    yield d
    cancel_recorded(slurm, d)


def cancel_recorded(slurm, jobs_dir):
    """scancel every Slurm job recorded under `jobs_dir` and wait until the node has let go of them."""
    ids = [json.loads(p.read_text()).get("slurm_job_id") for p in Path(jobs_dir).glob("*/meta.json")]
    ids = [i for i in ids if i]
    if ids:
        slurm.run("scancel", *ids, check=False)
        for job in ids:
            try:
                slurm.wait_state(job, ("CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", None), timeout=30)
            except SlurmError:
                pass


def start_requeued(slurm, slurm_id):
    """Start a requeued job now: Slurm keeps one back two minutes (its begin time), which a test
    need not wait out. Waits for the node to have let go of the run before, as those two minutes
    do: a start sooner can meet slurmd still ending it ("Job N already killed, do not launch batch
    job", and the job FAILED)."""
    slurm.wait_state(slurm_id, ("PENDING",))
    idle = lambda: slurm.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.split() == ["idle"]  # noqa: E731
    assert wait_for(idle, timeout=30), slurm.log_tail(25)
    time.sleep(1.0)
    slurm.run("scontrol", "update", f"JobId={slurm_id}", "StartTime=now")
