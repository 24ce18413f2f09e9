"""A run whose checkpoints are single files (`torch.save(state, "ckpt/checkpoint-N.pt")`, --checkpoint-dir
ckpt:checkpoint-*.pt) outlives its box as a run of checkpoint directories does, over real sshd boxes and
real torch on the CPU: each complete file is copied into the vault (here, or on a vault host) and held
as that file, and when the box is killed outright the run finishes on another box, resumed from the
vault's file pushed back under the same name; an --output naming one file lands as that file."""

import sys

import pytest

from gpuops.jobs import runpolicy
from gpuops.keeper import start
from gpuops.keeper import vault as vaultmod
from gpuops.keeper.remotevault import RemoteVault
from gpuops.placement import request
from tests.jobs.helpers import wait_for
from tests.keeper.test_keeper_boxes import DDP, LOST_AFTER_S, killed_and_moved, kinds, rec


@pytest.mark.parametrize("where", ["here", "host"])
def test_a_run_of_single_file_checkpoints_killed_outright_resumes_on_another_box_from_the_vaults_file(
        fleet, where):
    v = fleet.host() if where == "host" else None
    a, b = fleet.box(2.0), fleet.box(3.0)
    cmd = (f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 1 {DDP} --ckpt ckpt "
           f"--steps 20 --every 5 --step-seconds 0.25 --single-file")
    policy = runpolicy.build(checkpoint_dir="ckpt:checkpoint-*.pt", resume_arg="--resume {checkpoint}")
    vault_dir = f"{v}:{fleet.home(v)}/vault" if v else str(fleet.vault)
    doc = start.launch(start.spec_of(command=cmd, fleet=str(fleet.file), vault_dir=vault_dir, policy=policy,
                                     request=request(1), lost_after_s=LOST_AFTER_S,
                                     outputs=["ckpt/checkpoint-20.pt"]))
    assert doc["ok"], doc["summary"]
    run = doc["data"]["job"]["job_id"]
    base = fleet.home(v) / "vault" if v else fleet.vault
    kept = RemoteVault(v, str(base.resolve()), run) if v else vaultmod.Vault(str(base), run)

    def held():
        return [h["name"] for h in kept.held()]

    assert wait_for(lambda: "checkpoint-10.pt" in held(), timeout=90, every=1.0), kinds(rec(run))
    there = base / run / vaultmod.CHECKPOINTS
    assert (there / "checkpoint-10.pt").is_file()  # held as the file itself, with its manifest beside it
    assert (there / ".checkpoint-10.pt.gpuops-manifest.json").is_file()
    r = killed_and_moved(fleet, run, a, b)  # finished on b within --lost-after + 90 s, never back on a
    resumed = r["attempts"][1]["resumed_from"]
    assert resumed.startswith("checkpoint-") and resumed.endswith(".pt")
    step = int(resumed[len("checkpoint-"):-len(".pt")])
    assert step >= 10  # a file the vault held when a was lost
    box_log = next(fleet.jobs(b).glob("*/log")).read_text()
    assert f"resumed from {fleet.home(b)}/ckpt/{resumed} at step {step + 1}" in box_log, box_log[-2000:]
    assert "final step 20" in box_log
    assert "checkpoint-20.pt" in held() and (there / "checkpoint-20.pt").is_file()
    out = base / run / vaultmod.OUTPUTS / "checkpoint-20.pt"  # --output naming one file: that file
    assert out.is_file() and out.read_bytes() == (fleet.home(b) / "ckpt" / "checkpoint-20.pt").read_bytes()
    assert [p.name for p in (base / run / vaultmod.INCOMING).iterdir() if not p.name.endswith(".gpuops-lock")] == []
