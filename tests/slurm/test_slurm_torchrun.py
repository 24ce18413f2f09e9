"""`launch --engine slurm --torchrun` runs a real torch DDP script (CPU, gloo) to completion: srun
starts torchrun on the allocation's node, the c10d rendezvous is on the first node at a port
checked free there, and the two ranks train and all-reduce."""

import json
from pathlib import Path

import pytest

from gpuops import states
from gpuops.ops import jobs as op, wait

SCRIPT = Path(__file__).resolve().parent.parent / "fixtures" / "slurm" / "ddp_train.py"


def test_a_torchrun_job_on_one_node_trains_to_completion(box, slurm, jobs_dir, tmp_path):
    pytest.importorskip("torch", reason="the test extra installs torch (CPU wheel)")
    doc = op.launch(box, command=f"{SCRIPT}", engine="slurm", jobs_dir=str(jobs_dir), workdir=str(tmp_path),
                    resources={"nodes": 1, "cpus_per_task": 2}, torchrun={"nproc_per_node": 2, "port": 29500})
    assert doc["ok"], doc["summary"]
    job = doc["data"]["job"]["job_id"]
    meta = doc["data"]["meta"]
    assert meta["command"].startswith("srun --ntasks-per-node=1 --kill-on-bad-exit=1 --export=ALL torchrun ")
    assert '--rdzv-endpoint "$GPUOPS_RDZV_HOST:$GPUOPS_RDZV_PORT"' in meta["command"]
    assert "--ntasks-per-node=1" in meta["sbatch_options"]
    done = wait.wait(box, job=job, timeout_s=240, jobs_dir=str(jobs_dir))
    log = (jobs_dir / job / "log").read_text()
    assert done["data"]["state"] == states.COMPLETED, log[-3000:] + slurm.log_tail(20)
    assert "ddp done world=2 nodes=1 replicas_equal=True" in log
    assert json.loads((jobs_dir / job / "exit.json").read_text())["exit_code"] == 0
