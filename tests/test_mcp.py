"""The MCP face: driven through the SDK's own clients (in-process, and once over real stdio)."""

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from gpuops.mcp import clientfit, server  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
UNREACHABLE = "nobody@127.0.0.1:1"  # nothing listens on port 1: refused at once
READ_ONLY = {"host_preflight", "fleet_status", "job_status", "job_logs", "job_wait", "job_events", "job_diagnose", "gotcha_lookup",
             "profiles_show", "profile_guess", "teardown_check", "log_triage", "data_verify", "gang_status", "gang_logs",
             "gang_wait", "gang_diagnose", "request_wait"}
CORE_TOOLS = READ_ONLY | {"job_launch", "fleet_launch", "job_retry", "job_queue", "job_stop", "vram_reap", "data_push",
                          "data_pull", "gang_launch", "gang_retry", "gang_stop", "job_pause", "job_resume",
                          "request_cancel"}


@pytest.fixture
async def client(real_processes):
    """A server offering every toolset (the default offers three: tests/test_mcp_toolsets.py)."""
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        yield c


@pytest.fixture
def jobs_dir(tmp_path, monkeypatch):
    """Jobs on this machine (host local), which the server's owner allows here (gpuops.mcp.scope)."""
    path = tmp_path / "jobs"
    path.mkdir()
    monkeypatch.setenv("GPUOPS_JOBS_DIR", str(path))
    monkeypatch.setenv("GPUOPS_MCP_LOCAL", "1")
    monkeypatch.delenv("GPUOPS_MODE", raising=False)
    return path


def envelope_of(result):
    """The structured envelope, after checking the text block carries the very same document."""
    assert len(result.content) == 1
    text = result.content[0].text
    assert text.startswith('{"summary":')
    assert json.loads(text) == result.structured_content
    return result.structured_content


# ---------------------------------------------------------------- tools/list


@pytest.mark.anyio
async def test_tools_list_names_annotations_and_size(client):
    listing = await client.list_tools()
    tools = {t.name: t for t in listing.tools}
    assert set(tools) == CORE_TOOLS
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints.read_only_hint is (name in READ_ONLY), name
        assert tool.output_schema["required"] == ["summary", "ok", "command"], name
        assert "title" not in json.dumps(tool.input_schema["properties"]), name
    for name in ("job_stop", "vram_reap", "data_push", "data_pull", "gang_stop"):
        assert tools[name].annotations.destructive_hint is True
        assert tools[name].annotations.idempotent_hint is True
    for name in ("job_launch", "fleet_launch", "job_retry", "job_queue", "gang_launch", "gang_retry",
                 "job_resume"):  # any command
        assert tools[name].annotations.destructive_hint is True
        assert tools[name].annotations.idempotent_hint is False
    assert tools["job_pause"].annotations.destructive_hint is True  # it stops the job once checkpointed
    assert all(t.input_schema["additionalProperties"] is False for t in tools.values())
    assert tools["job_logs"].meta == server.LOG_RESULT_META
    assert "secret" not in json.dumps(tools["job_launch"].input_schema["required"])
    for name, tool in tools.items():  # what it is for, in one line
        assert "\n" not in tool.description and len(tool.description) <= 100, (name, tool.description)
    # The definitions (name, description, input and output schemas) of every tool: 53,736 chars before
    # toolsets, descriptions of one line and lean output schemas.
    defined = sum(len(json.dumps({"name": t.name, "description": t.description, "inputSchema": t.input_schema,
                                  "outputSchema": t.output_schema}, separators=(",", ":"))) for t in tools.values())
    assert defined < 1_500 * len(tools), f"the tools' definitions are {defined} chars"


# ---------------------------------------------------------------- calls


@pytest.mark.anyio
async def test_preflight_local_is_an_answer_with_findings(client):
    result = await client.call_tool("host_preflight", {"host": "local"})
    doc = envelope_of(result)
    assert result.is_error is False  # this machine has no GPU: ok=false is still an answer
    assert doc["command"] == "preflight" and doc["host"] == "local"
    assert isinstance(doc["ok"], bool)
    assert doc["findings"] and all({"id", "severity"} <= set(f) for f in doc["findings"])


@pytest.mark.anyio
async def test_job_launch_status_stop_round_trip(client, jobs_dir):
    launched = envelope_of(await client.call_tool(
        "job_launch", {"host": "local", "cmd": "sleep 60", "name": "mcp-test", "key": "mcp-k1"}))
    job = launched["data"]["job"]
    try:
        assert launched["ok"] is True and job["state"] in ("STARTING", "RUNNING")
        assert (jobs_dir / job["job_id"]).is_dir()

        again = envelope_of(await client.call_tool("job_launch", {"host": "local", "cmd": "sleep 60", "key": "mcp-k1"}))
        assert again["data"]["existing"] is True and again["data"]["job"]["job_id"] == job["job_id"]

        status = envelope_of(await client.call_tool("job_status", {"host": "local", "job": job["job_id"]}))
        assert status["data"]["jobs"][0]["state"] == "RUNNING"

        plan = await client.call_tool("job_stop", {"host": "local", "job": job["job_id"], "grace_s": 2})
        planned = envelope_of(plan)
        assert plan.is_error is False and planned["ok"] is False and planned["data"]["dry_run"] is True
        assert "exit_code_hint" not in plan.content[0].text and planned["data"]["plan"]["plan_id"]
        os.kill(job["pid"], 0)  # a dry run signals nothing

        # yes alone killed at once: an agent could skip the plan it was meant to read
        skipped = await client.call_tool("job_stop", {"host": "local", "job": job["job_id"], "grace_s": 2, "yes": True})
        doc = json.loads(skipped.content[0].text)
        assert skipped.is_error and doc["error"]["kind"] == "usage" and "plan_id" in doc["summary"], doc["summary"]
        os.kill(job["pid"], 0)  # refused: nothing was signalled
        stopped = envelope_of(await client.call_tool(
            "job_stop", {"host": "local", "job": job["job_id"], "grace_s": 2, "yes": True,
                         "plan_id": planned["data"]["plan"]["plan_id"]}))
        assert stopped["ok"] is True and stopped["data"]["state"] == "KILLED"
        with pytest.raises(ProcessLookupError):
            os.kill(job["pid"], 0)
    finally:
        _kill_group(job.get("pid"))


@pytest.mark.anyio
async def test_job_launch_takes_the_run_policy_and_job_wait_returns_the_runs_events(client, jobs_dir, tmp_path):
    marker = tmp_path / "failed-once"
    cmd = f"if [ -e {marker} ]; then echo fine; else touch {marker}; kill -9 $$; fi"
    launched = envelope_of(await client.call_tool("job_launch", {"host": "local", "cmd": cmd, "max_retries": 1,
                                                                 "max_runtime_s": 120}))
    run = launched["data"]["job"]["job_id"]
    assert launched["data"]["meta"]["policy"]["max_runtime_s"] == 120 and launched["data"]["meta"]["run"]["id"] == run
    waited = envelope_of(await client.call_tool("job_wait", {"host": "local", "job": run, "after_event": 0,
                                                             "timeout_s": 40}))
    assert waited["data"]["state"] == "COMPLETED" and waited["data"]["job"]["run"]["attempt"] == 2
    assert [e["kind"] for e in waited["data"]["events"]] == ["attempt-started", "attempt-failed", "retrying",
                                                             "attempt-started", "completed"]
    bad = await client.call_tool("job_launch", {"host": "local", "cmd": "true", "resume_arg": "--from x"})
    assert bad.is_error and "{checkpoint}" in json.loads(bad.content[0].text)["summary"]


@pytest.mark.anyio
async def test_secret_reaches_the_job_but_no_result(client, jobs_dir, monkeypatch):
    canary = "s3cret-canary-7f2b"
    monkeypatch.setenv("GPUOPS_TEST_TOKEN", canary)
    monkeypatch.setenv("GPUOPS_MCP_SECRETS", "OTHER_TOKEN, GPUOPS_TEST_TOKEN")
    check = 'case "$GPUOPS_TEST_TOKEN" in s3cret-*-7f2b) echo secret-ok;; esac'  # the value itself never in argv
    results = [await client.call_tool("job_launch", {"host": "local", "cmd": check,
                                                     "secret_env": ["GPUOPS_TEST_TOKEN"]})]
    job_id = results[0].structured_content["data"]["job"]["job_id"]
    deadline = time.monotonic() + 10
    while True:
        results.append(await client.call_tool("job_status", {"host": "local", "job": job_id}))
        if results[-1].structured_content["data"]["jobs"][0]["state"] not in ("STARTING", "RUNNING"):
            break
        assert time.monotonic() < deadline, "the job did not finish"
        await anyio.sleep(0.1)
    assert results[-1].structured_content["data"]["jobs"][0]["state"] == "COMPLETED"
    results.append(await client.call_tool("job_logs", {"host": "local", "job": job_id}))
    assert "secret-ok" in results[-1].structured_content["data"]["text"]
    for r in results:
        assert canary not in r.content[0].text


@pytest.mark.anyio
async def test_unreachable_host_is_an_error_result_with_the_whole_envelope(client):
    result = await client.call_tool("job_status", {"host": UNREACHABLE})
    assert result.is_error is True
    doc = json.loads(result.content[0].text)  # clients drop structured content on errors: the text has it all
    assert doc["ok"] is False and doc["error"]["kind"] == "unreachable"
    assert doc["host"] == UNREACHABLE and doc["summary"]


@pytest.mark.anyio
async def test_usage_and_not_found_are_error_results(client):
    several = await client.call_tool("host_preflight", {"host": "local,local"})
    assert several.is_error and json.loads(several.content[0].text)["error"]["kind"] == "usage"
    missing = await client.call_tool("profiles_show", {"name": "no-such-platform"})
    assert missing.is_error and json.loads(missing.content[0].text)["error"]["kind"] == "not-found"


@pytest.mark.anyio
async def test_readonly_mode_refuses_at_call_time(client, jobs_dir, monkeypatch):
    monkeypatch.setenv("GPUOPS_MODE", "readonly")  # set after the server was built: checked per call
    result = await client.call_tool("job_launch", {"host": "local", "cmd": "touch should-not-exist"})
    doc = json.loads(result.content[0].text)
    assert result.is_error and doc["error"]["kind"] == "refused" and "GPUOPS_MODE=readonly" in doc["summary"]
    assert list(jobs_dir.iterdir()) == []
    refused = await client.call_tool("job_stop", {"host": "local", "job": "any", "yes": True})
    assert json.loads(refused.content[0].text)["error"]["kind"] == "refused"
    lookup = await client.call_tool("gotcha_lookup", {"query": "inode"})
    assert lookup.is_error is False and envelope_of(lookup)["ok"] is True


@pytest.mark.anyio
@pytest.mark.parametrize("tool, args", [
    ("job_launch", {"host": "local", "cmd": "touch should-not-exist"}),
    ("job_stop", {"host": "local", "job": "any", "yes": True, "plan_id": "0123456789abcdef-1"}),
    ("gang_stop", {"gang": "gang-20260101-000000-abcdef", "yes": True, "plan_id": "0123456789abcdef-1"}),
])
async def test_readonly_mode_says_a_tool_it_does_not_list_is_refused_not_unknown(monkeypatch, jobs_dir, tool, args):
    """A server started readonly answered a call to such a tool with "Unknown tool"."""
    monkeypatch.setenv("GPUOPS_MODE", "readonly")
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        assert tool not in {t.name for t in (await c.list_tools()).tools}
        result = await c.call_tool(tool, args)
    doc = json.loads(result.content[0].text)
    assert result.is_error and doc["error"]["kind"] == "refused", result.content[0].text
    assert "readonly mode (GPUOPS_MODE=readonly)" in doc["summary"]
    assert list(jobs_dir.iterdir()) == []


@pytest.mark.anyio
@pytest.mark.parametrize("tool, args", [
    ("vram_reap", {"host": "local", "yes": True}),
    ("gang_stop", {"gang": "gang-20260101-000000-abcdef", "yes": True}),
    ("data_push", {"host": "local", "local": "src", "remote": "/tmp/gpuops-never", "delete": True, "yes": True}),
])
async def test_a_destructive_apply_through_mcp_needs_the_plan_id_it_was_shown(client, jobs_dir, tool, args):
    """job_stop {"yes": true} with no plan_id killed at once, so an agent could skip the plan."""
    result = await client.call_tool(tool, args)
    doc = json.loads(result.content[0].text)
    assert result.is_error and doc["error"]["kind"] == "usage", result.content[0].text
    assert "plan_id" in doc["summary"] and "--" not in doc["summary"]


@pytest.mark.anyio
async def test_readonly_mode_lists_no_tool_that_changes_a_box(monkeypatch):
    monkeypatch.setenv("GPUOPS_MODE", "readonly")
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        listed = {t.name: t for t in (await c.list_tools()).tools}
    assert set(listed) == READ_ONLY and all(t.annotations.read_only_hint for t in listed.values())


@pytest.mark.anyio
async def test_an_unknown_or_mistyped_argument_is_a_usage_envelope_and_runs_nothing(client, jobs_dir):
    """`workdirr` was ignored and the job launched in the home directory."""
    typo = await client.call_tool("job_launch", {"host": "local", "cmd": "touch made", "workdirr": str(jobs_dir)})
    doc = json.loads(typo.content[0].text)
    assert typo.is_error and doc["error"]["kind"] == "usage" and "workdirr" in doc["summary"]
    assert list(jobs_dir.iterdir()) == []
    wrong = json.loads((await client.call_tool("job_wait", {"host": "local", "job": "j", "timeout_s": 60,
                                                             "until": ["DONE"]})).content[0].text)
    assert wrong["error"]["kind"] == "usage" and "timeout_s" in wrong["summary"] and "until.0" in wrong["summary"]


@pytest.mark.anyio
async def test_log_triage_reads_a_local_log(client, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(tmp_path))
    log = tmp_path / "train.log"
    log.write_text("step 1\nTraceback (most recent call last):\n"
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    result = await client.call_tool("log_triage", {"path": str(log)})
    doc = envelope_of(result)
    assert result.is_error is False and doc["command"] == "triage" and doc["ok"] is False
    assert "oom" in json.dumps(doc["data"]).lower()
    neither = await client.call_tool("log_triage", {})
    assert neither.is_error and json.loads(neither.content[0].text)["error"]["kind"] == "usage"


@pytest.mark.anyio
async def test_a_secret_the_owner_did_not_allow_is_refused_before_anything_runs(client, jobs_dir, monkeypatch):
    """Any variable of the server's environment could be named and handed to a job the caller wrote."""
    monkeypatch.setenv("GPUOPS_TEST_TOKEN", "s3cret-canary-7f2b")
    monkeypatch.delenv("GPUOPS_MCP_SECRETS", raising=False)
    for allowed in (None, "SOMETHING_ELSE"):
        if allowed:
            monkeypatch.setenv("GPUOPS_MCP_SECRETS", allowed)
        result = await client.call_tool("job_launch", {"host": "local", "cmd": "env > leaked",
                                                       "secret_env": ["GPUOPS_TEST_TOKEN"]})
        doc = json.loads(result.content[0].text)
        assert result.is_error and doc["error"]["kind"] == "refused"
        assert "GPUOPS_MCP_SECRETS" in doc["summary"] and "s3cret" not in result.content[0].text
    assert list(jobs_dir.iterdir()) == []


@pytest.mark.anyio
async def test_local_reads_stay_under_the_owner_roots(client, tmp_path, monkeypatch):
    """log_triage read any local path: an agent could be steered into reading the server's secrets."""
    inside, outside = tmp_path / "logs", tmp_path / "private"
    inside.mkdir()
    outside.mkdir()
    (outside / "key.log").write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    (inside / "link.log").symlink_to(outside / "key.log")
    (inside / "ok.log").write_text("step 1\n")
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(inside))
    for path in (outside / "key.log", inside / "link.log", inside / ".." / "private" / "key.log"):
        result = await client.call_tool("log_triage", {"path": str(path)})
        doc = json.loads(result.content[0].text)
        assert result.is_error and doc["error"]["kind"] == "refused", path
        assert "GPUOPS_MCP_ROOTS" in doc["summary"] and "oom" not in result.content[0].text.lower()
    verify = await client.call_tool("data_verify", {"host": "local", "local": str(outside), "remote": str(outside)})
    assert verify.is_error and json.loads(verify.content[0].text)["error"]["kind"] == "refused"
    fine = await client.call_tool("log_triage", {"path": str(inside / "ok.log")})
    assert fine.is_error is False


# ---------------------------------------------------------------- budgets


def test_bound_cuts_bulk_and_says_what_went():
    doc = {"schema_version": 2, "command": "x", "ok": False, "summary": "the answer", "host": "h",
           "data": {"text": "a" * 100_000 + "THE END", "rows": [{"i": i, "pad": "p" * 300} for i in range(500)],
                    "small": 1},
           "findings": [], "next": []}
    out = clientfit.bound(doc, limit=20_000)
    assert len(clientfit.compact(out)) <= 20_000
    assert list(out)[:2] == ["summary", "ok"]
    assert out["data"]["text"].endswith("THE END") and out["data"]["small"] == 1
    cut = out["truncated"]["cut"]
    assert any(c.startswith("data.text: first") for c in cut)
    assert any(c.startswith("data.rows: kept") and c.endswith("of 500 items") for c in cut)
    assert out["data"]["rows"][0]["i"] == 0  # lists keep their head
    assert len(doc["data"]["rows"]) == 500  # the caller's document is untouched
    assert "truncated" not in clientfit.bound({"summary": "s", "ok": True, "data": {}})


@pytest.mark.anyio
async def test_job_logs_pages_exactly_from_offset_to_next_offset(client, jobs_dir):
    """Paging used to read a 1 MiB page, show its last 24,000 characters and skip the rest."""
    script = ("import sys; w = sys.stdout.buffer.write; "
              "[w(('%d ünï €𝄞\\n' % i if i % 7 else '%d tqdm\\r' % i).encode()) for i in range(20000)]")
    launched = envelope_of(await client.call_tool("job_launch", {"host": "local", "cmd": f'python3 -c "{script}"'}))
    job = launched["data"]["job"]["job_id"]
    done = envelope_of(await client.call_tool("job_wait", {"host": "local", "job": job, "timeout_s": 30}))
    assert done["data"]["state"] == "COMPLETED", done["summary"]
    log = (jobs_dir / job / "log").read_bytes()
    got, offset = bytearray(), 0
    while True:
        page = envelope_of(await client.call_tool("job_logs", {"host": "local", "job": job, "from_offset": offset,
                                                               "max_bytes": 20_000}))
        assert "truncated" not in page and page["data"]["text_starts_at"] == offset
        got += page["data"]["text"].encode("utf-8")
        assert page["data"]["next_offset"] == len(got)
        if not page["data"]["more"]:
            break
        offset = page["data"]["next_offset"]
    assert bytes(got) == log and len(log) > 300_000
    tail = envelope_of(await client.call_tool("job_logs", {"host": "local", "job": job, "tail": 2000,
                                                           "max_bytes": 20_000}))["data"]
    # a tail bigger than the page is its end, from a whole line: the last lines are what a tail is for
    assert tail["next_offset"] == len(log) and tail["more"] is False and len(tail["text"].encode()) <= 20_000
    assert log.endswith(tail["text"].encode()) and log[tail["text_starts_at"] - 1:tail["text_starts_at"]] == b"\n"


@pytest.mark.anyio
async def test_job_stop_applies_only_the_plan_it_showed(client, jobs_dir):
    go = jobs_dir / "go"
    cmd = ("python3 -c \"import os, subprocess, time\na = subprocess.Popen(['sleep', '60'])\n"
           f"while not os.path.exists('{go}'): time.sleep(0.05)\nsubprocess.Popen(['sleep', '61']); a.wait()\"")
    job = envelope_of(await client.call_tool("job_launch", {"host": "local", "cmd": cmd}))["data"]["job"]
    try:
        async def plan(cmd_line):
            while True:
                doc = envelope_of(await client.call_tool("job_stop", {"host": "local", "job": job["job_id"]}))
                # once it has lasted (gpuops.onbox.box_stop.LASTING_S), not a passing child: planned
                if any(t["cmd"] == cmd_line and t["planned"] for t in doc["data"]["targets"]):
                    return doc["data"]["plan"]
                await anyio.sleep(0.05)

        with anyio.fail_after(20):
            shown = await plan("sleep 60")
            go.write_text("")
            grown = await plan("sleep 61")
        refused = await client.call_tool("job_stop", {"host": "local", "job": job["job_id"], "yes": True,
                                                      "plan_id": shown["plan_id"], "grace_s": 0})
        doc = json.loads(refused.content[0].text)
        assert refused.is_error and doc["error"]["kind"] == "refused"
        assert set(shown["pids"]) < set(grown["pids"]) == set(doc["data"]["plan"]["pids"])
        assert len(grown["pids"]) == len(shown["pids"]) + 1
        for pid in grown["pids"]:
            os.kill(pid, 0)  # a refused plan signals nothing
        applied = envelope_of(await client.call_tool("job_stop", {"host": "local", "job": job["job_id"], "yes": True,
                                                                  "plan_id": doc["data"]["plan"]["plan_id"],
                                                                  "grace_s": 0}))
        assert applied["ok"] is True and applied["data"]["state"] == "KILLED"
    finally:
        _kill_group(job.get("pid"))


# ---------------------------------------------------------------- stdio


@pytest.mark.anyio
async def test_stdio_launch_wait_returns_within_a_second_of_the_exit(tmp_path, real_processes):
    jobs = tmp_path / "jobs"
    params = StdioServerParameters(command=sys.executable, args=["-m", "gpuops.mcp", "--toolsets", "all"],
                                   cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT), GPUOPS_JOBS_DIR=str(jobs),
                                                           GPUOPS_MCP_LOCAL="1"))
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as c:
            assert c.server_info.name == "gpuops"
            names = {t.name for t in (await c.list_tools()).tools}
            result = await c.call_tool("gotcha_lookup", {"query": "inode", "limit": 1})
            launched = json.loads((await c.call_tool("job_launch", {"host": "local", "cmd": "sleep 6; echo bye"}))
                                  .content[0].text)
            job = launched["data"]["job"]["job_id"]
            beats = []

            async def progress(done, total, message):
                beats.append((done, total, message))

            first = json.loads((await c.call_tool("job_wait", {"host": "local", "job": job, "timeout_s": 3},
                                                  progress_callback=progress)).content[0].text)
            waited = json.loads((await c.call_tool("job_wait", {"host": "local", "job": job, "timeout_s": 30}))
                                .content[0].text)
            returned = time.time()
    assert CORE_TOOLS <= names
    assert result.is_error is False and json.loads(result.content[0].text)["command"] == "gotcha"
    assert first["data"]["timed_out"] is True and first["data"]["state"] == "RUNNING"
    assert beats and beats[0][1] == 3 and job in beats[0][2]  # the wait told the client it is alive
    assert waited["data"]["state"] == "COMPLETED" and waited["data"]["new_text"] == "bye\n"
    ended_at = json.loads((jobs / job / "exit.json").read_text())["ended_at"]
    assert returned - ended_at < 1.5, f"job_wait returned {returned - ended_at:.2f}s after the job ended"


def test_without_the_sdk_the_command_says_how_to_install_it(tmp_path):
    import subprocess

    shadow = tmp_path / "mcp.py"  # a module named mcp that fails like a missing SDK
    shadow.write_text("raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    done = subprocess.run([sys.executable, "-c", "import gpuops.mcp; gpuops.mcp.main()"], capture_output=True,
                          text=True, env=env, timeout=20, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "gpuops-mcp: the MCP SDK is not installed; pip install 'gpuops[mcp]'"


def _kill_group(pid):
    if not pid:
        return
    try:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.mark.anyio
async def test_data_verify_compares_a_local_tree_with_itself(client, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(tmp_path))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("same bytes\n")
    result = await client.call_tool("data_verify", {"host": "local", "local": str(tree), "remote": str(tree)})
    doc = envelope_of(result)
    assert result.is_error is False and doc["command"] == "verify" and doc["ok"] is True, doc["summary"]
