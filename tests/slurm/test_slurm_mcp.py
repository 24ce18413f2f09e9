"""The MCP tools on a Slurm job: job_launch with engine `slurm` submits it, and the other job tools
answer for it through the same operations, with the engine in their data."""

import json

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

from mcp import Client  # noqa: E402

from gpuops import states  # noqa: E402
from gpuops.mcp import server  # noqa: E402
from tests.slurm.conftest import cancel_recorded, login_env  # noqa: E402
from tests.test_mcp_contract import _undeclared  # noqa: E402


@pytest.fixture(scope="module")
def mcp_login(rig, slurm, tmp_path_factory):
    """A login node whose jobs directory is the test's (job_launch takes none: the box's own)."""
    jobs = tmp_path_factory.mktemp("mcpjobs")
    return rig.box("slurmmcp", env=login_env(slurm, GPUOPS_JOBS_DIR=str(jobs))), jobs


def envelope(result):
    return json.loads(result.content[0].text)


@pytest.mark.anyio
async def test_job_tools_follow_a_slurm_job_with_the_engine_in_their_data(mcp_login, slurm, monkeypatch):
    box, jobs = mcp_login
    monkeypatch.delenv("GPUOPS_MODE", raising=False)
    try:
        async with Client(server.build(), raise_exceptions=True) as c:
            bad = envelope(await c.call_tool("job_launch", {"host": box.spec, "cmd": "true", "engine": "slurm",
                                                            "resources": {"nodez": 2}}))
            assert bad["error"]["kind"] == "usage" and "nodez" in bad["summary"]
            doc = envelope(await c.call_tool("job_launch", {"host": box.spec, "cmd": "echo via mcp; exit 2",
                                                            "engine": "slurm",
                                                            "resources": {"time": "5", "signal": "USR1@30"}}))
            assert doc["ok"] and doc["data"]["job"]["engine"] == "slurm", doc["summary"]
            assert doc["data"]["meta"]["sbatch_options"] == ["--time=5"] and doc["data"]["meta"]["signal"] == "USR1"
            job = doc["data"]["job"]["job_id"]
            waited = envelope(await c.call_tool("job_wait", {"host": box.spec, "job": job, "timeout_s": 30}))
            assert (waited["data"]["state"], waited["data"]["job"]["exit_code"]) == (states.FAILED, 2)
            assert "via mcp" in waited["data"]["new_text"]
            listed = envelope(await c.call_tool("job_status", {"host": box.spec, "job": job}))
            assert listed["data"]["jobs"][0]["slurm_job_id"] == doc["data"]["meta"]["slurm_job_id"]
            why = envelope(await c.call_tool("job_diagnose", {"host": box.spec, "job": job}))
            assert (why["data"]["engine"], why["data"]["verdict"]) == ("slurm", "failed-exit")
            for tool, answer in (("job_launch", doc), ("job_wait", waited), ("job_status", listed),
                                 ("job_diagnose", why)):
                assert _undeclared(tool, answer) == [], tool
    finally:
        cancel_recorded(slurm, jobs)
