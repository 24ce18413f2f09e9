"""Issue 37's flag smuggling, as an agent met it: the official MCP client over stdio, a server started
with --no-destructive, copies over the real sshd rig. MCP ran a copy as `gpuops push --exclude
--delete --exclude --yes`, so a list item that was a flag deleted a file on the box (and, pulled,
one here) and answered "push verified". Every argument now reaches the CLI as `--flag=VALUE`, which
both of its readers take as the value, and the level is held to the command line the copy runs."""

import json
import os
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from gpuops import errors, surface  # noqa: E402
from gpuops.cli import lite  # noqa: E402
from gpuops.mcp import requests  # noqa: E402
from gpuops.mcp import toolsets as sets  # noqa: E402
from gpuops.surface import model as M  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
# the sync tests' real sshd box with rsync and the CLI's environment against it
from tests.sync.conftest import sync_env  # noqa: E402,F401

ATTACK = ["--delete", "--yes"]


def _sample(arg):
    """A value of `arg`'s kind that would be a flag (or flags) if it were read as a word."""
    if arg.kind == M.SWITCH:
        return True
    if arg.kind in (M.LIST, M.STATES, M.CSV):
        return list(arg.items[:1]) if arg.items else ["--delete", "--yes", "--host=evil"]
    if arg.kind == M.PAIRS:
        return {"K": "--yes"}
    if arg.kind == M.CHOICE:
        return arg.choices[0]
    if arg.kind in (M.INT, M.NUM, M.SECS):
        return arg.low if arg.low is not None else 1
    return "--delete"


@pytest.mark.parametrize("tool", ["data_push", "data_pull", "data_verify"])
def test_every_argument_of_every_copy_reaches_the_cli_as_itself(tool):
    """Each argument a copy's tool takes, as a value that is a flag: the CLI reads back exactly
    that value for exactly that flag, and no switch the call did not set."""
    flags = {a.name: flag for flag, a in surface.flags_of(tool).items()}
    verb_params = {p.flag: p.name for p in surface.verb(surface.tool(tool).verb).params}
    for arg in surface.args(tool):
        if arg.name not in flags:
            continue
        value = _sample(arg)
        argv = requests.cli_argv(tool, {arg.name: value})
        assert all(w.startswith(flags[arg.name] + "=") or w == flags[arg.name] for w in argv[1:]), argv
        _, kwargs = lite.read(argv + ["--json"])
        got = kwargs[verb_params[flags[arg.name]]]
        if arg.kind == M.PAIRS:
            assert got == [f"{k}={v}" for k, v in value.items()], argv
        elif arg.kind == M.CSV:
            assert got == ",".join(value), argv
        elif arg.kind in (M.LIST, M.STATES):
            assert got == value, argv
        elif arg.kind != M.SWITCH:
            assert str(got) == str(value), argv
        assert not any(kwargs[n] for n in ("delete", "yes") if n in kwargs and n != arg.name), argv


def test_the_level_is_held_to_the_command_line_the_copy_runs():
    """Where the copy starts: a command line that deletes is refused on a no-destructive server
    whatever the parameters said, and applying a deletion needs the plan."""
    mark = sets.started.set(sets.NO_DESTRUCTIVE)
    try:
        with pytest.raises(errors.Refused, match="no-destructive"):
            requests.checked("data_push", ["push", "--host=b", "--src=/a", "--dst=/b", "--delete"])
        argv = requests.cli_argv("data_push", {"host": "b", "exclude": ATTACK})
        assert requests.checked("data_push", argv) == {"--host": ["b"], "--exclude": ATTACK}
        read = lite.read(argv)[1]
        assert read["exclude"] == ATTACK and not (read["delete"] or read["yes"])
    finally:
        sets.started.reset(mark)
    with pytest.raises(errors.UsageError, match="plan_id"):
        requests.checked("data_pull", ["pull", "--host=b", "--src=/a", "--dst=/b", "--delete", "--yes"])
    assert requests.checked("data_pull", ["pull", "--host=b", "--src=/a", "--dst=/b", "--delete", "--yes",
                                          "--plan=p1"])["--plan"] == ["p1"]


def _no_destructive(env):
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "gpuops.mcp", "--toolsets", "data",
                                                                      "--no-destructive"], cwd=str(ROOT),
                                        env={**os.environ, **env, "PYTHONPATH": str(ROOT)}), mode="legacy")


async def _answer(c, tool, args):
    result = await c.call_tool(tool, args)
    doc = json.loads(result.content[0].text)
    if doc["data"].get("state") == "running":
        result = await c.call_tool("request_wait", {"request_id": doc["data"]["request_id"], "timeout_s": 45})
        doc = json.loads(result.content[0].text)
    return result, doc


@pytest.mark.anyio
async def test_flags_in_an_exclude_list_delete_nothing_on_the_box_or_here(rsync_box, sync_env, tmp_path):
    here, there, back = tmp_path / "here", tmp_path / "on-box", tmp_path / "back"
    here.mkdir()
    there.mkdir()
    (here / "a.txt").write_text("a\n")
    (there / "only-on-box.txt").write_text("keep me\n")
    back.mkdir()
    (back / "only-here.txt").write_text("keep me too\n")
    env = dict(sync_env, GPUOPS_MCP_ROOTS=f"{here}{os.pathsep}{back}")
    with anyio.fail_after(150):
        async with _no_destructive(env) as c:
            pushed_result, pushed = await _answer(c, "data_push", {
                "host": rsync_box.spec, "local": str(here), "remote": str(there), "exclude": ATTACK, "wait_s": 45})
            pulled_result, pulled = await _answer(c, "data_pull", {
                "host": rsync_box.spec, "remote": str(there), "local": str(back), "exclude": ATTACK, "wait_s": 45})
            refused_result, refused = await _answer(c, "data_push", {
                "host": rsync_box.spec, "local": str(here), "remote": str(there), "delete": True})
    assert (there / "only-on-box.txt").read_text() == "keep me\n"
    assert (back / "only-here.txt").read_text() == "keep me too\n"
    assert (there / "a.txt").read_text() == "a\n" and (back / "only-on-box.txt").exists()
    assert not pushed_result.is_error and pushed["data"]["deleted"] == [], pushed["summary"]
    assert not pulled_result.is_error and pulled["data"]["deleted"] == [], pulled["summary"]
    assert refused_result.is_error and refused["error"]["kind"] == "refused", refused["summary"]
