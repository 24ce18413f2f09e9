"""The CLI and MCP offer the same next step for the same state (issue 37: after COMPLETED, after
triage and for an unknown job they differed). Each case is the same question asked both ways, the
CLI's `--json` envelope and the tool's answer through the SDK's client, on the same job; the
CLI's steps, made tool calls by the table MCP itself uses (gpuops.mcp.nextsteps), must be the
tool's, in the same order."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from gpuops import surface  # noqa: E402
from gpuops.mcp import nextsteps, server  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.test_mcp import jobs_dir  # noqa: E402,F401 - the same fixture

ALL = frozenset(surface.tools())
# what a step is, for both faces: the tool and what it is about (a caller's own patience, its
# timeout_s, is the caller's to keep and not part of the step)
SAID = ("host", "job", "from_offset", "after_event", "attempt", "until")


def cli(*argv) -> dict:
    done = subprocess.run([sys.executable, "-m", "gpuops", *argv, "--json"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    return json.loads(done.stdout)


def steps(nxt, made_by_cli=False) -> list:
    out = []
    for s in nxt:
        s = nextsteps.tool_step(s["argv"], ALL) if made_by_cli else s
        if s is None:
            continue
        out.append((s["tool"], {k: v for k, v in s["args"].items() if k in SAID}) if "tool" in s else tuple(s["argv"]))
    return out


async def _mcp(c, tool, args) -> dict:
    return json.loads((await c.call_tool(tool, args)).content[0].text)


async def _launched(c, cmd, **more) -> str:
    return (await _mcp(c, "job_launch", dict({"host": "local", "cmd": cmd}, **more)))["data"]["job"]["job_id"]


async def _until(c, job, state, within=60):
    with anyio.fail_after(within):
        while (await _mcp(c, "job_status", {"host": "local", "job": job}))["data"]["jobs"][0]["state"] != state:
            await anyio.sleep(0.3)


@pytest.mark.anyio
async def test_the_cli_and_mcp_offer_the_same_next_step_in_every_state(jobs_dir, tmp_path, real_processes):
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    marker = tmp_path / "failed-once"
    seen = []
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        done = await _launched(c, "echo step 5; echo done")
        failed = await _launched(c, f"echo step 1; echo '{oom}'; exit 1")
        running = await _launched(c, "echo step 1; sleep 60")
        retrying = await _launched(c, f"echo step 1; if [ -e {marker} ]; then sleep 60; else touch {marker}; "
                                      "kill -9 $$; fi", max_retries=1)
        await _until(c, done, "COMPLETED")
        await _until(c, failed, "FAILED")
        await _until(c, retrying, "RETRYING")  # the supervisor's backoff is 10 s
        cases = [
            (("status", "--host=local", f"--job={retrying}"), "job_status", {"host": "local", "job": retrying}),
            (("status", "--host=local", f"--job={running}"), "job_status", {"host": "local", "job": running}),
            (("wait", "--host=local", f"--job={running}", "--timeout=1"), "job_wait",
             {"host": "local", "job": running, "timeout_s": 1}),
            (("wait", "--host=local", f"--job={retrying}", "--until=event", "--after-event=0", "--timeout=1"),
             "job_wait", {"host": "local", "job": retrying, "until": ["event"], "after_event": 0, "timeout_s": 1}),
            (("status", "--host=local", f"--job={done}"), "job_status", {"host": "local", "job": done}),
            (("wait", "--host=local", f"--job={done}", "--timeout=5"), "job_wait",
             {"host": "local", "job": done, "timeout_s": 5}),
            (("logs", "--host=local", f"--job={done}", "--from-offset=0"), "job_logs",
             {"host": "local", "job": done, "from_offset": 0}),
            (("status", "--host=local", f"--job={failed}"), "job_status", {"host": "local", "job": failed}),
            (("wait", "--host=local", f"--job={failed}", "--timeout=5"), "job_wait",
             {"host": "local", "job": failed, "timeout_s": 5}),
            (("diagnose", "--host=local", f"--job={failed}"), "job_diagnose", {"host": "local", "job": failed}),
            (("triage", "--host=local", f"--job={failed}"), "log_triage", {"host": "local", "job": failed}),
            (("triage", "--host=local", f"--job={done}"), "log_triage", {"host": "local", "job": done}),
            (("status", "--host=local", "--job=no-such-job"), "job_status", {"host": "local", "job": "no-such-job"}),
            (("logs", "--host=local", "--job=no-such-job"), "job_logs", {"host": "local", "job": "no-such-job"}),
            (("diagnose", "--host=local", "--job=no-such-job"), "job_diagnose",
             {"host": "local", "job": "no-such-job"}),
        ]
        for argv, tool, args in cases:
            said, answered = cli(*argv), await _mcp(c, tool, args)
            seen.append((argv[0], argv[2:], steps(said["next"], made_by_cli=True), steps(answered["next"])))
        await _mcp(c, "job_stop", {"host": "local", "job": running})
    differ = [(verb, rest, by_cli, by_mcp) for verb, rest, by_cli, by_mcp in seen if by_cli != by_mcp]
    assert not differ, "\n".join(f"{v} {r}:\n  cli {a}\n  mcp {b}" for v, r, a, b in differ)
    assert all(by_cli or verb in ("triage",) for verb, _, by_cli, _ in seen), seen  # each state has a way on
    timed_out, on_event = seen[2][2][0], seen[3][2][0]  # the CLI's wait goes on from where it stopped
    assert timed_out[0] == "job_wait" and timed_out[1]["from_offset"] > 0, timed_out
    assert on_event[0] == "job_wait" and on_event[1]["after_event"] >= 3 and "from_offset" in on_event[1], on_event
    assert seen[4][2] == [("log_triage", {"host": "local", "job": done})]  # COMPLETED: triage, at both faces
