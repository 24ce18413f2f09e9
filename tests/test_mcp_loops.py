"""Issue 37's errors that never end, through the SDK's client: an agent follows `next` wherever it
leads, from every state these calls reach, and must arrive somewhere. A typo'd host was
`unreachable`, retryable, its next the same call forever; the end of an ended job's log sent the
agent to the same offset forever; an unknown request id had no way out. Here every step every
answer gives is called as given, a step that leads back onto the path that led to it is a loop,
and an error with no step must say there is none."""

import json

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from gpuops.mcp import chains, server  # noqa: E402
from tests.rig.sshd import keygen  # noqa: E402
from tests.test_mcp import UNREACHABLE, jobs_dir  # noqa: E402,F401 - the same fixture

NO_SUCH_HOST = "no-such-box.invalid"  # .invalid never resolves (RFC 2606)
MOST_CALLS = 60


def _key(step):
    return step["tool"], json.dumps(step["args"], sort_keys=True)


def _moves_on(doc):
    return chains._moves_on(doc, doc.get("data") if isinstance(doc.get("data"), dict) else {})


async def _follow(c, start, answers):
    """Every call reachable from `start` by `next`, depth first; AssertionError on a loop: a step
    back onto the path that led to it (the same call again only when its answer says it may
    answer differently later, and then once)."""
    calls = 0

    async def visit(step, path):
        nonlocal calls
        key = _key(step)
        if key in answers:
            return answers[key]
        calls += 1
        assert calls <= MOST_CALLS, f"more than {MOST_CALLS} calls from {start}: {path}"
        result = await c.call_tool(step["tool"], step["args"])
        doc = json.loads(result.content[0].text)
        answers[key] = doc
        if doc.get("error"):
            assert doc["next"] or any(a.startswith(chains.NONE) for a in doc["advice"]), (key, doc)
            assert not path or doc["error"]["kind"] != "usage", f"a step that is no valid call: {path + [key]} {doc}"
        for made in doc["next"]:
            if "tool" not in made:
                continue  # a command for a person or the box (ssh -G, ssh-keygen -R): the path ends here
            again = _key(made)
            if again == key:
                assert _moves_on(doc), f"the same call again, though nothing will change: {key} {doc['summary']}"
                continue
            assert again not in path, f"a loop: {path + [key, again]}"
            await visit(made, path + [key])
        return doc

    return await visit(start, [])


async def _ended(c, cmd, **more):
    launched = json.loads((await c.call_tool("job_launch", dict({"host": "local", "cmd": cmd}, **more)))
                          .content[0].text)
    job = launched["data"]["job"]["job_id"]
    with anyio.fail_after(60):
        while True:
            waited = json.loads((await c.call_tool("job_wait", {"host": "local", "job": job, "timeout_s": 20}))
                                .content[0].text)
            if not waited["data"]["timed_out"]:
                return job


@pytest.mark.anyio
async def test_following_every_next_from_every_state_ends(jobs_dir, tmp_path, real_processes):
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    answers = {}
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        failed = await _ended(c, f"echo step 1; echo '{oom}'; exit 1")
        done = await _ended(c, "echo step 5; echo done")
        marker = tmp_path / "failed-once"  # a run: attempt 1 killed, attempt 2 completes
        run = await _ended(c, f"echo step 1; if [ -e {marker} ]; then echo done; else touch {marker}; kill -9 $$; fi",
                           max_retries=1)
        starts = [
            {"tool": "job_logs", "args": {"host": "local", "job": failed, "from_offset": 0}},
            {"tool": "job_logs", "args": {"host": "local", "job": done}},
            {"tool": "job_wait", "args": {"host": "local", "job": failed}},
            {"tool": "job_status", "args": {"host": "local", "job": done}},
            {"tool": "job_diagnose", "args": {"host": "local", "job": "no-such-job"}},
            {"tool": "job_status", "args": {"host": NO_SUCH_HOST}},
            {"tool": "job_logs", "args": {"host": NO_SUCH_HOST, "job": failed}},
            {"tool": "job_status", "args": {"host": UNREACHABLE, "job": failed}},
            {"tool": "request_wait", "args": {"request_id": "req-000000000000"}},
            {"tool": "request_cancel", "args": {"request_id": "req-000000000000"}},
            {"tool": "job_launch", "args": {"host": "local", "cmd": "true", "resume_arg": "--from x"}},
            {"tool": "host_preflight", "args": {"host": NO_SUCH_HOST}},
            # a run's lineage (issue 37): its events, its first attempt's log, diagnosis and triage
            {"tool": "job_events", "args": {"host": "local", "job": run}},
            {"tool": "job_events", "args": {"host": "local", "job": failed}},
            {"tool": "job_logs", "args": {"host": "local", "job": run, "attempt": 1, "from_offset": 0}},
            {"tool": "job_diagnose", "args": {"host": "local", "job": run, "attempt": 1}},
            {"tool": "log_triage", "args": {"host": "local", "job": run, "attempt": 1}},
            {"tool": "job_wait", "args": {"host": "local", "job": run, "until": ["event"], "after_event": 0}},
            {"tool": "job_logs", "args": {"host": "local", "job": "no-such-job"}},
        ]
        firsts = [await _follow(c, s, answers) for s in starts]
    unknown = firsts[5]
    assert unknown["error"]["kind"] == "not-found" and unknown["error"]["retryable"] is False, unknown["summary"]
    assert "retry_after_s" not in unknown["error"]
    assert unknown["next"][0]["argv"][:2] == ["ssh", "-G"] and unknown["next"][0]["argv"][-1] == NO_SUCH_HOST
    end = firsts[0]
    assert end["data"]["ended"] is True and end["data"]["more"] is False
    assert end["next"] == [{"tool": "log_triage", "args": {"host": "local", "job": failed},
                            "why": "what its log says: the job ended and its log has no more"}]
    unknown_request = firsts[8]  # a wait on each request this server holds (another test's, in this process), or none
    assert unknown_request["error"]["kind"] == "not-found", unknown_request["summary"]
    assert all(s["tool"] == "request_wait" for s in unknown_request["next"]) and (
        unknown_request["next"] or unknown_request["advice"][0].startswith(chains.NONE))
    assert firsts[10]["error"]["kind"] == "usage" and firsts[10]["advice"][-1].startswith(chains.NONE)
    assert len(answers) >= len(starts) + 3  # the steps were followed, not only the starts answered
    events = firsts[12]
    assert [e["kind"] for e in events["data"]["events"]][-1] == "completed", events["summary"]
    assert firsts[13]["data"]["events"] == [] and "not a run" in firsts[13]["summary"]
    assert firsts[14]["next"][0]["tool"] == "log_triage" and firsts[14]["next"][0]["args"]["attempt"] == 1
    assert firsts[18]["error"]["kind"] == "not-found" and firsts[18]["next"] == [
        {"tool": "job_status", "args": {"host": "local"}, "why": "the jobs this box has records of"}]


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["openssh", "paramiko"])
async def test_a_changed_host_key_and_a_refused_key_each_lead_to_the_command_that_goes_on(rig, tmp_path, monkeypatch,
                                                                                         transport):
    """job_status on a changed host key gave no `ssh-keygen -R` step where job_logs and preflight
    did; auth-failed gave no step at all."""
    monkeypatch.setenv("GPUOPS_TRANSPORT", transport)
    box = rig.box(f"mcp-rekeyed-{transport}")
    rig.alias(f"mcp-stranger-{transport}", port=box.port, IdentityFile=str(keygen(tmp_path / "stranger")))
    async with Client(server.build(), raise_exceptions=True) as c:
        first = json.loads((await c.call_tool("job_status", {"host": box.spec})).content[0].text)
        assert first["ok"], first["summary"]  # the first use records the box's key
        refused = json.loads((await c.call_tool("job_status", {"host": f"mcp-stranger-{transport}"})).content[0].text)
        box.stop()
        box.host_key = keygen(tmp_path / "new_host_key")
        box.start()
        rekeyed = json.loads((await c.call_tool("job_status", {"host": box.spec, "job": "any"})).content[0].text)
    assert rekeyed["error"]["kind"] == "host-key-changed", rekeyed["summary"]
    assert [s["argv"][:2] for s in rekeyed["next"]] == [["ssh-keygen", "-R"]], rekeyed["next"]
    assert refused["error"]["kind"] == "auth-failed", refused["summary"]
    assert refused["next"][0]["argv"][:2] == ["ssh", "-G"] and refused["next"][0]["argv"][-1] == \
        f"mcp-stranger-{transport}", refused["next"]


@pytest.mark.anyio
async def test_a_wait_goes_on_from_where_it_stopped_its_text_and_its_events(jobs_dir, tmp_path, real_processes):
    """A timed-out wait's next dropped from_offset, so each wait resent the newest 4,000 bytes; a
    retried run's next offered only job_logs, not another wait after the last event."""
    marker = tmp_path / "failed-once"
    cmd = f"echo first; if [ -e {marker} ]; then sleep 3; echo second; else touch {marker}; kill -9 $$; fi"
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        run = json.loads((await c.call_tool("job_launch", {"host": "local", "cmd": cmd, "max_retries": 1}))
                         .content[0].text)["data"]["job"]["job_id"]
        with anyio.fail_after(90):
            step = {"tool": "job_wait", "args": {"host": "local", "job": run, "until": ["event"], "after_event": 0,
                                                 "timeout_s": 20}}
            seen = []
            while step is not None and len(seen) < 12:
                doc = json.loads((await c.call_tool(step["tool"], step["args"])).content[0].text)
                seen.append((step["args"], doc["data"]))
                step = next((s for s in doc["next"] if s.get("tool") == "job_wait"), None)
    events = [e for _, data in seen for e in data.get("events") or []]
    kinds = [e["kind"] for e in events]
    assert kinds == ["attempt-started", "attempt-failed", "retrying", "attempt-started", "completed"], kinds
    assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})  # none returned twice
    for (asked, before), (again, _) in zip(seen, seen[1:]):
        assert again["from_offset"] == before["next_offset"] and again["after_event"] == before["events"][-1]["seq"]
        assert again["until"] == ["event"] and again["timeout_s"] == 20  # the caller's own choices kept
    assert seen[-1][1]["state"] == "COMPLETED"


@pytest.mark.anyio
async def test_the_cli_and_mcp_give_the_same_way_on_for_a_host_that_does_not_resolve(real_processes):
    """The CLI said exit 3, unreachable, for a typo'd host; MCP, retryable with the same call."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    cli = subprocess.run([sys.executable, "-m", "gpuops", "status", f"--host={NO_SUCH_HOST}", "--json"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    said = json.loads(cli.stdout)
    async with Client(server.build(), raise_exceptions=True) as c:
        doc = json.loads((await c.call_tool("job_status", {"host": NO_SUCH_HOST})).content[0].text)
    assert cli.returncode == 4 and said["error"]["kind"] == doc["error"]["kind"] == "not-found", cli.stdout
    assert said["error"]["retryable"] is doc["error"]["retryable"] is False
    assert [s["argv"] for s in said["next"]] == [s["argv"] for s in doc["next"]] != []
