"""A kept gang (issue 36): torchrun over two real sshd boxes, real torch with gloo on the CPU (2 nodes
x 1 process), rank 0 checkpointing on the head's box. One node's box is killed outright (its sshd and
every process gone); the keeper calls it lost past --lost-after, stops what is left of the gang, and
launches it again from the vault's newest checkpoint: on a replacement box from the fleet, or, with
--nnodes MIN:MAX and no box to spare, on the node that is left. The gang finishes with the right final
step and never returns to the lost box."""

import sys

import pytest

from gpuops import fleetstate
from gpuops.jobs import runpolicy
from gpuops.keeper import record, start, view
from gpuops.keeper import vault as vaultmod
from gpuops.placement import request
from tests.conftest import FIXTURES
from tests.jobs.helpers import wait_for
from tests.rig.sshd import free_port

pytest.importorskip("torch", reason="torch is the test extra's (CPU wheel)")

DDP = FIXTURES / "runs" / "ddp_resume.py"
LOST_AFTER_S = 6.0
STEPS = 60


def launch(fleet, hosts, nnodes=None):
    policy = runpolicy.build(checkpoint_dir="ckpt", resume_arg="--resume {checkpoint}")
    spec = start.spec_of(command=f"{DDP} --ckpt ckpt --steps {STEPS} --every 5 --step-seconds 0.25", fleet=str(fleet.file),
                         vault_dir=str(fleet.vault), policy=policy, request=request(1), lost_after_s=LOST_AFTER_S,
                         env={"OMP_NUM_THREADS": "1"},
                         gang={"hosts": hosts, "nproc_per_node": 1, "rdzv_port": free_port(), "nnodes": nnodes,
                               "max_restarts": None})
    doc = start.launch(spec)
    assert doc["ok"], doc["summary"]
    return doc["data"]["job"]["job_id"]


def held(fleet, run):
    return [h["name"] for h in vaultmod.Vault(str(fleet.vault), run).held()]


def a_checkpoint_past_step_10(fleet, run):
    """The vault holds a checkpoint of step 10 or later (a slow look may copy 15-25 at once, never 10)."""
    return any(int(n.rsplit("-", 1)[1]) >= 10 for n in held(fleet, run))


def finished(run, timeout):
    assert wait_for(lambda: record.read(run)["phase"] in record.ENDED, timeout=timeout, every=0.5), \
        "\n".join(f"{e['kind']} {e.get('box') or ''} {e.get('why') or ''}" for e in record.read(run)["events"])
    r = record.read(run)
    assert r["phase"] == record.FINISHED, (r.get("why"), [(e["kind"], e.get("why")) for e in r["events"]])
    return r


def head_log(fleet, box):
    return "".join(p.read_text() for p in sorted(fleet.jobs(box).glob("*/log")))


def resumed_step(r):
    resumed = r["attempts"][-1]["resumed_from"]
    assert resumed and resumed.startswith("checkpoint-"), resumed
    return resumed, int(resumed.rsplit("-", 1)[1])


def test_a_gang_whose_node_box_is_killed_outright_finishes_on_a_replacement_from_the_fleet(cli, fleet):
    a, b, c = fleet.box(1.0), fleet.box(2.0), fleet.box(4.0)
    run = launch(fleet, [a, b])
    assert wait_for(lambda: a_checkpoint_past_step_10(fleet, run), timeout=180, every=0.5), record.read(run)["events"]
    fleet.kill(b)
    r = finished(run, LOST_AFTER_S + 180)
    assert [[n["box"] for n in x["nodes"]] for x in r["attempts"]] == [[a, b], [a, c]]
    assert list(r["lost"]) == [b] and r["lost"][b].startswith("unreachable for")
    assert fleetstate.lost_boxes()[b]["run"] == run
    name, step = resumed_step(r)
    assert step >= 10  # the vault held it (checked against its manifest before the push); since pruned
    log = head_log(fleet, a)
    assert f"resumed from ckpt/{name} at step {step + 1}" in log and f"final step {STEPS}" in log, log[-3000:]
    assert f"checkpoint-{STEPS}" in held(fleet, run)
    kinds = [e["kind"] for e in r["events"]]
    assert kinds.index("lost") < kinds.index("nodes-stopped") < kinds.index("relaunched")
    money = view.status(r)["data"]["kept"]["ledger"]
    assert sum(t["seconds"] for t in money["totals"].values()) == pytest.approx(money["wall_s"])
    # the first attempt cost a's and b's price, the second a's and c's
    rates = {f"{a},{b}": 3.0, f"{a},{c}": 5.0}
    assert money["usd"] == pytest.approx(sum(x["seconds"] * rates[x["box"]] / 3600 for x in money["rows"]))
    shown = cli("fleet", "--fleet", str(fleet.file), env=fleet.env())  # b is gone: a row with its error, and why
    said = shown.stdout + shown.stderr
    assert f"{b}: lost by run {run}: unreachable for" in said and f"1 lost by a kept run ({b})" in said, said


def test_a_gang_with_nnodes_min_max_and_no_box_to_spare_goes_on_with_the_node_left(fleet):
    a, b = fleet.box(1.0), fleet.box(1.0)
    run = launch(fleet, [a, b], nnodes="1:2")
    assert wait_for(lambda: a_checkpoint_past_step_10(fleet, run), timeout=180, every=0.5), record.read(run)["events"]
    fleet.kill(b)
    r = finished(run, LOST_AFTER_S + 240)
    assert [[n["box"] for n in x["nodes"]] for x in r["attempts"]] == [[a, b], [a]]
    assert list(r["lost"]) == [b]
    name, step = resumed_step(r)
    log = head_log(fleet, a)
    assert f"resumed from ckpt/{name} at step {step + 1}" in log and f"final step {STEPS}" in log, log[-3000:]
