"""Where an agent goes next (gpuops.mcp.chains), through the SDK's client: errors with a way out,
no loop between the post-mortem tools, a step worth taking after a job COMPLETED."""

import json

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from gpuops import surface  # noqa: E402
from gpuops.mcp import chains, server  # noqa: E402
from tests.test_mcp import UNREACHABLE, jobs_dir  # noqa: E402,F401 - the same fixture

ALL = frozenset(surface.tools())


def doc_of(result):
    return json.loads(result.content[0].text)


@pytest.mark.anyio
async def test_errors_carry_their_way_out(jobs_dir, real_processes):
    """An ambiguous name said which jobs it fits only in prose; a missing job, nothing at all."""
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        ids = [doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": "true", "name": "twin"}))
               ["data"]["job"]["job_id"] for _ in range(2)]
        twin = doc_of(await c.call_tool("job_status", {"host": "local", "job": "twin"}))
        assert twin["error"]["kind"] == "ambiguous" and twin["error"]["retryable"] is False
        assert sorted(s["args"]["job"] for s in twin["next"]) == sorted(ids)
        assert all(s["tool"] == "job_status" and s["args"]["host"] == "local" for s in twin["next"])
        again = doc_of(await c.call_tool(twin["next"][0]["tool"], twin["next"][0]["args"]))
        assert again["ok"] and again["data"]["jobs"][0]["job_id"] in ids
        missing = doc_of(await c.call_tool("job_diagnose", {"host": "local", "job": "no-such-job"}))
        assert missing["error"]["kind"] == "not-found"
        assert missing["next"] == [{"tool": "job_status", "args": {"host": "local"},
                                    "why": "the jobs this box has records of"}]
        gone = doc_of(await c.call_tool("job_status", {"host": UNREACHABLE}))
    assert gone["error"]["kind"] == "unreachable" and gone["error"]["retryable"] is True
    assert gone["error"]["retry_after_s"] == 15
    assert gone["next"] == [{"tool": "job_status", "args": {"host": UNREACHABLE},
                             "why": "the same call again, in about 15s"}]


@pytest.mark.anyio
async def test_following_next_after_a_failure_never_comes_back(jobs_dir, real_processes):
    """diagnose sent the agent to triage, and triage back to diagnose, for ever."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        job = doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": f"echo step 1; echo '{oom}'; exit 1"}))
        step = {"tool": "job_wait", "args": {"host": "local", "job": job["data"]["job"]["job_id"], "timeout_s": 20}}
        seen = []
        for _ in range(8):
            seen.append((step["tool"], json.dumps(step["args"], sort_keys=True)))
            doc = doc_of(await c.call_tool(step["tool"], step["args"]))
            post = [s for s in doc["next"] if s.get("tool") in ("job_diagnose", "log_triage")]
            if not post:
                break
            step = post[0] if post[0]["tool"] not in [t for t, _ in seen] else (post[1:] or [None])[0]
            if step is None:
                break
    tools = [t for t, _ in seen]
    assert tools[:3] == ["job_wait", "job_diagnose", "log_triage"], tools
    assert len(seen) == len(set(seen)), seen


@pytest.mark.anyio
async def test_after_completed_the_next_step_is_triage_not_an_empty_read(jobs_dir, real_processes):
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        job = doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": "echo step 5; echo done"}))
        jid = job["data"]["job"]["job_id"]
        with anyio.fail_after(30):
            done = doc_of(await c.call_tool("job_wait", {"host": "local", "job": jid, "timeout_s": 20}))
        assert done["data"]["state"] == "COMPLETED"
        assert done["next"][0] == {"tool": "log_triage", "args": {"host": "local", "job": jid},
                                   "why": "how far it got and what it logged"}
        assert not [s for s in done["next"] if s.get("tool") == "job_logs"]
        assert any("data_pull" in a for a in done["advice"])
        triaged = doc_of(await c.call_tool("log_triage", done["next"][0]["args"]))
        assert triaged["data"]["status"] == "completed"
    async with Client(server.build(), raise_exceptions=True) as c:  # no data toolset: no word of data_pull
        status = doc_of(await c.call_tool("job_status", {"host": "local", "job": jid}))
    assert status["next"][0]["tool"] == "log_triage" and not any("data_pull" in a for a in status["advice"])


def test_a_gang_launched_is_waited_on_first_and_a_busy_copy_is_asked_again():
    launched = {"summary": "gang started", "ok": True, "data": {"gang_id": "gang-20260101-000000-abcdef"},
                "next": [{"tool": "gang_status", "args": {"gang": "gang-20260101-000000-abcdef"}}]}
    made = chains.chained("gang_launch", {"hosts": ["a", "b"], "cmd": "t.py"}, launched, ALL)
    assert made["next"][0] == {"tool": "gang_wait", "args": {"gang": "gang-20260101-000000-abcdef"},
                               "why": "returns when the gang ends, or at the timeout"}
    busy = {"summary": "busy", "ok": False, "next": [],
            "error": {"kind": "busy", "message": "/d is being written by another transfer", "retryable": True,
                      "retry_after_s": 30.0}}
    args = {"host": "b", "local": "/src", "remote": "/d"}
    assert chains.chained("data_push", args, busy, ALL)["next"] == [
        {"tool": "data_push", "args": args, "why": "the same call again, in about 30s"}]
