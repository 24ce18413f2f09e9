"""One launch request for both faces (gpuops.jobs.launchrequest): a bad launch is refused the same
way by `gpuops launch` and by the job_launch tool, in each one's words (the server rewords the
CLI's flags into the tool's parameters, gpuops.mcp.words). Before, each face had its own checks:
the CLI refused another engine's flag with refuse_foreign, the tool with refuse_unknown, in other
words and with other rules."""

import json

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from gpuops.mcp import server, words  # noqa: E402
from tests.conftest import gpuops_inproc  # noqa: E402

# (what is wrong, the CLI's flags, the tool's arguments): the same mistake on each face
BAD = [
    ("another engine's flag", ["--nodes", "2"], {"resources": {"nodes": 2}}),
    ("an engine's flag no engine has", [], {"resources": {"bogus": 1}}),
    ("an environment name bash cannot set", ["--env", "1X=a"], {"env": {"1X": "a"}}),
    ("a label without a key", ["--label", "=v"], {"labels": {"": "v"}}),
    ("a progress regex that does not compile", ["--progress-regex", "("], {"progress_regex": "("}),
    ("a command and a script", ["--script", __file__], {"script": __file__}),
    ("a policy the box would refuse", ["--keep-best", "*.pt"], {"keep_best": "*.pt"}),
]


def _cli(flags):
    r = gpuops_inproc("launch", "--host", "local", "--cmd", "true", *flags, "--json")
    return r.returncode, json.loads(r.stdout)


@pytest.fixture
async def client(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUOPS_MCP_LOCAL", "1")
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", "/")
    monkeypatch.setenv("GPUOPS_JOBS_DIR", str(tmp_path / "jobs"))
    monkeypatch.delenv("GPUOPS_MODE", raising=False)
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        yield c


@pytest.mark.anyio
@pytest.mark.parametrize("what,flags,args", BAD, ids=[b[0] for b in BAD])
async def test_the_cli_and_the_tool_refuse_a_bad_launch_the_same_way(client, what, flags, args, tmp_path):
    if not flags:  # a flag no engine has is not one the CLI parses: the one refusal, asked directly
        from gpuops import engines
        from gpuops.errors import UsageError

        with pytest.raises(UsageError) as refused:
            engines.refuse_foreign(engines.get(None), {"bogus": 1}, "launch")
        code, cli_error = 2, {"kind": "usage", "message": str(refused.value)}
    else:
        code, doc = _cli(flags)
        cli_error = doc["error"]
    assert code == 2 and cli_error["kind"] == "usage", (what, cli_error)
    result = await client.call_tool("job_launch", {"host": "local", "cmd": "true", **args})
    tool = json.loads(result.content[0].text)
    assert result.is_error and tool["error"]["kind"] == "usage", (what, tool)
    assert tool["error"]["message"] == words.reword("launch", cli_error["message"]), what
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir()), "a refused launch started"


def test_the_tool_words_another_engines_flag_as_its_resources():
    assert words.reword("launch", "--nodes is asked of Slurm: add --engine slurm") == \
        "resources.nodes is asked of Slurm: add engine slurm"
