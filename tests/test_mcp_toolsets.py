"""Toolsets and levels (gpuops.mcp.toolsets), through the SDK's own client: what each toolset lists,
what the default costs an agent, and what read-only and no-destructive let a call do."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from gpuops import errors  # noqa: E402
from gpuops.mcp import server  # noqa: E402
from tests.test_mcp import READ_ONLY, _kill_group, jobs_dir  # noqa: E402,F401 - the same fixture

ROOT = Path(__file__).resolve().parent.parent
TOOLSETS = {
    "check": {"host_preflight"},
    "jobs": {"job_launch", "job_status", "job_wait", "job_events", "job_logs", "job_stop", "job_pause", "job_resume", "job_retry",
             "job_queue"},
    "postmortem": {"job_diagnose", "log_triage", "vram_reap"},
    "data": {"data_push", "data_pull", "data_verify", "teardown_check", "request_wait", "request_cancel"},
    "fleet": {"fleet_status", "fleet_launch", "gang_launch", "gang_retry", "gang_status", "gang_wait", "gang_logs",
              "gang_stop", "gang_diagnose"},
    "reference": {"gotcha_lookup", "profiles_show", "profile_guess"},
}
BUDGET = 20_000  # characters of definitions the default toolsets may cost an agent on every turn
ENDS = {"job_stop", "job_pause", "vram_reap", "gang_stop"}


def definitions(tools) -> int:
    """The JSON of each listed tool as the client receives it: name, title, description, input and
    output schemas, annotations and _meta (benchmarks/mcp_sizes.py measures the same)."""
    return sum(len(json.dumps(t.model_dump(by_alias=True, exclude_none=True, mode="json"), separators=(",", ":")))
               for t in tools)


async def listed(**build):
    async with Client(server.build(**build), raise_exceptions=True) as c:
        return {t.name: t for t in (await c.list_tools()).tools}


def doc_of(result):
    return json.loads(result.content[0].text)


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    monkeypatch.delenv("GPUOPS_MODE", raising=False)
    monkeypatch.delenv("GPUOPS_MCP_TOOLSETS", raising=False)


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(TOOLSETS))
async def test_each_toolset_lists_its_tools_and_no_others(name):
    assert set(await listed(toolsets=name)) == TOOLSETS[name]


@pytest.mark.anyio
async def test_the_default_is_check_jobs_and_postmortem_within_the_budget():
    """27 tools were listed at once, 60,855 characters of definitions on every turn of every agent."""
    tools = await listed()
    assert set(tools) == TOOLSETS["check"] | TOOLSETS["jobs"] | TOOLSETS["postmortem"]
    assert definitions(tools.values()) <= BUDGET, f"the default toolsets cost {definitions(tools.values())} chars"
    everything = await listed(toolsets="all")
    assert set(everything) == set().union(*TOOLSETS.values())
    assert set(await listed(toolsets="default,data")) == set(tools) | TOOLSETS["data"]


@pytest.mark.anyio
async def test_toolsets_come_from_the_environment_and_an_unknown_one_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("GPUOPS_MCP_TOOLSETS", "reference, data")
    assert set(await listed()) == TOOLSETS["reference"] | TOOLSETS["data"]
    assert set(await listed(toolsets="check")) == TOOLSETS["check"]  # the flag wins
    with pytest.raises(errors.UsageError, match="no toolset jobz: pick from check, jobs"):
        server.build(toolsets="jobz")


@pytest.mark.anyio
async def test_a_tool_outside_the_offered_toolsets_is_refused_with_the_reason_not_unknown():
    async with Client(server.build(), raise_exceptions=True) as c:
        result = await c.call_tool("gotcha_lookup", {"query": "inode"})
    doc = doc_of(result)
    assert result.is_error and doc["error"]["kind"] == "refused"
    assert "toolset reference" in doc["summary"] and "GPUOPS_MCP_TOOLSETS" in doc["summary"]


@pytest.mark.anyio
async def test_read_only_lists_only_reads_and_refuses_what_changes_a_box(jobs_dir, real_processes):
    tools = await listed(toolsets="all", level="readonly")
    assert set(tools) == READ_ONLY and all(t.annotations.read_only_hint for t in tools.values())
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as operate, \
            Client(server.build(toolsets="all", level="readonly"), raise_exceptions=True) as reader:
        refused = doc_of(await reader.call_tool("job_launch", {"host": "local", "cmd": "touch nothing"}))
        assert refused["error"]["kind"] == "refused" and "started with --read-only" in refused["summary"]
        assert list(jobs_dir.iterdir()) == []
        job = doc_of(await operate.call_tool("job_launch", {"host": "local", "cmd": "sleep 30"}))["data"]["job"]
        try:
            planned = doc_of(await reader.call_tool("job_stop", {"host": "local", "job": job["job_id"]}))
            assert planned["data"]["dry_run"] is True, planned["summary"]  # a plan only reads
            plan_id = planned["data"]["plan"]["plan_id"]
            applied = doc_of(await reader.call_tool("job_stop", {"host": "local", "job": job["job_id"], "yes": True,
                                                                  "plan_id": plan_id}))
            assert applied["error"]["kind"] == "refused"
            os.kill(job["pid"], 0)
        finally:
            _kill_group(job["pid"])


@pytest.mark.anyio
async def test_no_destructive_runs_and_copies_but_ends_nothing_and_deletes_nothing(jobs_dir, tmp_path, monkeypatch,
                                                                                     real_processes):
    """kubernetes-mcp-server's --disable-destructive: create and run, never delete."""
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(tmp_path))
    tools = await listed(toolsets="all", level="no-destructive")
    assert not ENDS & set(tools) and {"job_launch", "data_push", "job_resume"} <= set(tools)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    dst.mkdir()
    (dst / "only-here.txt").write_text("kept\n")
    async with Client(server.build(toolsets="all", level="no-destructive"), raise_exceptions=True) as c:
        job = doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": "sleep 30"}))["data"]["job"]
        try:
            planned = doc_of(await c.call_tool("job_stop", {"host": "local", "job": job["job_id"]}))
            stop = doc_of(await c.call_tool("job_stop", {"host": "local", "job": job["job_id"], "yes": True,
                                                          "plan_id": planned["data"]["plan"]["plan_id"]}))
            assert stop["error"]["kind"] == "refused" and "no-destructive mode" in stop["summary"], stop["summary"]
            os.kill(job["pid"], 0)
            pause = doc_of(await c.call_tool("job_pause", {"host": "local", "job": job["job_id"], "ckpt_file": "x"}))
            assert pause["error"]["kind"] == "refused"
        finally:
            _kill_group(job["pid"])
        copied = doc_of(await c.call_tool("data_push", {"host": "local", "local": str(src), "remote": str(dst)}))
        assert copied["ok"] is True and (dst / "a.txt").read_text() == "a\n"
        deleting = doc_of(await c.call_tool("data_push", {"host": "local", "local": str(src), "remote": str(dst),
                                                          "delete": True}))
        assert deleting["error"]["kind"] == "refused" and (dst / "only-here.txt").exists()
    monkeypatch.setenv("GPUOPS_MODE", "no-destructive")  # the same level, from the environment, per call
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        result = doc_of(await c.call_tool("vram_reap", {"host": "local", "yes": True, "plan_id": "0123456789abcdef-1"}))
    assert result["error"]["kind"] == "refused" and "GPUOPS_MODE=no-destructive" in result["summary"]


@pytest.mark.anyio
async def test_pause_and_resume_are_tools_and_follow_each_other(jobs_dir, tmp_path, real_processes):
    """MCP had no pause or resume: an agent could only stop a job and lose its GPUs' work."""
    from tests.jobs.test_jobs_pause import TRAIN

    (tmp_path / "train.py").write_text(TRAIN)
    async with Client(server.build(), raise_exceptions=True) as c:
        job = doc_of(await c.call_tool("job_launch", {"host": "local", "cmd": f"python3 {tmp_path / 'train.py'}"}))
        jid = job["data"]["job"]["job_id"]
        deadline = time.monotonic() + 10
        while not ((jobs_dir / jid / "log").exists() and b"from step 0" in (jobs_dir / jid / "log").read_bytes()):
            assert time.monotonic() < deadline
            await anyio.sleep(0.05)
        paused = doc_of(await c.call_tool("job_pause", {"host": "local", "job": jid, "ckpt_regex": "checkpoint saved",
                                                        "timeout_s": 20}))
        assert paused["ok"] and paused["data"]["state"] == "PAUSED", paused["summary"]
        (step,) = [s for s in paused["next"] if s["tool"] == "job_resume"]
        assert step["args"] == {"host": "local", "job": jid}
        resumed = doc_of(await c.call_tool("job_resume", dict(step["args"], resume_arg="--resume")))
        child = resumed["data"]["child"]["job_id"]
        assert resumed["ok"] and resumed["data"]["child"]["parent_job_id"] == jid
        done = doc_of(await c.call_tool("job_wait", {"host": "local", "job": child, "timeout_s": 20}))
        assert done["data"]["state"] == "COMPLETED", done["summary"]


@pytest.mark.anyio
async def test_gpuops_mcp_takes_toolsets_and_a_level_on_its_command_line(tmp_path, real_processes):
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT),
                                   args=["-m", "gpuops.mcp", "--toolsets", "jobs,postmortem", "--no-destructive"],
                                   env=dict(os.environ, PYTHONPATH=str(ROOT), GPUOPS_JOBS_DIR=str(tmp_path)))
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as c:
            names = {t.name for t in (await c.list_tools()).tools}
    assert names == (TOOLSETS["jobs"] | TOOLSETS["postmortem"]) - ENDS


def test_gpuops_mcp_refuses_an_unknown_toolset_in_one_line(real_processes):
    import subprocess

    done = subprocess.run([sys.executable, "-m", "gpuops.mcp", "--toolsets", "check,nope"], capture_output=True,
                          text=True, timeout=30, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 2
    assert done.stderr.strip().startswith("gpuops-mcp: no toolset nope: pick from check, jobs, postmortem")
