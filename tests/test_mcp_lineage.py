"""Issue 37's lineage through the SDK's client: a run's earlier attempts, its events and the
policy it was given, read through the tools as an agent reads them. Attempt 1's log and
diagnosis could not be named (its id is the run's); the only way to a run's events was a wait;
job_launch echoed stall_after_s 1800 from the status heuristic while the policy said 20; a
relaunch with the same idempotency key must report the run as it stands."""

import json

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from gpuops.mcp import server  # noqa: E402
from tests.test_mcp import jobs_dir  # noqa: E402,F401 - the same fixture

ANSWER_MOST = 2_000  # characters of a launch's or a status's answer unless more is asked for
RUN_EVENTS = ["attempt-started", "attempt-failed", "retrying", "attempt-started", "completed"]


def doc_of(result) -> dict:
    return json.loads(result.content[0].text)


def _failing_once(marker) -> str:
    """Attempt 1 is killed (a transient failure); attempt 2 runs a few seconds and completes."""
    return (f'echo "attempt $GPUOPS_ATTEMPT"; if [ -e {marker} ]; then sleep 3; echo second; '
            f'else touch {marker}; kill -9 $$; fi')


@pytest.mark.anyio
async def test_a_run_s_attempts_events_policy_and_key_read_through_the_tools(jobs_dir, tmp_path, real_processes):
    cmd = _failing_once(tmp_path / "failed-once")
    async with Client(server.build(), raise_exceptions=True) as c:
        launched = await c.call_tool("job_launch", {"host": "local", "cmd": cmd, "max_retries": 1,
                                                    "stall_after_s": 20, "key": "lineage-1"})
        first = doc_of(launched)
        run = first["data"]["job"]["job_id"]
        with anyio.fail_after(90):
            while True:
                waited = doc_of(await c.call_tool("job_wait", {"host": "local", "job": run, "timeout_s": 20}))
                if not waited["data"]["timed_out"]:
                    break
        events = doc_of(await c.call_tool("job_events", {"host": "local", "job": run}))
        none_after = doc_of(await c.call_tool("job_events", {"host": "local", "job": run,
                                                             "after_event": events["data"]["last_event"]}))
        later = doc_of(await c.call_tool("job_events", {"host": "local", "job": run, "after_event": 2}))
        log_1 = doc_of(await c.call_tool("job_logs", {"host": "local", "job": run, "attempt": 1}))
        log_now = doc_of(await c.call_tool("job_logs", {"host": "local", "job": run}))
        diagnosed_1 = doc_of(await c.call_tool("job_diagnose", {"host": "local", "job": run, "attempt": 1}))
        triaged_1 = doc_of(await c.call_tool("log_triage", {"host": "local", "job": run, "attempt": 1}))
        again = doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": cmd, "key": "lineage-1"}))
        status = await c.call_tool("job_status", {"host": "local", "job": run})
    assert len(launched.content[0].text) < ANSWER_MOST and len(status.content[0].text) < ANSWER_MOST
    assert first["data"]["meta"]["policy"]["stall_after_s"] == 20
    assert all(v == 20 for v in _every(first, "stall_after_s")), first["data"]  # never the heuristic's 1800
    assert waited["data"]["state"] == "COMPLETED", waited["summary"]
    kinds = [e["kind"] for e in events["data"]["events"]]
    assert kinds == RUN_EVENTS and events["data"]["more"] is False, events["summary"]
    assert events["data"]["last_event"] == events["data"]["events"][-1]["seq"]
    assert none_after["data"]["events"] == [] and none_after["ok"], none_after["summary"]
    assert [e["seq"] for e in later["data"]["events"]] == [e["seq"] for e in events["data"]["events"] if e["seq"] > 2]
    assert "attempt 1" in log_1["data"]["text"] and "attempt 2" not in log_1["data"]["text"], log_1["data"]["text"]
    assert "attempt 2" in log_now["data"]["text"] and "second" in log_now["data"]["text"]
    assert diagnosed_1["data"]["job"] == run and diagnosed_1["data"]["state"] == "KILLED", diagnosed_1["summary"]
    assert triaged_1["data"]["run"]["attempt"] == 1, triaged_1["summary"]
    assert again["data"]["existing"] is True and again["data"]["job"]["state"] == "COMPLETED", again["summary"]
    assert f"run {run} (COMPLETED)" in again["summary"]


def _every(doc, key):
    """Each value of `key` anywhere in `doc`."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == key:
                yield v
            yield from _every(v, key)
    elif isinstance(doc, list):
        for v in doc:
            yield from _every(v, key)


@pytest.mark.anyio
async def test_a_status_listing_answers_in_under_2000_characters_unless_asked_for_more(jobs_dir, real_processes):
    async with Client(server.build(), raise_exceptions=True) as c:
        for i in range(8):
            await c.call_tool("job_launch", {"host": "local", "cmd": f"echo job {i}", "name": f"listed-{i}",
                                             "labels": {"team": "parity"}})
        listed = await c.call_tool("job_status", {"host": "local"})
        more = doc_of(await c.call_tool("job_status", {"host": "local", "limit": 8}))
    doc = doc_of(listed)
    assert len(listed.content[0].text) < ANSWER_MOST, len(listed.content[0].text)
    names = [r["name"] for r in doc["data"]["jobs"]]  # newest first, by id: two in one second in either order
    assert len(names) == 5 and set(names) <= {f"listed-{i}" for i in range(8)}, names
    assert doc["data"]["more"] == 3 and len(more["data"]["jobs"]) == 8  # what was left out is said, and asked for
