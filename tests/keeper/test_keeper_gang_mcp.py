"""An agent keeps a gang across boxes (issue 36, MCP) through the official client: gang_launch takes the
keeper's fields as fleet_launch does and through the CLI's own checks (gpuops.keeper.request), a local
vault outside the server's roots is refused before anything starts; then torchrun over two real sshd
boxes (real torch, gloo on the CPU) loses a node's box outright mid-run and finishes on a replacement
from the fleet, and job_status answers from the keeper's record. Every node's log is copied into the
vault, so the lost node's log up to its loss is there, byte for byte what the box had written, and
`gpuops logs RUN --node BOX` reads it though the box no longer answers."""

import json

import anyio
import pytest

from gpuops.keeper import record
from tests.keeper.test_keeper_gang import DDP, LOST_AFTER_S, STEPS, a_checkpoint_past_step_10, held, resumed_step
from tests.keeper.test_keeper_mcp import served
from tests.rig.sshd import free_port

pytest.importorskip("torch", reason="torch is the test extra's (CPU wheel)")
pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")


def _doc(result):
    return json.loads(result.content[0].text)


def _node_log(fleet, run, attempt, box):
    """The vault's copy of `box`'s node log in `attempt` (its one job directory there)."""
    logs = list((fleet.vault / run / "boxes" / f"{attempt}-{box}").glob("*/log"))
    return logs[0].read_bytes() if len(logs) == 1 else b""


@pytest.mark.anyio
async def test_an_agents_kept_gang_loses_a_node_box_and_finishes_with_that_nodes_log_in_the_vault(
        cli, fleet, monkeypatch, tmp_path_factory):
    from mcp import Client

    from gpuops.mcp import server

    a, b, c = fleet.box(1.0), fleet.box(2.0), fleet.box(4.0)
    served(fleet, monkeypatch, [a, b, c], fleet.base)
    asked = {"cmd": f"{DDP} --ckpt ckpt --steps {STEPS} --every 5 --step-seconds 0.25 --every-rank", "hosts": [a, b],
             "fleet": "kept", "rdzv_port": free_port(), "checkpoint_dir": "ckpt", "resume_arg": "--resume {checkpoint}",
             "lost_after_s": LOST_AFTER_S, "env": {"OMP_NUM_THREADS": "1"}, "vault": str(fleet.vault)}
    async with Client(server.build(toolsets="all")) as client:
        outside = await client.call_tool("gang_launch", dict(asked, vault=str(tmp_path_factory.mktemp("elsewhere"))))
        assert outside.is_error and "GPUOPS_MCP_ROOTS" in _doc(outside)["summary"], _doc(outside)
        # the CLI's own check of --nnodes, in the tool's words
        wide = await client.call_tool("gang_launch", dict(asked, nnodes="3:4"))
        assert wide.is_error and _doc(wide)["summary"].startswith("nnodes takes MIN:MAX with MIN <= 2"), _doc(wide)
        dropped = await client.call_tool("gang_launch", dict(asked, code="src"))
        assert "code does not apply here: a run kept with vault is relaunched without it" in _doc(dropped)["summary"]
        assert not any(fleet.jobs(x).exists() and any(fleet.jobs(x).iterdir()) for x in (a, b))  # nothing started

        launched = await client.call_tool("gang_launch", asked)
        doc = _doc(launched)
        assert not launched.is_error and doc["ok"], doc
        run = doc["data"]["job"]["job_id"]
        assert doc["data"]["keeper"]["vault"] == str(fleet.vault / run)
        with anyio.fail_after(180):  # a checkpoint in the vault and node 1's log beside it, then its box dies
            while not (a_checkpoint_past_step_10(fleet, run) and b"rank 1 step" in _node_log(fleet, run, 1, b)):
                await anyio.sleep(0.5)
        fleet.kill(b)
        with anyio.fail_after(LOST_AFTER_S + 180):
            while record.read(run)["phase"] not in record.ENDED:
                await anyio.sleep(0.5)
        status = await client.call_tool("job_status", {"host": a, "job": run})
    kept = _doc(status)["data"]["kept"]
    assert kept["phase"] == record.FINISHED, (kept["why"], kept["events"])
    assert [x["boxes"] for x in kept["attempts"]] == [[a, b], [a, c]]
    assert list(kept["lost"]) == [b] and kept["lost"][b].startswith("unreachable for")
    assert f"checkpoint-{STEPS}" in kept["vault"]["held"] == held(fleet, run)
    _, step = resumed_step(record.read(run))
    assert step >= 10
    money = kept["ledger"]
    assert sum(t["seconds"] for t in money["totals"].values()) == pytest.approx(money["wall_s"])
    rates = {f"{a},{b}": 3.0, f"{a},{c}": 5.0}  # each attempt at the sum of its nodes' prices
    assert money["usd"] == pytest.approx(sum(x["seconds"] * rates[x["box"]] / 3600 for x in money["rows"]))

    # the lost node's log, as copied before the loss: a verified copy of what its box had written
    copy = _node_log(fleet, run, 1, b)
    (written,) = [p.read_bytes() for p in fleet.jobs(b).glob("*/log")]
    assert copy and written.startswith(copy), (copy[-300:], written[-300:])
    last = max(int(line.split()[-1]) for line in copy.decode().splitlines() if line.startswith("rank 1 step"))
    assert last >= 10
    # and the replacement's node log of the second attempt, in a place of its own
    assert b"rank 1 step" in _node_log(fleet, run, 2, c)
    shown = cli("logs", run, "--node", b, "--tail", "3", env=fleet.env())
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == copy.decode().splitlines()[-1], shown
    assert f"on {b} " in shown.stderr and "its box was lost (unreachable for" in shown.stderr, shown.stderr
    page = json.loads(cli("logs", run, "--node", b, "--json", env=fleet.env()).stdout)
    assert page["data"]["lost"].startswith("unreachable for") and page["data"]["text"].endswith(f"step {last}\n")
    gone = cli("logs", run, "--node", "nobox", env=fleet.env())
    assert gone.returncode == 2 and f"no node of run {run} ran on it" in gone.stderr, gone.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("args, says", [
    ({"hosts": ["a", "b"], "lost_after_s": 30}, "lost_after_s, stop_when_done, stop_idle_s, budget, the CLI's "
                                                "--output and keeper_host go with vault DIR"),
    ({"fleet": "kept", "vault": "v"}, "give fleet and cmd (and with gang_launch, the gang's first boxes in host"),
    ({"hosts": ["a", "b"], "fleet": "kept", "vault": "v"}, "give checkpoint_dir DIR[:GLOB] and resume_arg"),
    ({"hosts": ["a", "a"], "fleet": "kept", "vault": "v", "checkpoint_dir": "c", "resume_arg": "--r {checkpoint}"},
     "host names a more than once: a box runs one node of a gang"),
    ({"hosts": ["a", "b"], "fleet": "kept", "vault": "v", "rdzv_host": "x"},
     "rdzv_host does not apply here: a run kept with vault is relaunched without it"),
])
async def test_a_kept_gang_asked_wrongly_is_refused_in_the_clis_checks_and_the_tools_words(args, says, monkeypatch,
                                                                                            real_processes):
    """The same refusals as `launch --torchrun --vault` (tests/test_keeper_vault.py), before any box is asked."""
    from mcp import Client

    from gpuops.mcp import server

    monkeypatch.delenv("GPUOPS_MODE", raising=False)
    async with Client(server.build(toolsets="all")) as client:
        refused = await client.call_tool("gang_launch", dict(args, cmd="t.py"))
    doc = _doc(refused)
    assert refused.is_error and doc["error"]["kind"] == "usage" and says in doc["summary"], doc["summary"]


def test_a_node_is_named_by_its_index_in_the_current_attempt_or_by_its_box_and_its_newest_copied_log_is_read(
        tmp_path):
    import os

    from gpuops import errors
    from gpuops.keeper import nodelog

    rec = {"run_id": "g1", "spec": {"vault": str(tmp_path)}, "lost": {"b": "unreachable for 9s"}, "attempts": [
        {"box": "a", "job": "j1", "nodes": [{"box": "a", "job": "j1"}, {"box": "b", "job": "j2"}]},
        {"box": "a", "job": "j3", "nodes": [{"box": "a", "job": "j3"}, {"box": "c", "job": "j4"}]}]}
    assert nodelog.locate(rec, "1") == {"attempt": 2, "index": 1, "box": "c", "job": "j4", "lost": None}
    assert nodelog.locate(rec, "a")["attempt"] == 2  # the last attempt the box was a node of
    lost = nodelog.locate(rec, "b")
    assert lost == {"attempt": 1, "index": 1, "box": "b", "job": "j2", "lost": "unreachable for 9s"}
    with pytest.raises(errors.UsageError, match="attempt 2 of run g1 has nodes 0 to 1"):
        nodelog.locate(rec, "2")
    with pytest.raises(errors.NotFound, match="the vault holds no copy of its log"):
        nodelog.page(rec, lost, 5)
    node = tmp_path / "g1" / "boxes" / "1-b"
    for job, text, at in (("j2", "first attempt on the box\n", 100), ("j5", "one\ntwo\nthree\n", 200)):
        (node / job).mkdir(parents=True)
        (node / job / "log").write_text(text)
        os.utime(node / job / "log", (at, at))
    (tmp_path / "elsewhere").write_text("not the node's\n")  # the newest, but out of the vault by a link
    (node / "j9").mkdir()
    (node / "j9" / "log").symlink_to(tmp_path / "elsewhere")
    page = nodelog.page(rec, lost, 2)
    assert page["data"]["text"] == "two\nthree\n" and page["data"]["vault_copy"] == str(node / "j5" / "log")
    assert "its box was lost (unreachable for 9s)" in page["summary"]
