"""The keeper and money (issue 36), over a real sshd box and real torch on the CPU: --budget evacuates
and stops when the ledger reaches it, --stop-idle stops a completed run's box once the fleet sees it
idle that long, and the ledger's figures add up to the wall time in both."""

import json

import pytest

from gpuops.keeper import record
from gpuops.keeper import vault as vaultmod
from tests.keeper.test_keeper_boxes import cli_launch, command, kinds, rec


def test_a_budget_reached_mid_run_evacuates_then_stops_the_run_and_the_box(cli, fleet):
    stopped = fleet.base / "stopped"
    # $360 an hour is 10 cents a second: a $4 budget lasts about 40 s of a 100 s run
    a = fleet.box(360.0, stop=f'ls "$GPUOPS_VAULT/checkpoints" > {stopped}')
    doc = cli_launch(cli, fleet, command(steps=400, every=5, step_s=0.25), "--budget", "4")
    run = doc["data"]["job"]["job_id"]
    r = cli("wait", "--job", run, "--timeout", "150", "--json", env=fleet.env())
    assert r.returncode == 1, r.stdout + r.stderr  # the run did not complete: never "done"
    kept = json.loads(r.stdout)["data"]["kept"]
    assert kept["phase"] == record.OVER_BUDGET, kept["why"]
    said = kinds(rec(run))
    assert said.index("budget-reached") < said.index("stopping") < said.index("stopped"), said
    money = kept["ledger"]
    assert sum(t["seconds"] for t in money["totals"].values()) == pytest.approx(money["wall_s"])
    # reached at a look (each 1.5 s here), then the stop: a few looks' worth over, never a run's worth
    assert 4.0 <= money["usd"] < 4.0 + 1.0, money
    held = [h["name"] for h in vaultmod.Vault(str(fleet.vault), run).held()]
    assert held and stopped.read_text().split() == sorted(held)  # the vault held them when the box was stopped
    box_run = json.loads(next(fleet.jobs(a).glob("*/run.json")).read_text())
    assert box_run["phase"] == "ended"  # stopped there (a stop wins over its retries), not finished
    assert "final step 400" not in "".join(p.read_text() for p in fleet.jobs(a).glob("*/log"))
    d = cli("diagnose", run, "--json", env=fleet.env())  # the box's diagnosis of the attempt, with the keeper's view
    told = json.loads(d.stdout)
    assert told["summary"].startswith(f"run {run}: OVER-BUDGET") and f"Attempt 1 on {a}: " in told["summary"], told
    assert told["data"]["kept"]["ledger"]["usd"] == pytest.approx(money["usd"])


def test_stop_idle_stops_the_completed_runs_box_once_it_was_idle_that_long(cli, fleet):
    stopped = fleet.base / "stopped"
    a = fleet.box(1.0, stop=f"date +%s.%N > {stopped}")
    run = cli_launch(cli, fleet, command(steps=5), "--stop-idle", "4")["data"]["job"]["job_id"]
    r = cli("wait", "--job", run, "--timeout", "120", "--json", env=fleet.env())
    assert r.returncode == 0, r.stdout + r.stderr
    events = rec(run)["events"]
    stopping = next(e for e in events if e["kind"] == "stopping")
    assert "--stop-idle 4s" in stopping["why"] and [e["kind"] for e in events][-3:] == ["stopping", "stopped", "ended"]
    ended_at = json.loads(next(fleet.jobs(a).glob("*/exit.json")).read_text())["ended_at"]
    assert float(stopped.read_text()) - ended_at >= 4.0  # idle from the job's end on the box, that long
    money = json.loads(r.stdout)["data"]["kept"]["ledger"]
    assert money["totals"]["idle"]["seconds"] >= 3.0
    assert sum(t["seconds"] for t in money["totals"].values()) == pytest.approx(money["wall_s"])
