"""Issue 11's done-when, as an agent meets it: the official MCP client over stdio, the server a
subprocess, jobs on a real sshd box (tests/rig) or on this machine's fixture GPU (tests.test_reap).
Each loop follows the `next` a result gives, argument for argument: it must be runnable."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
pytestmark = pytest.mark.usefixtures("real_processes")  # every test here starts the server over stdio

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from tests.test_mcp import READ_ONLY  # noqa: E402
# test_reap's fixture GPU box on this machine (fake device nodes and nvidia-smi), as test_plans uses it
from tests.test_reap import box as gpu_box  # noqa: E402,F401

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mcp_box(rig, tmp_path_factory):
    """A box over the real sshd, its job records in a directory this test reads."""
    jobs = tmp_path_factory.mktemp("mcp-jobs")
    return rig.box("mcpbox", env={"GPUOPS_JOBS_DIR": str(jobs)}), jobs


def stdio(**env):
    """The server as a client starts it: `python -m gpuops.mcp`, this checkout's code first."""
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "gpuops.mcp"], cwd=str(ROOT),
                                        env=dict(os.environ, PYTHONPATH=str(ROOT), **env)), mode="legacy")


async def call(c, name, args):
    result = await c.call_tool(name, args)
    return result, json.loads(result.content[0].text)


def step_for(doc, tool):
    """The one next step that calls `tool`: an agent runs it as given."""
    (made,) = [s for s in doc["next"] if s.get("tool") == tool]
    return made["tool"], made["args"]


@pytest.mark.anyio
async def test_launch_wait_triage_loop_follows_next_and_wait_returns_within_a_second_of_the_exit(mcp_box):
    box, jobs = mcp_box
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    with anyio.fail_after(120):
        async with stdio() as c:
            _, launched = await call(c, "job_launch", {"host": box.spec, "cmd": f"echo start; sleep 5; echo '{oom}'; "
                                                                                "exit 1"})
            job = launched["data"]["job"]["job_id"]
            assert launched["next"][0] == {"tool": "job_wait", "args": {"host": box.spec, "job": job},
                                           "why": "returns when it ends, or at the timeout"}
            _, waited = await call(c, *step_for(launched, "job_wait"))
            returned = time.time()
            diagnosed_result, diagnosed = await call(c, *step_for(waited, "job_diagnose"))
            _, triaged = await call(c, *step_for(waited, "log_triage"))
    ended_at = json.loads((jobs / job / "exit.json").read_text())["ended_at"]
    assert returned - ended_at < 1.0, f"job_wait returned {returned - ended_at:.2f}s after the job ended"
    assert waited["data"]["state"] == "FAILED" and waited["data"]["timed_out"] is False, waited["summary"]
    assert waited["data"]["new_text"].endswith(oom + "\n")
    assert diagnosed_result.is_error is False and diagnosed["data"]["verdict"] == "failed-exit", diagnosed["summary"]
    assert triaged["data"]["primary"] == "oom-gpu", triaged["summary"]
    advice = " ".join(triaged["advice"])
    assert "expandable_segments" in advice and "remat_policy" not in advice  # torch's advice, not MaxText's
    for doc in (launched, waited, diagnosed, triaged):  # nothing in CLI syntax reaches an MCP caller
        assert all("tool" in s or s["argv"][0] != "gpuops" for s in doc["next"]), doc["next"]


@pytest.mark.anyio
async def test_a_reap_plan_of_2_holders_is_refused_once_there_are_3_and_the_new_plan_applies(request):
    """vram_reap planned 2 holders; a third appeared; `yes` reaped 3."""
    b = request.getfixturevalue("gpu_box")  # its environment (GPUOPS_ROOT, fake nvidia-smi) is the server's
    two = [b.spawn("orphan", *b.dev("nvidia0"))[0]["holder"] for _ in range(2)]
    ask = {"host": "local", "gpu": 0, "min_age_s": 0, "idle_window_s": 0, "term_wait_s": 2}
    with anyio.fail_after(90):
        async with stdio() as c:
            result, dry = await call(c, "vram_reap", ask)
            shown = dry["data"]["plan"]
            assert result.is_error is False and dry["ok"] is False and sorted(shown["pids"]) == sorted(two)
            third = b.spawn("orphan", *b.dev("nvidia0"))[0]["holder"]
            assert dry["next"][0]["args"] == dict(ask, yes=True, plan_id=shown["plan_id"])
            result, refused = await call(c, *step_for(dry, "vram_reap"))
            assert result.is_error and refused["error"]["kind"] == "refused", refused["summary"]
            assert "nothing was signalled" in refused["summary"]
            assert sorted(refused["data"]["plan"]["pids"]) == sorted(two + [third])
            assert all(b.alive(p) for p in two + [third])
            result, done = await call(c, *step_for(refused, "vram_reap"))
    assert result.is_error is False and done["ok"] is True, done["summary"]
    assert not any(b.alive(p) for p in two + [third])


@pytest.mark.anyio
async def test_an_unknown_argument_is_refused_and_nothing_runs(mcp_box):
    box, jobs = mcp_box
    before = set(jobs.iterdir())
    with anyio.fail_after(60):
        async with stdio() as c:
            result, doc = await call(c, "job_launch", {"host": box.spec, "cmd": "touch made", "workdirr": str(jobs)})
    assert result.is_error and doc["error"]["kind"] == "usage" and "workdirr" in doc["summary"]
    assert set(jobs.iterdir()) == before


@pytest.mark.anyio
async def test_readonly_lists_no_tool_that_changes_anything():
    with anyio.fail_after(60):
        async with stdio(GPUOPS_MODE="readonly", GPUOPS_MCP_TOOLSETS="all") as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            unlisted = await c.call_tool("job_launch", {"host": "local", "cmd": "touch should-not-exist"})
    assert set(listed) == READ_ONLY and all(t.annotations.read_only_hint for t in listed.values())
    assert unlisted.is_error and not (ROOT / "should-not-exist").exists()


@pytest.mark.anyio
async def test_paging_a_log_reproduces_it_byte_for_byte(mcp_box):
    box, jobs = mcp_box
    script = ("import sys; w = sys.stdout.buffer.write; "
              "[w(('%d ünï €𝄞\\n' % i if i % 7 else '%d tqdm\\r' % i).encode()) for i in range(60000)]")
    with anyio.fail_after(240):
        async with stdio() as c:
            _, launched = await call(c, "job_launch", {"host": box.spec, "cmd": f'python3 -c "{script}"'})
            _, waited = await call(c, *step_for(launched, "job_wait"))
            assert waited["data"]["state"] == "COMPLETED", waited["summary"]
            job, got, offset = launched["data"]["job"]["job_id"], bytearray(), 0
            while True:
                result, page = await call(c, "job_logs", {"host": box.spec, "job": job, "from_offset": offset,
                                                          "max_bytes": 24_000})
                assert result.is_error is False and "truncated" not in page
                assert page["data"]["text_starts_at"] == offset
                got += page["data"]["text"].encode("utf-8")
                if not page["data"]["more"]:
                    break
                offset = page["data"]["next_offset"]
    log = (jobs / job / "log").read_bytes()
    assert len(log) > 1_000_000 and bytes(got) == log
