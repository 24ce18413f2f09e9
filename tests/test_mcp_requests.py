"""Copies as requests (gpuops.mcp.requests), through the SDK's client over a slow real SSH link: a
push or pull longer than a tool call's patience had no id to wait on or cancel; now it answers with
one, request_wait returns the moment it ends, and a cancel stops it mid-way claiming nothing."""

import json
import os

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from gpuops import pullindex  # noqa: E402
from gpuops.mcp import requests, server  # noqa: E402
# the sync tests' real sshd box with rsync, and their wire meter for a slow link
from tests.sync.conftest import metered, snapshot, sync_env  # noqa: E402,F401

BIG = 8 << 20


def test_a_tool_call_is_the_cli_command_its_description_says():
    args = {"host": "b", "local": "/here", "remote": "/there", "exclude": ["*.tmp", "cache/"], "delete": True,
            "yes": True, "plan_id": "9f3a-1", "no_budget": False, "compress": True, "wait_s": 5}
    assert requests.cli_argv("data_push", args) == [
        "push", "--host=b", "--src=/here", "--dst=/there", "--exclude=*.tmp", "--exclude=cache/", "--delete", "--yes",
        "--plan=9f3a-1", "--compress"]
    assert requests.cli_argv("data_pull", {"host": "b", "remote": "/r", "local": "/l"}) == [
        "pull", "--host=b", "--src=/r", "--dst=/l"]


@pytest.fixture
def slow(rsync_box, metered, sync_env, tmp_path, monkeypatch):
    """The server's environment is the CLI's against the rig; an alias through a 1 MiB/s link."""
    for key, value in sync_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(tmp_path))
    alias, _ = metered(rsync_box, 1 << 20)
    return alias


def doc_of(result):
    return json.loads(result.content[0].text)


@pytest.mark.anyio
async def test_a_push_cancelled_mid_way_claims_nothing_and_a_wait_returns_at_its_end(slow, rsync_box, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(BIG))
    async with Client(server.build(toolsets="data"), raise_exceptions=True) as c:
        with anyio.fail_after(120):
            started = doc_of(await c.call_tool("data_push", {"host": slow, "local": str(src), "remote": str(dst),
                                                             "wait_s": 0.5}))
            rid = started["data"]["request_id"]
            assert started["data"]["state"] == "running" and started["ok"] is False, started["summary"]
            assert started["next"] == [{"tool": "request_wait", "args": {"request_id": rid},
                                        "why": "returns when the copy ends, or at the timeout"}]
            still = doc_of(await c.call_tool("request_wait", {"request_id": rid, "timeout_s": 1}))
            assert still["data"]["state"] == "running" and still["data"]["elapsed_s"] >= 1.4
            while not any(p.stat().st_size > (1 << 20) for p in dst.rglob("*big.bin*") if p.is_file()):
                await anyio.sleep(0.05)  # mid-way: more than 1 MiB landed
            cancelled = doc_of(await c.call_tool("request_cancel", {"request_id": rid}))
            assert cancelled["data"]["state"] == "cancelled" and cancelled["data"]["cancel"] == "stopped"
            assert "before claiming anything" in cancelled["summary"], cancelled["summary"]
            checked = doc_of(await c.call_tool("data_verify", {"host": rsync_box.spec, "local": str(src),
                                                               "remote": str(dst)}))
            assert checked["ok"] is False and checked["data"]["verified"] is False, checked["summary"]
            again = doc_of(await c.call_tool("data_push", {"host": rsync_box.spec, "local": str(src),
                                                           "remote": str(dst), "wait_s": 1}))
            if again["data"].get("state") == "running":
                again = doc_of(await c.call_tool("request_wait", {"request_id": again["data"]["request_id"]}))
    assert again["ok"] and again["data"]["verified"] and again["data"]["bytes_reused"] > 0, again["summary"]
    assert snapshot(dst) == snapshot(src)


@pytest.mark.anyio
async def test_a_pull_cancelled_mid_way_records_no_pull(slow, rsync_box, tmp_path):
    remote, here = tmp_path / "on-box", tmp_path / "here"
    remote.mkdir()
    (remote / "ckpt.pt").write_bytes(os.urandom(BIG))
    async with Client(server.build(toolsets="data"), raise_exceptions=True) as c:
        with anyio.fail_after(120):
            started = doc_of(await c.call_tool("data_pull", {"host": slow, "remote": str(remote), "local": str(here),
                                                             "wait_s": 1}))
            assert started["data"]["state"] == "running", started["summary"]
            cancelled = doc_of(await c.call_tool("request_cancel", {"request_id": started["data"]["request_id"]}))
            gone = await c.call_tool("request_wait", {"request_id": "req-000000000000"})
    assert cancelled["data"]["state"] == "cancelled"
    assert pullindex.find(slow, str(remote)) == []  # teardown_check would say it is not pulled
    assert not (here / "ckpt.pt").exists() or (here / "ckpt.pt").stat().st_size < BIG
    assert gone.is_error and doc_of(gone)["error"]["kind"] == "not-found"


def test_a_cancel_that_comes_after_the_copy_finished_says_it_finished_and_verified(rsync_box, sync_env, tmp_path,
                                                                                   monkeypatch):
    """request_cancel said "cancelled, nothing was claimed" from the fact that it was called, while
    the copy had finished and recorded a verified pull 60 ms before: the answer is the copy's end."""
    for key, value in sync_env.items():
        monkeypatch.setenv(key, value)
    remote, here = tmp_path / "on-box", tmp_path / "here"
    remote.mkdir()
    (remote / "small.txt").write_text("done\n")
    made = requests.start("data_pull", {"host": rsync_box.spec, "remote": str(remote), "local": str(here)},
                          "pull for the test")
    made.proc.wait(120)  # it ended; the server has not looked yet when the cancel comes
    made.cancel()
    answer = made.answer()
    assert answer["ok"] and answer["data"]["verified"] and answer["data"]["cancel"] == "too-late", answer["summary"]
    assert "already finished" in answer["summary"]
    assert pullindex.find(rsync_box.spec, str(remote)) != []  # what it claimed stands, and the answer says so


@pytest.mark.anyio
async def test_a_server_that_inherited_sigint_ignored_still_stops_its_copy_with_it(slow, tmp_path):
    """A copy inherits an ignored SIGINT across exec: cancel waited 10 s and killed it."""
    import sys

    from mcp import StdioServerParameters

    from tests.conftest import ROOT

    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(BIG))
    ignoring = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "os.execv(sys.executable, [sys.executable, '-m', 'gpuops.mcp', '--toolsets', 'data'])")
    params = StdioServerParameters(command=sys.executable, args=["-c", ignoring], cwd=str(ROOT),
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as c:
            started = doc_of(await c.call_tool("data_push", {"host": slow, "local": str(src),
                                                             "remote": str(tmp_path / "dst"), "wait_s": 2}))
            assert started["data"]["state"] == "running", started["summary"]
            cancelled = doc_of(await c.call_tool("request_cancel", {"request_id": started["data"]["request_id"]}))
    assert cancelled["data"]["state"] == "cancelled", cancelled["summary"]
    assert cancelled["data"]["cancel"] == "stopped", cancelled["summary"]  # by SIGINT, not killed after 10 s
