"""On a cluster with slurmdbd (plain sacct): a job past its --time is TIMEOUT and diagnosed so,
and a job the controller has forgotten meanwhile is answered by sacct, with its steps' MaxRSS.

The one slow test of the Slurm suite: Slurm checks time limits about every 30 s, so a one-minute
limit ends the job about 75 s after it started; the controller forgets the other job (MinJobAge
2 s) on its 60 s purge cycle within that time.
"""

import json

import pytest

from gpuops import states
from gpuops.ops import diagnose, jobs as op, wait
from gpuops.remote.targets import target_for
from tests.slurm.conftest import cancel_recorded, login_env


@pytest.fixture
def acct_box(rig, slurm_accounted):
    box = rig.box("slurmacct", env=login_env(slurm_accounted))
    t = target_for(box.spec)
    yield t
    t.close()


def test_a_job_past_its_time_is_timeout_and_a_forgotten_one_is_read_from_sacct(acct_box, slurm_accounted, tmp_path):
    jobs_dir = tmp_path / "jobs"
    common = {"engine": "slurm", "jobs_dir": str(jobs_dir), "workdir": str(tmp_path)}
    try:
        early = op.launch(acct_box, command="python3 -c 'x = bytearray(96 << 20); import time; time.sleep(3)'",
                          **common)["data"]["job"]["job_id"]
        late = op.launch(acct_box, command="echo started; sleep 120", resources={"time": "0:01"}, **common)
        assert late["ok"], late["summary"]
        late = late["data"]["job"]["job_id"]
        done = wait.wait(acct_box, job=late, timeout_s=200, jobs_dir=str(jobs_dir))
        row = done["data"]["job"]
        assert (row["state"], row["scheduler_state"]) == (states.TIMEOUT, "TIMEOUT"), done["summary"]
        assert row["reason"].startswith("reached its time limit (00:01:00")
        why = diagnose.diagnose(acct_box, job=late, jobs_dir=str(jobs_dir))
        assert why["data"]["verdict"] == "timeout" and not why["ok"]
        assert why["next"][0]["argv"][-2:] == ["--time", "2"]
        assert why["data"]["triage"]["status"] == "cancelled"  # slurmstepd's DUE TO TIME LIMIT line

        assert slurm_accounted.state(slurm_accounted_id(jobs_dir, early)) is None  # the controller forgot it
        row = op.status(acct_box, job=early, jobs_dir=str(jobs_dir))["data"]["jobs"][0]
        assert (row["state"], row["scheduler_source"]) == (states.COMPLETED, "sacct")
        rss = diagnose.diagnose(acct_box, job=early, jobs_dir=str(jobs_dir))["data"]["scheduler"]["max_rss_mb"]
        assert rss and rss > 96
    finally:
        cancel_recorded(slurm_accounted, jobs_dir)


def slurm_accounted_id(jobs_dir, job):
    return json.loads((jobs_dir / job / "meta.json").read_text())["slurm_job_id"]
