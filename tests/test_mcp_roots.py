"""Issue 37's roots bypass, as an agent met it: the official MCP client over stdio, a server started
with --no-destructive and GPUOPS_MCP_ROOTS set. With host "local" the box is this machine, yet the
box's end of a copy was not held to the roots: data_pull copied a directory from outside them,
data_push wrote outside them, and job_launch + job_logs read a key file outside them. Now both
ends of a copy are bound when the box is this machine, and a job runs here only when the owner
says so (GPUOPS_MCP_LOCAL=1), its working directory then bound too."""

import json
import os
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
pytestmark = pytest.mark.usefixtures("real_processes")  # the server runs over stdio, its copies as processes

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from tests.conftest import ROOT  # noqa: E402

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n"


@pytest.fixture
def places(tmp_path):
    """A root holding a project, and beside it (outside every root) a directory with a key."""
    root, secret = tmp_path / "root", tmp_path / "secret"
    (root / "project").mkdir(parents=True)
    (root / "project" / "train.py").write_text("print('hi')\n")
    secret.mkdir()
    (secret / "id_ed25519").write_text(KEY)
    return root, secret


def _server(root, jobs, **env):
    return Client(StdioServerParameters(
        command=sys.executable, args=["-m", "gpuops.mcp", "--toolsets", "all", "--no-destructive"], cwd=str(root),
        env={**os.environ, "PYTHONPATH": str(ROOT), "GPUOPS_MCP_ROOTS": str(root), "GPUOPS_JOBS_DIR": str(jobs),
             "GPUOPS_STATE_DIR": str(root / "state"), **env}), mode="legacy")


async def _call(c, tool, args):
    result = await c.call_tool(tool, args)
    doc = json.loads(result.content[0].text)
    if not result.is_error and doc["data"].get("state") == "running":
        result = await c.call_tool("request_wait", {"request_id": doc["data"]["request_id"], "timeout_s": 45})
        doc = json.loads(result.content[0].text)
    return result, doc


def _refused(result, doc, *words):
    assert result.is_error and doc["error"]["kind"] == "refused", doc["summary"]
    assert all(w in doc["summary"] for w in words), doc["summary"]


@pytest.mark.anyio
async def test_a_copy_on_this_machine_keeps_both_ends_in_the_roots(places, tmp_path):
    root, secret = places
    outside = tmp_path / "written-outside"
    with anyio.fail_after(120):
        async with _server(root, tmp_path / "jobs") as c:
            pulled = await _call(c, "data_pull", {"host": "local", "remote": str(secret), "local": str(root / "loot"),
                                                  "wait_s": 30})
            pushed = await _call(c, "data_push", {"host": "local", "local": str(root / "project"),
                                                  "remote": str(outside), "wait_s": 30})
            verified = await _call(c, "data_verify", {"host": "local", "local": str(root / "project"),
                                                      "remote": str(secret), "wait_s": 30})
            inside = await _call(c, "data_push", {"host": "local", "local": str(root / "project"),
                                                  "remote": str(root / "copy"), "wait_s": 30})
    _refused(*pulled, str(secret), "GPUOPS_MCP_ROOTS")
    _refused(*pushed, str(outside), "GPUOPS_MCP_ROOTS")
    _refused(*verified, "GPUOPS_MCP_ROOTS")
    assert not (root / "loot").exists() and not outside.exists()
    result, doc = inside  # within the roots, a copy on this machine is still a copy
    assert not result.is_error and doc["data"]["verified"], doc["summary"]
    assert (root / "copy" / "train.py").read_text() == "print('hi')\n"


@pytest.mark.anyio
async def test_a_job_runs_on_this_machine_only_when_the_owner_allows_it_and_then_in_the_roots(places, tmp_path):
    root, secret = places
    jobs = tmp_path / "jobs"
    steal = {"host": "local", "cmd": "cat id_ed25519", "workdir": str(secret)}
    with anyio.fail_after(120):
        async with _server(root, jobs) as c:
            launched = await _call(c, "job_launch", dict(steal, workdir=None))
            queued = await _call(c, "job_queue", {"host": "local", "name": "q", "commands": ["cat ../secret/*"]})
            resumed = await _call(c, "job_resume", {"host": "local", "job": "any"})
        async with _server(root, jobs, GPUOPS_MCP_LOCAL="1") as c:
            moved = await _call(c, "job_launch", steal)
            kept = await _call(c, "job_launch", dict(steal, checkpoint_dir=str(secret), workdir=str(root / "project"),
                                                     max_retries=1))
    for result, doc in (launched, queued, resumed):
        _refused(result, doc, "GPUOPS_MCP_LOCAL")
    _refused(*moved, str(secret), "GPUOPS_MCP_ROOTS")
    _refused(*kept, str(secret), "GPUOPS_MCP_ROOTS")
    assert not jobs.exists() or not any(jobs.iterdir())  # nothing ran, so no log holds the key
