"""A verb is its description, its operation and its renderer (issue 35): a verb declared here and
nowhere else, `echo`, is a working CLI verb (it runs, answers --json with the envelope, refuses a
bad value, has its help and its row in the overview) and a working MCP tool through the SDK's own
client, with no file of gpuops touched. What adding it to gpuops/surface would also do, running
`python -m gpuops.refdocs --write`, is done by `register` (its rows in gpuops/verbindex.py, which
the generator is shown to write)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuops import surface, verbindex
from gpuops.envelope import envelope
from gpuops.errors import UsageError
from gpuops.surface.common import JSON
from gpuops.surface.model import INT, READS, SWITCH, TEXT, Param, Tool, Verb, a

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- the whole of the new verb

ECHO = Verb("echo", "Reference", READS, line="say the words back", examples=("gpuops echo hello there",),
            word="text", words=True, op=f"{__name__}:echo", render=f"{__name__}:render",
            doc="Say the words back, as often as asked.", params=(
    Param("text", TEXT, "the words to say back", tip="the words to say back"),
    Param("times", INT, "how often to say them (default 1)", tip="how often to say them", default=1, low=1, high=3),
    Param("loud", SWITCH, "in capitals", cli_only="how the answer is drawn for people", shows="loud"),
    JSON,
), tools=(
    Tool("echo_back", "echo", "reference", READS, "Say it back", "Say the words back.", local=True,
         args=(a("text", required=True), a("times")), data="said:a times:i", typed=("said",)),
))
VERBS = (ECHO,)


def echo(text, times) -> dict:
    if not text:
        raise UsageError("echo needs --text: the words to say back")
    return envelope("echo", ok=True, summary=f"said {text!r} {times} time(s)", data={"said": [text] * times,
                                                                                     "times": times})


def render(doc, con, loud=False) -> None:
    for line in doc["data"]["said"]:
        con.print(line.upper() if loud else line, markup=False)


# ---------------------------------------------------------------- what the generator adds

MODULE = "hypothetical"  # as if ECHO were in gpuops/surface/hypothetical.py
ROWS = {"VERBS": ("Reference", MODULE, "made"), "WORD_ARGS": ("--text", True)}


def register(setitem=None) -> None:
    """ECHO as gpuops sees a verb of gpuops/surface once gpuops/verbindex.py is written again: its
    module found under gpuops.surface, its rows in the index (before the CLI reads them)."""
    setitem = setitem or (lambda d, k, v: d.__setitem__(k, v))
    setitem(sys.modules, f"gpuops.surface.{MODULE}", sys.modules[__name__])
    for table, row in ROWS.items():
        setitem(getattr(verbindex, table), "echo", row)
    setitem(surface._HOME, "echo", MODULE)


def _forget() -> None:
    """The tables made of the descriptions, made again on next use. The made tasks stay cached: a
    task is made once per verb, and the program's namespace holds the ones made before."""
    from gpuops.mcp import nextsteps, words

    for cached in (surface.verbs, surface.tools, surface.args, nextsteps.table, words._flags, words._command,
                   words._bare):
        cached.cache_clear()


@pytest.fixture
def registered(monkeypatch):
    register(monkeypatch.setitem)
    _forget()
    yield
    _forget()


def test_the_generated_index_carries_the_verb_as_made(monkeypatch):
    from gpuops.cli import tables

    real = surface.described()
    monkeypatch.setattr(surface, "described", lambda: dict(real, echo=(MODULE, ECHO)))
    text = tables.source()
    assert f"    'echo': {ROWS['VERBS']!r}," in text
    assert f"    'echo': {ROWS['WORD_ARGS']!r}," in text
    assert "'echo'" not in text.split("SWITCHES = {")[1].split("}\n")[0]  # it has no --host to warm up


def test_a_verb_both_made_and_written_is_refused(monkeypatch):
    from gpuops.cli import tables

    real = surface.described()
    written = dict(real, preflight=("box", Verb("preflight", "Check", READS, (), op="gpuops.ops.preflight:preflight")))
    monkeypatch.setattr(surface, "described", lambda: written)
    with pytest.raises(ValueError, match="preflight is made from its description"):
        tables.source()


def test_each_made_verb_names_what_takes_its_flags_and_nothing_is_written_beside_it():
    """A made verb's operation takes every flag it is given by name (a renamed parameter would be a
    TypeError at the first call), its renderer exists, and no written function is left beside it."""
    import inspect

    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from gpuops.cli import lite
    from gpuops.mcp import server
    from gpuops.surface.model import named

    made = [v for v in surface.verbs().values() if v.op]
    assert {v.name for v in made} >= {"gotcha", "profiles", "teardown-check", "disconnect"}
    for verb in made:
        flags = {p.name: None for p in verb.params if p.name != "json" and not p.shows}
        inspect.signature(named(verb.op)).bind(**flags)
        inspect.signature(named(verb.render)).bind(None, None, **{p.shows: False for p in verb.params if p.shows})
        assert lite.VERBS[verb.name] == lite.MADE
        for tool in verb.tools:
            assert tool.name not in server.FUNCTIONS and tool.data, tool.name
            inspect.signature(named(verb.op)).bind(**{a.param: None for a in surface.args(tool.name)})


def test_no_file_of_gpuops_names_the_verb():
    named = [str(p) for p in (ROOT / "gpuops").rglob("*.py") if "echo_back" in p.read_text(encoding="utf-8")]
    assert named == []


# ---------------------------------------------------------------- the CLI

_BOOT = "import tests.test_made as m; m.register(); from gpuops.cli import main; main()"


def _gpuops(*argv):
    return subprocess.run([sys.executable, "-c", _BOOT, *argv], capture_output=True, text=True, cwd=ROOT,
                          env=os.environ.copy(), timeout=120)


def test_the_verb_runs_and_draws_its_answer():
    r = _gpuops("echo", "hello", "there", "--times", "2")
    assert (r.returncode, r.stdout) == (0, "hello there\nhello there\n"), r.stderr
    r = _gpuops("echo", "--text=hi", "--loud")  # a flag that `shows` goes to the renderer
    assert (r.returncode, r.stdout) == (0, "HI\n"), r.stderr


def test_the_verb_answers_json_with_the_envelope_and_its_exit_codes():
    r = _gpuops("echo", "hi", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["command"] == "echo" and doc["ok"] is True
    assert doc["data"] == {"said": ["hi"], "times": 1}
    r = _gpuops("echo", "hi", "--times", "9", "--json")  # the description's bounds, before the operation
    error = json.loads(r.stdout)["error"]
    assert r.returncode == 2 and error["kind"] == "usage"
    assert error["message"] == "--times takes a whole number from 1 to 3, not '9'"
    r = _gpuops("echo", "hi", "--times", "9")
    assert (r.returncode, r.stdout) == (2, "") and "--times takes a whole number" in r.stderr
    r = _gpuops("echo", "--json")  # the operation's own refusal
    assert r.returncode == 2 and "echo needs --text" in json.loads(r.stdout)["summary"]


def test_the_verb_has_its_help_and_its_row():
    r = _gpuops("help", "echo")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Usage: gpuops echo [flags]\n\nSay the words back, as often as asked.\n")
    assert "--times=TIMES" in r.stdout and "how often to say them (default 1)" in r.stdout
    assert "gpuops echo hello there" in r.stdout
    overview = _gpuops("help").stdout
    assert "echo" in overview and "say the words back" in overview


# ---------------------------------------------------------------- the MCP tool


@pytest.mark.anyio
async def test_the_tool_is_listed_and_answers_through_the_client(registered):
    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from mcp import Client

    from gpuops.mcp import server

    async with Client(server.build(toolsets="reference"), raise_exceptions=True) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        tool = tools["echo_back"]
        assert tool.description == "Say the words back." and tool.annotations.read_only_hint is True
        props = tool.input_schema["properties"]
        assert list(props) == ["text", "times"] and tool.input_schema["required"] == ["text"]
        assert props["times"]["maximum"] == 3 and props["times"]["description"] == "how often to say them"
        assert tool.output_schema["properties"]["data"] == {"properties": {"said": {"type": "array"}}}

        said = await c.call_tool("echo_back", {"text": "hi", "times": 2})
        assert said.is_error is False  # and the client checked it against the output schema
        assert said.structured_content["data"] == {"said": ["hi", "hi"], "times": 2}
        assert said.structured_content["command"] == "echo"

        for wrong in ({"text": "hi", "times": 4}, {"text": "hi", "loud": True}):
            refused = await c.call_tool("echo_back", wrong)
            assert refused.is_error is True and json.loads(refused.content[0].text)["error"]["kind"] == "usage"
