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

import pytest

from gpuops import fleetstate
from gpuops.jobs import runpolicy
from gpuops.keeper import record, start, view
from gpuops.keeper import vault as vaultmod
from gpuops.placement import request
from tests.conftest import FIXTURES
from tests.jobs.helpers import kill_everything, wait_for

DDP = FIXTURES / "runs" / "ddp_resume.py"
BULKY = FIXTURES / "runs" / "bulky.py"
LOST_AFTER_S = 6.0


def command(steps=30, every=5, step_s=0.25):
    return (f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 1 {DDP} --ckpt ckpt "
            f"--steps {steps} --every {every} --step-seconds {step_s}")


def launch(fleet, cmd, lost_after_s=LOST_AFTER_S, **kw):
    policy = runpolicy.build(checkpoint_dir="ckpt", resume_arg="--resume {checkpoint}")
    spec = start.spec_of(command=cmd, fleet=str(fleet.file), vault_dir=str(fleet.vault), policy=policy,
                         request=request(1), lost_after_s=lost_after_s, **kw)
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


def killed_and_moved(fleet, run, a, b, until_ended=ended) -> dict:
    """Box `a` killed outright: the run's record once it finished on `b` within --lost-after + 90 s
    (`until_ended`: how the record is read, here or from a keeper host)."""
    fleet.kill(a)
    killed_at = time.monotonic()
    r = until_ended(run, LOST_AFTER_S + 90)
    assert time.monotonic() - killed_at < LOST_AFTER_S + 90
    assert r["phase"] == record.FINISHED, r.get("why")
    assert [x["box"] for x in r["attempts"]] == [a, b]
    return r


def test_a_box_killed_outright_mid_run_finishes_on_another_from_the_vault(fleet):
    a, b = fleet.box(2.0), fleet.box(3.0)
    run, first = launch(fleet, command())
    assert first == a  # the fleet's order breaks the tie between two idle boxes
    assert wait_for(lambda: "checkpoint-10" in held(fleet, run), timeout=90, every=0.5), kinds(rec(run))
    r = killed_and_moved(fleet, run, a, b)
    assert r["lost"][a].startswith("unreachable for")
    assert fleetstate.lost_boxes()[a]["run"] == run
    resumed = r["attempts"][1]["resumed_from"]
    assert resumed in held(fleet, run) or resumed.startswith("checkpoint-")
    box_log = next((fleet.jobs(b)).glob("*/log")).read_text()
    step = int(resumed.rsplit("-", 1)[1])
    assert f"resumed from {fleet.home(b)}/ckpt/{resumed} at step {step + 1}" in box_log, box_log[-2000:]
    assert "final step 30" in box_log
    money = view.status(r)["data"]["kept"]["ledger"]
    seconds = {k: t["seconds"] for k, t in money["totals"].items()}
    assert sum(seconds.values()) == pytest.approx(money["wall_s"])
    assert all(seconds[k] > 0 for k in ("useful", "redone", "detection", "launch", "relaunch"))
    assert seconds["detection"] >= LOST_AFTER_S  # from box a's last answer until it was called lost
    assert money["usd"] == pytest.approx(sum(r["seconds"] * {a: 2.0, b: 3.0}[r["box"]] / 3600 for r in money["rows"]))


def test_logs_of_a_kept_run_follow_it_to_the_box_it_runs_on(cli, fleet):
    a = fleet.box(1.0)
    run, _ = launch(fleet, command(steps=5))
    ended(run, 90)
    r = cli("logs", run, "--tail", "5", env=fleet.env())
    assert r.returncode == 0 and "final step 5" in r.stdout, r.stdout + r.stderr
    assert f"run {run}: attempt 1 on {a} (job {run})" in r.stderr


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
    assert wait_for(lambda: not record.keeper_alive(run)["alive"], timeout=10)
    box = fleet.vault / run / vaultmod.CHECKPOINTS
    assert "checkpoint-5" not in os.listdir(box) and held(fleet, run) == []
    start.spawn(run)  # a new keeper picks up where the killed one was: the copy starts again
    r = ended(run, 90)
    assert r["phase"] == record.FINISHED, r.get("why")
    v = vaultmod.Vault(str(fleet.vault), run)
    assert held(fleet, run) == ["checkpoint-5"] and v.verify("checkpoint-5") == []
    assert os.path.getsize(box / "checkpoint-5" / "state.pt") > 200 << 20


def cli_launch(cli, fleet, cmd, *extra):
    r = cli("launch", "--fleet", str(fleet.file), "--vault", str(fleet.vault), "--gpus", "1", "--cmd", cmd,
            "--checkpoint-dir", "ckpt", "--resume-arg=--resume {checkpoint}", "--lost-after", "6", *extra, "--json",
            env=fleet.env())
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_stop_when_done_stops_the_box_only_after_the_vault_holds_the_end_and_the_ledger_adds_up(cli, fleet):
    stopped = fleet.base / "stopped"
    a = fleet.box(3.6, stop=f'ls "$GPUOPS_VAULT/checkpoints" "$GPUOPS_VAULT/outputs/ckpt" > {stopped}')
    doc = cli_launch(cli, fleet, command(steps=10), "--stop-when-done", "--output", "ckpt")
    run = doc["data"]["job"]["job_id"]
    assert doc["host"] == a and record.keeper_alive(run)["alive"]  # the launch has exited; its keeper runs on
    r = cli("wait", "--job", run, "--timeout", "120", "--json", env=fleet.env())
    assert r.returncode == 0, r.stdout + r.stderr
    kept = json.loads(r.stdout)["data"]["kept"]
    assert kept["phase"] == record.FINISHED
    said = [(e["kind"], e.get("name") or e.get("path")) for e in rec(run)["events"]]
    stopping = said.index(("stopping", None))
    assert said.index(("evacuated", "checkpoint-10")) < stopping and said.index(("output-evacuated", "ckpt")) < stopping
    assert said[stopping + 1][0] == "stopped"
    listed = stopped.read_text().split()
    assert "checkpoint-10" in listed and "trainer_state.json" not in listed[:listed.index("checkpoint-10")]
    money = kept["ledger"]
    assert sum(t["seconds"] for t in money["totals"].values()) == pytest.approx(money["wall_s"])
    assert money["usd"] == pytest.approx(3.6 * money["wall_s"] / 3600)
    assert money["totals"]["useful"]["seconds"] > 0 and money["totals"]["idle"]["seconds"] > 0
    assert money["totals"]["redone"]["seconds"] == 0 and money["totals"]["detection"]["seconds"] == 0
    shown = cli("status", run, env=fleet.env())
    assert shown.returncode == 0 and f"attempt 1: {a} job {run}" in shown.stdout and "useful" in shown.stdout


def test_a_failing_stop_command_is_an_event_and_a_non_zero_exit_never_done(cli, fleet):
    fleet.box(1.0, stop='echo "no such instance: 123" >&2; exit 3')
    run = cli_launch(cli, fleet, command(steps=5), "--stop-when-done")["data"]["job"]["job_id"]
    r = cli("wait", "--job", run, "--timeout", "120", "--json", env=fleet.env())
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["data"]["kept"]["phase"] == record.STOP_FAILED
    failed = next(e for e in rec(run)["events"] if e["kind"] == "stop-failed")
    assert "stop command exited 3" in failed["why"] and "no such instance: 123" in failed["why"]
    assert "stopped" not in kinds(rec(run)) and "checkpoint-5" in held(fleet, run)


def test_proof_of_loss_moves_the_run_at_once_and_never_back_to_the_box_that_still_answers(fleet):
    """Box a stays up and idle; first its run's supervisor and processes die (no live process and
    nothing to retry), then on box b the box reboots (a new boot id): each is a loss at once, well
    before a --lost-after of 10 minutes, and the run never returns to a box it lost."""
    a, b, c = fleet.box(1.0), fleet.box(1.0), fleet.box(1.0)
    # 120 steps (30 s): the run must outlast two kills, however quickly this machine trains it
    run, _ = launch(fleet, command(steps=120), lost_after_s=600.0)
    assert wait_for(lambda: held(fleet, run), timeout=90, every=0.5)
    kill_everything(fleet.jobs(a))
    assert wait_for(lambda: len(rec(run)["attempts"]) == 2, timeout=60, every=0.5), kinds(rec(run))
    assert rec(run)["attempts"][1]["box"] == b
    assert wait_for(lambda: "relaunched" in kinds(rec(run)) and len(held(fleet, run)) > 0, timeout=30)
    boot = fleet.base / f"root-{b}" / "proc/sys/kernel/random/boot_id"
    boot.write_text("0123456789abcdef0123456789abcdef\n")
    kill_everything(fleet.jobs(b))
    r = ended(run, 120)
    assert r["phase"] == record.FINISHED, r.get("why")
    assert [x["box"] for x in r["attempts"]] == [a, b, c]
    assert r["lost"][a] == "the run's supervisor is gone and no process of the attempt lives"
    assert r["lost"][b].startswith("rebooted (boot id 01234567")
