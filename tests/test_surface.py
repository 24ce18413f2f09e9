"""One description per verb (gpuops.surface), and both faces made of it: the parity of every verb's
flags on the CLI with its tools' parameters on MCP, through Invoke's parser and the SDK's client.

Each verb was described by hand in three to five places (its flags, the MCP signature, the
next-step table, the schemas, the tests' tool lists) and they drifted: MCP lacked pause, resume,
labels, progress_regex, profile and script on launch, and stall_min_s, stall_factor and a label
filter on status, so a silent hang was invisible through MCP."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuops import surface
from gpuops.cli import helptext, lite
from gpuops.surface import model as M

ROOT = Path(__file__).resolve().parent.parent
# Every verb, and the tools made of it: the surface of each side, listed here so that a verb or a
# tool added without its description, or its description without a face, fails.
SURFACE = {
    "preflight": ("host_preflight",), "fleet": ("fleet_status",), "reap": ("vram_reap",),
    "diagnose": ("job_diagnose", "gang_diagnose"), "triage": ("log_triage",),
    "profiles": ("profiles_show", "profile_guess"), "gotcha": ("gotcha_lookup",),
    "teardown-check": ("teardown_check",), "disconnect": (),
    "launch": ("job_launch", "fleet_launch", "gang_launch"), "status": ("job_status", "gang_status"),
    "logs": ("job_logs", "gang_logs"), "wait": ("job_wait", "job_events", "gang_wait"), "stop": ("job_stop", "gang_stop"),
    "pause": ("job_pause",), "resume": ("job_resume",), "retry": ("job_retry", "gang_retry"),
    "queue": ("job_queue",), "push": ("data_push",), "pull": ("data_pull",), "verify": ("data_verify",),
}
SERVERS_OWN = {"request_wait", "request_cancel"}  # tools no verb is made of


def _task(verb):
    from gpuops.cli.program import ns

    return ns[verb]


def _engine_flags(verb):
    from gpuops import engines

    return {key for e in engines.each() for key in e.flags_for(verb)}


def test_every_verb_and_tool_is_described():
    assert set(surface.verbs()) == set(SURFACE) == set(lite.VERBS)
    for name, tools in SURFACE.items():
        assert tuple(t.name for t in surface.verb(name).tools) == tools, name
    assert set(surface.tools()) == {t for ts in SURFACE.values() for t in ts} | SERVERS_OWN
    grouped = {verb: group for group, names in helptext.GROUPS for verb in names}
    assert {name: v.group for name, v in surface.verbs().items()} == grouped


@pytest.mark.parametrize("verb", sorted(SURFACE))
def test_the_cli_task_is_its_description(verb):
    """Invoke's parser reads the task: its flags, defaults, help and repeatable ones are the verb's."""
    spec, task = surface.verb(verb), _task(verb)
    kinds = lite.flag_kinds(task.body)
    own = [name for name, _, _ in kinds.values()]
    described = [p.name for p in spec.params]
    assert own[:len(described)] == described
    assert set(own[len(described):]) == (_engine_flags(verb) if spec.engine_flags else set())
    for p in spec.params:
        name, kind, default = kinds[p.flag]
        assert kind == ("switch" if p.kind == M.SWITCH else "list" if p.kind in M.REPEATED else "value"), p.flag
        assert default == p.cli_default, p.flag
        assert task.body.task_options["help"][p.name] == p.help, p.flag


def test_parity_every_flag_has_a_parameter_or_says_why_and_back():
    for verb in surface.verbs().values():
        taken = {a.param for t in verb.tools for a in surface.args(t.name) if a.param}
        taken |= {name for t in verb.tools for name in t.implied}
        for p in verb.params:
            alone = bool(p.cli_only or verb.cli_only)
            assert (p.name in taken) != alone, f"{verb.name} {p.flag}: in a tool, or CLI only with why"
        if verb.engine_flags:
            assert any("resources" in {a.name for a in surface.args(t.name)} for t in verb.tools), verb.name
        assert bool(verb.tools) != bool(verb.cli_only), verb.name
        for t in verb.tools:
            for a in surface.args(t.name):
                assert bool(a.param) != bool(a.why), f"{t.name}.{a.name}: a flag's, or its own with why"
            for name in t.implied:
                assert verb.param(name).kind == M.SWITCH


def test_the_drift_found_is_closed():
    params = {name: {a.name for a in surface.args(name)} for name in surface.tools()}
    assert {"labels", "progress_regex", "profile", "script"} <= params["job_launch"]
    assert {"stall_min_s", "stall_factor", "labels", "progress_regex"} <= params["job_status"]
    assert {"job_pause", "job_resume"} <= set(surface.toolset("jobs"))
    assert {t for t in surface.toolset("jobs")} == {t for v in ("launch", "status", "logs", "wait", "stop",
                                                                  "pause", "resume", "retry", "queue")
                                                   for t in SURFACE[v] if t.startswith("job_")}


def test_what_an_agent_reads_names_no_flag_and_no_command_line():
    import re

    flags = {p.flag for v in surface.verbs().values() for p in v.params}

    def gpuops_words(text):  # a training script's own flag ('--resume last.ckpt') is the caller's
        return [w for w in re.findall(r"--[a-z][a-z-]*", text) if w in flags] + [
            w for w in re.findall(r"gpuops ([a-z-]+)", text) if w in surface.verbs()]

    for name, t in surface.tools().items():
        assert not gpuops_words(t.does), name
        for a in surface.args(name):
            assert a.tip and not gpuops_words(a.tip), f"{name}.{a.name}: {a.tip}"


def test_what_the_description_copies_is_what_it_stands_for():
    from gpuops import profiles
    from gpuops.ops import joblogs, wait
    from gpuops.surface import common, teardown

    assert teardown.TEARDOWN_VERBS == profiles.VERBS
    assert surface.verb("logs").param("max_bytes").high == joblogs.MAX_BYTES
    assert surface.verb("wait").param("max_bytes").high == wait.MAX_TEXT_BYTES
    assert common.PAGE == 24_000


@pytest.mark.anyio
async def test_every_tool_is_its_description_through_the_client(real_processes):
    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from mcp import Client

    from gpuops.mcp import nextsteps, server

    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        listed = {t.name: t for t in (await c.list_tools()).tools}
    assert set(listed) == set(surface.tools())
    for name, tool in listed.items():
        spec, made = surface.tool(name), surface.args(name)
        props = tool.input_schema["properties"]
        assert list(props) == [a.name for a in made], name
        assert sorted(tool.input_schema.get("required", [])) == sorted(a.name for a in made if a.required), name
        assert tool.description == spec.does and tool.title == spec.title and tool.annotations.title is None
        assert tool.annotations.read_only_hint is (spec.effect == M.READS)
        for a in made:
            prop = props[a.name]
            assert prop["description"] == a.tip, (name, a.name)
            assert prop.get("minimum") == a.low, (name, a.name)
            assert prop.get("maximum") in (a.high, None) and (a.high is None or a.high > 100_000
                                                                  or prop["maximum"] == a.high), (name, a.name)
            if a.choices:
                assert prop["enum"] == list(a.choices), (name, a.name)
            if a.items:
                assert prop["items"]["enum"] == list(a.items), (name, a.name)
        table = dict(nextsteps.table()[spec.verb]) if spec.verb else {}
        if spec.verb:  # the step table: each flag's parameter, an engine's flags a key of `resources`
            assert {f: n for f, (n, k) in table[name].items() if n and k != nextsteps.RESOURCE} == {
                f: a.name for f, a in surface.flags_of(name).items()}
            assert {f for f, (_, k) in table[name].items() if k == nextsteps.RESOURCE} == (
                {"--" + key.replace("_", "-") for key in _engine_flags(spec.verb)} if "resources" in props else set())


def test_a_bad_value_is_refused_on_each_side_by_the_same_bound(real_processes, tmp_path):
    """A bound said once: the CLI's parse and the MCP schema's maximum are the same number."""
    done = subprocess.run([sys.executable, "-m", "gpuops", "status", "--stall-factor", "1001", "--json"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    doc = json.loads(done.stdout)
    assert done.returncode == 2 and doc["error"]["kind"] == "usage"
    assert doc["summary"] == "--stall-factor takes a number from 0 to 1000, not '1001'"
    (arg,) = [a for a in surface.args("job_status") if a.name == "stall_factor"]
    assert arg.high == 1000


def test_the_interface_reference_is_generated_from_the_descriptions():
    from gpuops.surface import docs

    text = docs.markdown()
    assert (ROOT / "references" / "INTERFACE.md").read_text(encoding="utf-8") == text
    assert "| `--stall-min` | seconds | 600 | 0..2592000 | job_status.stall_min_s |" in text
    assert "`request_wait`" not in text or "## The server's own tools" in text
