"""An answer's prose in MCP's words (gpuops.mcp.words): an agent was told to "add --yes --plan P",
to run "gpuops pull --host b --src /x --dst LOCAL_DIR" and to "name paths to keep with --keep", none
of which a tool call can do."""

import json
import os
import re

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

from mcp import Client  # noqa: E402

from gpuops import surface  # noqa: E402
from gpuops.mcp import server, words  # noqa: E402
from tests.test_mcp import _kill_group, jobs_dir  # noqa: E402,F401 - the same fixture


def cli_words(doc):
    """Every gpuops command line, and every flag of the answer's own verb, in what a model reads."""
    verb = surface.verbs().get(doc["command"])
    flags = {p.flag for p in verb.params} if verb else set()
    texts = [doc["summary"], *doc.get("advice", []), (doc.get("error") or {}).get("message", "")]
    texts += [f.get(k) or "" for f in doc.get("findings", []) for k in ("title", "fix")]
    found = []
    for text in texts:
        found += [m for m in re.findall(r"gpuops ([a-z-]+)", text) if m in surface.verbs()]
        found += [w for w in re.findall(r"(?<![\w-])--[a-z][a-z-]*", text) if w in flags]
    return found


def test_a_cli_sentence_reads_in_tools_and_parameters():
    assert words.reword("stop", "dry run: SIGTERM 2 processes; add --yes --plan 9f3a-1") == \
        "dry run: SIGTERM 2 processes; call again with yes=true and plan_id 9f3a-1"
    pull = words.reword("teardown-check", "pull it first: gpuops pull --host b --src /ckpt --dst LOCAL_DIR")
    assert pull == 'pull it first: data_pull {"host": "b", "remote": "/ckpt", "local": "LOCAL_DIR"}'
    assert words.reword("triage", "push the code first (gpuops push)") == "push the code first (data_push)"
    assert words.reword("retry", "or gpuops retry --host b --job j --time 8:00:00") == \
        'or job_retry {"host": "b", "job": "j", "resources": {"time": "8:00:00"}}'
    assert words.reword("logs", "--follow streams it") == "the CLI's --follow streams it"
    # a flag that is not the verb's own is someone else's: the container's, the training script's
    assert words.reword("preflight", "docker run --gpus all ...") == "docker run --gpus all ..."
    assert words.reword("retry", "e.g. '--resume last.ckpt'") == "e.g. '--resume last.ckpt'"
    assert words.reword("launch", "a GPU another gpuops job is pinned to") == "a GPU another gpuops job is pinned to"
    only_jobs = frozenset(surface.toolset("jobs"))  # a tool the server does not list is not named
    said = words.reword("diagnose", "pull it (gpuops pull) first", only_jobs)
    assert said == "pull it (the CLI's `gpuops pull`) first"
    # a verb named alone, as diagnose's advice after COMPLETED names it (issue 37)
    assert words.reword("diagnose", "teardown-check says what its stop would delete.") == \
        "teardown_check says what its stop would delete."
    assert words.reword("diagnose", "teardown-check says", only_jobs) == "teardown-check says"


@pytest.mark.anyio
async def test_what_an_agent_reads_never_tells_it_to_type_a_flag(jobs_dir, tmp_path, monkeypatch, real_processes):
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(tmp_path))
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    dst.mkdir()
    (dst / "stale.txt").write_text("only here\n")
    answers = []
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        async def call(tool, args):
            result = await c.call_tool(tool, args)
            answers.append(json.loads(result.content[0].text))
            return answers[-1]

        job = (await call("job_launch", {"host": "local", "cmd": "sleep 30"}))["data"]["job"]
        try:
            planned = await call("job_stop", {"host": "local", "job": job["job_id"]})
            assert "call again with yes=true and plan_id" in planned["summary"]
        finally:
            _kill_group(job["pid"])
        done = (await call("job_launch", {"host": "local", "cmd": "true"}))["data"]["job"]["job_id"]
        await call("job_wait", {"host": "local", "job": done, "timeout_s": 20})
        await call("job_diagnose", {"host": "local", "job": done})  # its advice: pull before the box stops
        await call("teardown_check", {"host": "pod", "profile": "runpod", "keep": ["/workspace/run2"]})
        bare = await call("teardown_check", {"host": "pod", "profile": "runpod"})
        assert bare["summary"].endswith("name paths to keep with keep"), bare["summary"]
        deleting = await call("data_push", {"host": "local", "local": str(src), "remote": str(dst), "delete": True})
        assert any(f["id"] == "sync.would-delete" for f in deleting["findings"]), deleting["summary"]
        await call("job_launch", {"host": "local", "cmd": "true", "share_gpu": True})  # a usage error
    said = {a["command"]: cli_words(a) for a in answers}
    assert not any(said.values()), said
    teardown = next(a for a in answers if a["command"] == "teardown-check")
    (lost,) = [f for f in teardown["findings"] if f["id"] == "teardown.lost"]
    assert lost["fix"] == 'data_pull {"host": "pod", "remote": "/workspace/run2", "local": "LOCAL_DIR"}'
    assert "data_pull" in teardown["advice"][0]
    assert os.path.exists(dst / "stale.txt")
