"""An agent keeps a run across boxes (issue 36, MCP) through the official client: fleet_launch takes the
keeper's fields (vault, lost_after_s, stop_when_done, budget with checkpoint_dir and resume_arg), a
local vault outside the server's roots is refused before anything starts (a HOST:DIR one is on its
host, not bound by them; a bad one is a usage error), and job_status of the run answers
from the keeper's record: where each attempt ran, the vault, the ledger."""

import json

import anyio
import pytest

from gpuops.keeper import record
from tests.keeper.test_keeper_boxes import command

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")


def _doc(result):
    return json.loads(result.content[0].text)


def served(fleet, monkeypatch, hosts, roots) -> None:
    """The server's fleet file (XDG_CONFIG_HOME) is the fleet's with a group `kept` of `hosts`; its
    roots are `roots`; it runs in operate mode."""
    config = fleet.base / "config"
    (config / "gpuops").mkdir(parents=True)
    group = ", ".join(f'"{h}"' for h in hosts)
    (config / "gpuops" / "fleet.toml").write_text(fleet.file.read_text() + f"[fleet.kept]\nhosts = [{group}]\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(roots))
    monkeypatch.delenv("GPUOPS_MODE", raising=False)


@pytest.mark.anyio
async def test_an_agent_launches_a_kept_run_and_reads_its_boxes_vault_and_ledger(fleet, monkeypatch, tmp_path_factory):
    from mcp import Client

    from gpuops.mcp import server

    a = fleet.box(1.8)
    served(fleet, monkeypatch, [a], fleet.base)
    asked = {"fleet": "kept", "gpus": 1, "cmd": command(steps=5), "checkpoint_dir": "ckpt",
             "resume_arg": "--resume {checkpoint}", "lost_after_s": 6}
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    async with Client(server.build(toolsets="all")) as client:
        outside = await client.call_tool("fleet_launch", dict(asked, vault=str(elsewhere)))
        assert outside.is_error and "GPUOPS_MCP_ROOTS" in _doc(outside)["summary"], _doc(outside)
        assert not fleet.jobs(a).exists() or not any(fleet.jobs(a).iterdir())  # nothing started
        launched = await client.call_tool("fleet_launch", dict(asked, vault=str(fleet.vault)))
        doc = _doc(launched)
        assert not launched.is_error and doc["ok"] and doc["host"] == a, doc
        run = doc["data"]["job"]["job_id"]
        assert doc["data"]["keeper"]["vault"] == str(fleet.vault / run)
        with anyio.fail_after(120):
            while record.read(run)["phase"] not in record.ENDED:
                await anyio.sleep(0.5)
        status = await client.call_tool("job_status", {"host": a, "job": run})
    kept = _doc(status)["data"]["kept"]
    assert kept["phase"] == record.FINISHED and [x["box"] for x in kept["attempts"]] == [a]
    assert "checkpoint-5" in kept["vault"]["held"] and kept["lost"] == {}
    money = kept["ledger"]
    assert sum(t["seconds"] for t in money["totals"].values()) == pytest.approx(money["wall_s"])
    assert money["usd"] == pytest.approx(1.8 * money["wall_s"] / 3600)


@pytest.mark.anyio
async def test_an_agents_vault_on_another_host_is_not_bound_by_the_roots(fleet, monkeypatch):
    from mcp import Client

    from gpuops.mcp import server

    v, a = fleet.host(), fleet.box(1.0)
    served(fleet, monkeypatch, [a], fleet.base / "config")  # the vault host's DIR is not under the roots
    asked = {"fleet": "kept", "gpus": 1, "cmd": command(steps=5), "checkpoint_dir": "ckpt",
             "resume_arg": "--resume {checkpoint}", "lost_after_s": 6}
    there = fleet.home(v) / "vault"
    async with Client(server.build(toolsets="all")) as client:
        bad = await client.call_tool("fleet_launch", dict(asked, vault=f"{v}:"))
        assert bad.is_error and "HOST:DIR" in _doc(bad)["summary"], _doc(bad)
        assert not fleet.jobs(a).exists() or not any(fleet.jobs(a).iterdir())  # nothing started
        launched = await client.call_tool("fleet_launch", dict(asked, vault=f"{v}:{there}"))
        doc = _doc(launched)
        assert not launched.is_error and doc["ok"], doc
        run = doc["data"]["job"]["job_id"]
        assert doc["data"]["keeper"]["vault"] == f"{v}:{there.resolve()}/{run}"
        with anyio.fail_after(120):
            while record.read(run)["phase"] not in record.ENDED:
                await anyio.sleep(0.5)
        status = await client.call_tool("job_status", {"host": a, "job": run})
    kept = _doc(status)["data"]["kept"]
    assert kept["phase"] == record.FINISHED and "checkpoint-5" in kept["vault"]["held"]
    assert (there / run / "checkpoints" / "checkpoint-5").is_dir()  # on the vault host (loopback: seen here)


@pytest.mark.anyio
async def test_an_agent_stops_a_kept_run_by_its_plan_and_nothing_is_relaunched(cli, fleet, monkeypatch):
    """job_stop of a kept run with no host (the keeper's path, as the CLI's `stop --job RUN`): a plan
    first (nothing asked, the run goes on), a stale plan refused, then the plan applied: the run ends
    STOPPED on its one attempt, its log stops growing, and job_wait/job_status say so with no host.
    The CLI's `stop --job RUN` offers the same next step."""
    from mcp import Client

    from gpuops.mcp import server
    from tests.test_mcp_parity import steps

    a, spare = fleet.box(1.0), fleet.box(1.0)  # a spare box: a relaunch would have somewhere to go
    served(fleet, monkeypatch, [a, spare], fleet.base)
    asked = {"fleet": "kept", "gpus": 1, "cmd": command(steps=400), "checkpoint_dir": "ckpt",
             "resume_arg": "--resume {checkpoint}", "lost_after_s": 6, "vault": str(fleet.vault)}
    async with Client(server.build(toolsets="all")) as client:
        doc = _doc(await client.call_tool("fleet_launch", asked))
        assert doc["ok"], doc
        run, box = doc["data"]["job"]["job_id"], doc["host"]
        log = fleet.jobs(box) / run / "log"
        with anyio.fail_after(90):
            while not (log.exists() and "step 3 " in log.read_text()):
                await anyio.sleep(0.5)
        hostless = await client.call_tool("job_stop", {"job": "no-such-run"})
        assert hostless.is_error and "kept run" in _doc(hostless)["summary"], _doc(hostless)
        plan = _doc(await client.call_tool("job_stop", {"job": run}))
        assert plan["ok"] and plan["data"]["dry_run"] and "dry run" in plan["summary"], plan
        plan_id = plan["data"]["plan"]["plan_id"]
        assert plan["next"][0]["tool"] == "job_stop" and plan["next"][0]["args"]["plan_id"] == plan_id, plan["next"]
        assert record.stop_asked(run) is None and record.read(run)["phase"] == record.RUNNING
        said = json.loads(cli("stop", "--job", run, "--json", env=fleet.env()).stdout)
        assert said["data"]["dry_run"] and steps(said["next"], made_by_cli=True) == steps(plan["next"]), said
        stale = await client.call_tool("job_stop", {"job": run, "yes": True, "plan_id": "0123456789abcdef-1"})
        assert stale.is_error and _doc(stale)["data"]["refused_plan"] and record.stop_asked(run) is None, _doc(stale)
        applied = _doc(await client.call_tool("job_stop", {"job": run, "yes": True, "plan_id": plan_id}))
        assert applied["ok"] and applied["data"]["asked"] == "this machine", applied
        assert applied["next"][0]["tool"] == "job_wait" and applied["next"][0]["args"] == {"job": run}, applied
        for _ in range(6):  # job_wait answers within a call; an agent calls again while it is still going
            waited = _doc(await client.call_tool("job_wait", {"job": run, "timeout_s": 20}))
            if waited["data"]["kept"]["phase"] in record.ENDED:
                break
        status = _doc(await client.call_tool("job_status", {"job": run}))
    assert waited["data"]["kept"]["phase"] == record.STOPPED, waited["summary"]
    kept = status["data"]["kept"]
    assert kept["phase"] == record.STOPPED and [x["box"] for x in kept["attempts"]] == [box], status["summary"]
    assert "relaunched" not in [e["kind"] for e in record.read(run)["events"]]
    size = log.stat().st_size
    await anyio.sleep(3)
    assert log.stat().st_size == size  # the run on its box is stopped, not retried
