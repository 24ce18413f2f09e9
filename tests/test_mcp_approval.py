"""A person's approval of a destructive plan through MCP elicitation (gpuops.mcp.approval), with
the SDK's own client: one that declares the capability is asked before a plan is applied, and a
"no" leaves the job running; one that does not declare it keeps today's rule (yes with the
plan_id)."""

import json

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client, types  # noqa: E402

from gpuops.mcp import server  # noqa: E402
from tests.test_mcp import _kill_group, jobs_dir  # noqa: E402,F401 - the same fixture


def doc_of(result) -> dict:
    return json.loads(result.content[0].text)


def person(says: str, apply: bool, asked: list):
    async def answer(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=says, content={"apply": apply} if says == "accept" else None)
    return answer


async def _planned(c, job) -> str:
    plan = doc_of(await c.call_tool("job_stop", {"host": "local", "job": job, "grace_s": 2}))
    assert plan["data"]["dry_run"] is True, plan["summary"]
    return plan["data"]["plan"]["plan_id"]


async def _state(c, job) -> str:
    return doc_of(await c.call_tool("job_status", {"host": "local", "job": job}))["data"]["jobs"][0]["state"]


@pytest.mark.anyio
@pytest.mark.parametrize("says,apply", [("decline", False), ("cancel", False), ("accept", False)])
async def test_a_person_who_does_not_approve_the_plan_leaves_the_job_running(jobs_dir, real_processes, says, apply):
    asked = []
    async with Client(server.build(), mode="legacy", raise_exceptions=True,
                      elicitation_callback=person(says, apply, asked)) as c:
        launched = doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": "sleep 60"}))
        job = launched["data"]["job"]["job_id"]
        try:
            plan_id = await _planned(c, job)
            assert asked == []  # a plan only reads: nobody is asked
            refused = doc_of(await c.call_tool("job_stop", {"host": "local", "job": job, "grace_s": 2, "yes": True,
                                                            "plan_id": plan_id}))
            state = await _state(c, job)
        finally:
            _kill_group(launched["data"]["job"].get("pid"))
    assert refused["error"]["kind"] == "refused" and "nothing was done" in refused["summary"], refused["summary"]
    assert state == "RUNNING"
    assert len(asked) == 1 and plan_id in asked[0] and job in asked[0] and "job_stop" in asked[0], refused["summary"]


@pytest.mark.anyio
async def test_an_approved_plan_is_applied_and_a_client_that_cannot_ask_keeps_today_s_rule(jobs_dir, real_processes):
    asked = []
    async with Client(server.build(), mode="legacy", raise_exceptions=True,
                      elicitation_callback=person("accept", True, asked)) as c:
        job = doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": "sleep 60"}))["data"]["job"]["job_id"]
        stopped = doc_of(await c.call_tool("job_stop", {"host": "local", "job": job, "grace_s": 2, "yes": True,
                                                        "plan_id": await _planned(c, job)}))
        with anyio.fail_after(30):
            while await _state(c, job) not in ("KILLED", "CANCELLED", "FAILED", "COMPLETED"):
                await anyio.sleep(0.2)
    assert stopped["ok"] and not stopped["data"].get("dry_run") and len(asked) == 1, stopped["summary"]
    assert stopped["data"]["after"]["state"] != "RUNNING", stopped["summary"]
    for client in (Client(server.build(), mode="legacy", raise_exceptions=True),  # no elicitation declared
                   Client(server.build(), raise_exceptions=True, elicitation_callback=person("decline", False, asked))):
        async with client as c:  # the second: the per-request protocol, no channel for a question mid-call
            job = doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": "sleep 60"}))["data"]["job"]["job_id"]
            stopped = doc_of(await c.call_tool("job_stop", {"host": "local", "job": job, "grace_s": 2, "yes": True,
                                                            "plan_id": await _planned(c, job)}))
        assert stopped["ok"] and not stopped["data"].get("dry_run") and stopped["data"]["signals"], stopped["summary"]
    assert len(asked) == 1  # neither of the other two clients was asked: they cannot be
