"""The run outlives the box (issue 36), over real sshd boxes and real torch on the CPU: the keeper
copies each complete checkpoint into the vault, moves the run to another box of the fleet when its
box is killed outright, waits out a blip, never holds a half-copied checkpoint, stops the box only
after the vault holds the end, and its ledger adds up to the wall time."""

import json
import os
import signal
import sys
import time
from pathlib import Path

from gpuops.jobs import runpolicy
from gpuops.keeper import record, start
from gpuops.keeper import vault as vaultmod
from gpuops.placement import request
from tests.conftest import FIXTURES
from tests.jobs.helpers import wait_for

DDP = FIXTURES / "runs" / "ddp_resume.py"
BULKY = FIXTURES / "runs" / "bulky.py"
LOST_AFTER_S = 6.0


def command(steps=30, every=5, step_s=0.25):
    return (f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 1 {DDP} --ckpt ckpt "
            f"--steps {steps} --every {every} --step-seconds {step_s}")


def launch(fleet, cmd, **kw):
    policy = runpolicy.build(checkpoint_dir="ckpt", resume_arg="--resume {checkpoint}")
    spec = start.spec_of(command=cmd, fleet=str(fleet.file), vault_dir=str(fleet.vault), policy=policy,
                         request=request(1), lost_after_s=LOST_AFTER_S, poll_s=1.0, **kw)
    doc = start.launch(spec)
    assert doc["ok"], doc["summary"]
    return doc["data"]["job"]["job_id"], doc["host"]


def rec(run):
    return record.read(run)


def ended(run, timeout):
    done = wait_for(lambda: rec(run)["phase"] in record.ENDED, timeout=timeout, every=0.5)
    assert done, [(e["kind"], e.get("why")) for e in rec(run)["events"]]
    return rec(run)


def held(fleet, run):
    return [h["name"] for h in vaultmod.Vault(str(fleet.vault), run).held()]


def kinds(r):
    return [e["kind"] for e in r["events"]]


def test_a_box_killed_outright_mid_run_finishes_on_another_from_the_vault(fleet):
    a, b = fleet.box(2.0), fleet.box(3.0)
    run, first = launch(fleet, command())
    assert first == a  # the fleet's order breaks the tie between two idle boxes
    assert wait_for(lambda: "checkpoint-10" in held(fleet, run), timeout=90, every=0.5), kinds(rec(run))
    fleet.kill(a)
    killed_at = time.monotonic()
    r = ended(run, LOST_AFTER_S + 90)
    assert time.monotonic() - killed_at < LOST_AFTER_S + 90
    assert r["phase"] == record.FINISHED, r.get("why")
    assert [x["box"] for x in r["attempts"]] == [a, b]
    assert r["lost"][a].startswith("unreachable for")
    assert record.lost_boxes()[a]["run"] == run
    resumed = r["attempts"][1]["resumed_from"]
    assert resumed in held(fleet, run) or resumed.startswith("checkpoint-")
    box_log = next((fleet.jobs(b)).glob("*/log")).read_text()
    step = int(resumed.rsplit("-", 1)[1])
    assert f"resumed from {fleet.home(b)}/ckpt/{resumed} at step {step + 1}" in box_log, box_log[-2000:]
    assert "final step 30" in box_log


def test_a_blip_shorter_than_lost_after_is_waited_out_without_a_relaunch(fleet):
    a, _ = fleet.box(2.0), fleet.box(3.0)
    run, _ = launch(fleet, command(steps=30))
    assert wait_for(lambda: held(fleet, run), timeout=90, every=0.5)
    fleet.boxes[a].stop()  # the box's network goes; its processes run on
    assert wait_for(lambda: "unreachable" in kinds(rec(run)), timeout=20, every=0.2)
    fleet.boxes[a].start()
    r = ended(run, 120)
    assert r["phase"] == record.FINISHED, r.get("why")
    assert [x["box"] for x in r["attempts"]] == [a] and r["lost"] == {}
    assert "answering" in kinds(r) and "lost" not in kinds(r) and "relaunched" not in kinds(r)
    assert "checkpoint-30" in held(fleet, run)


def test_a_keeper_killed_mid_copy_leaves_no_checkpoint_that_looks_complete(fleet):
    fleet.box(1.0)
    run, _ = launch(fleet, f"{sys.executable} {BULKY} --ckpt ckpt --steps 5 --every 5 --mb 200")
    incoming = fleet.vault / run / vaultmod.INCOMING
    assert wait_for(lambda: list(incoming.glob("checkpoint-5~*")), timeout=90, every=0.005)
    keeper = json.loads(Path(record.path(run, record.PID)).read_text())
    os.kill(keeper["pid"], signal.SIGKILL)  # the keeper alone: the copy it started may run on
    box = fleet.vault / run / vaultmod.CHECKPOINTS
    assert "checkpoint-5" not in os.listdir(box) and held(fleet, run) == []
    start.spawn(run)  # a new keeper picks up where the killed one was: the copy starts again
    r = ended(run, 90)
    assert r["phase"] == record.FINISHED, r.get("why")
    v = vaultmod.Vault(str(fleet.vault), run)
    assert held(fleet, run) == ["checkpoint-5"] and v.verify("checkpoint-5") == []
    assert os.path.getsize(box / "checkpoint-5" / "state.pt") > 200 << 20
