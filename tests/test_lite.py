"""The fast path (gpuops.cli.lite): it reads a command line exactly as Invoke's parser does or not at
all, and the light verbs start without Invoke, the transport or rich."""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from invoke.exceptions import Exit, ParseError

from gpuops.cli import lite
from gpuops.cli.flags import words_to_flag
from gpuops.cli.program import GpuopsProgram, _restore, _stand_ins, _takes_value, ns
from gpuops.errors import UsageError
from tests.conftest import ROOT, FIXTURES


def _invoke_reads(argv):
    """[(verb, kwargs)] as Invoke's parser hands them to the tasks; None when it refuses argv or
    answers it itself (--help, --version)."""
    program = GpuopsProgram(namespace=ns, version="0", name="gpuops", binary="gpuops")
    words, given = _stand_ins(["gpuops"] + words_to_flag(list(argv), _takes_value()))
    try:
        program.create_config()
        program.parse_core(words)
        program.parse_collection()
        program.parse_tasks()
        _restore([*program.core, *program.tasks], given)
        program._refuse_unhonoured_core()
    except (ParseError, UsageError, Exit):
        return None
    return [(ctx.name, {k.replace("-", "_"): v for k, v in ctx.as_kwargs.items()}) for ctx in program.tasks]


def _lite_reads(argv):
    found = lite.read(list(argv))
    return None if found is None else [(lite.verb_name(found[0]), found[1])]


def test_the_verb_table_is_what_the_modules_define():
    assert set(lite.VERBS) == set(ns.task_names)
    for verb in ns.task_names:
        assert lite._body(verb) is ns[verb].body, verb


def _flags(verb):
    return list(lite.flag_kinds(lite._body(verb)))


VALUES = st.sampled_from(["", "x", "a b", "-x", "--json", "--host", "=x", "a=b", "1", "-1", "status", "local",
                          "U7", "--", "-h"])
OTHER = st.sampled_from(["--help", "-h", "--dry", "--echo", "--version", "--no-such", "-H", "word", "gotcha",
                         "--", "--json=true", "--json=", "-x"])


@st.composite
def command_lines(draw):
    verb = draw(st.sampled_from(sorted(lite.VERBS)))
    flags = _flags(verb)
    words = [verb]
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.integers(0, 5))
        if kind <= 2:
            flag, value = draw(st.sampled_from(flags)), draw(VALUES)
            words += [flag, value] if kind < 2 else [f"{flag}={value}"]
        elif kind == 3:
            words.append(draw(st.sampled_from(flags)))
        elif kind == 4:
            words.append(draw(OTHER))
        else:
            words.append(draw(VALUES))
    return words


@settings(max_examples=600, deadline=None)
@given(command_lines())
def test_the_fast_path_reads_a_command_line_as_invoke_does_or_leaves_it(argv):
    mine = _lite_reads(argv)
    if mine is not None:
        assert mine == _invoke_reads(argv), argv


@pytest.mark.parametrize("argv", [
    ["gotcha", "U7"], ["gotcha", "cuda", "oom", "--limit", "3", "--json"], ["profiles"], ["profiles", "autodl"],
    ["triage", "--log", "x.log", "--json", "--now=2026-01-01T00:00"], ["status", "--host", "box", "--json"],
    ["launch", "--cmd", "python train.py --lr 3", "--env", "A=1", "--env", "B=2", "--host", "h"],
    ["push", "--host", "h", "--src", ".", "--dst", "/d", "--exclude", "*.ckpt", "--yes"],
])
def test_the_command_lines_people_type_take_the_fast_path_and_mean_the_same(argv):
    mine = _lite_reads(argv)
    assert mine is not None, argv
    assert mine == _invoke_reads(argv)


@pytest.mark.parametrize("verb", sorted(lite.VERBS))
def test_a_value_after_equals_is_a_value_in_both_readers_even_when_it_is_a_flag_of_the_verb(verb):
    """`--exclude=--delete` read as `--exclude --delete` deleted files for an agent (issue 37): after '='
    every valued flag of every verb takes the rest of the word, whichever flag it names."""
    kinds = lite.flag_kinds(lite._body(verb))
    switches = [f for f, (_, kind, _) in kinds.items() if kind == "switch"]
    for flag, (name, kind, _) in kinds.items():
        if kind == "switch":
            continue
        for value in switches + ["--", "-x", "--host=evil"]:
            argv = [verb, f"{flag}={value}"]
            read = _invoke_reads(argv)
            assert read is not None, argv
            (_, kwargs), = read
            assert kwargs[name] == ([value] if kind == "list" else value), argv
            assert not any(kwargs[kinds[s][0]] for s in switches), argv
            assert _lite_reads(argv) == read, argv


@pytest.mark.parametrize("argv", [
    ["gotcha", "--help"], ["status", "-h"], ["--version"], ["preflight", "--dry"], ["status", "--job", "-x"],
    ["status", "--json", "--json"], ["logs", "status"], ["preflight", "somehost"], ["push", "--", "x"],
    ["gotcha", "--json=yes"], ["nosuchverb"], ["status", "--host"],
])
def test_what_the_fast_path_cannot_read_exactly_is_left_to_invoke(argv):
    assert lite.read(argv) is None


def _loaded(argv, names):
    code = ("import sys; sys.argv = ['gpuops'] + %r\n"
            "from gpuops.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED', sorted(n for n in %r if n in sys.modules), file=sys.stderr)" % (argv, names))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED ")]
    assert line, proc.stderr[-800:]
    return json.loads(line[-1][len("LOADED "):].replace("'", '"')), proc


HEAVY = ["invoke", "invoke.executor", "fabric", "paramiko", "rich", "rich.live", "gpuops.remote", "gpuops.ops.hosts"]


@pytest.mark.parametrize("argv,also", [
    (["--help"], ["gpuops.ops", "gpuops.profiles", "tomllib"]),
    (["gotcha", "U7"], ["gpuops.profiles", "tomllib", "gpuops.tomlschema"]),
    (["gotcha", "U7", "--json"], ["gpuops.profiles", "tomllib"]),
    (["profiles", "--json"], []),
    (["triage", "--log", str(FIXTURES / "triage" / "bash_killed.log"), "--json"], ["gpuops.profiles"]),
])
def test_a_light_verb_loads_only_what_it_uses(argv, also):
    loaded, proc = _loaded(argv, HEAVY + also)
    assert loaded == [], (loaded, proc.stdout[-300:])


def test_a_command_line_left_to_invoke_still_gets_its_answer():
    loaded, proc = _loaded(["gotcha", "--limit", "-3", "U7"], ["invoke"])
    assert loaded == ["invoke"] and "--limit takes" in proc.stderr


def test_a_remote_call_builds_its_host_spec_results_and_findings_without_dataclasses():
    # Before its handshake may start, every --host call imports gpuops.remote; preflight and
    # status then build findings and job states. dataclasses drags in inspect, ast, dis and
    # tokenize: 15-30 ms of every call's start-up, measured in benchmarks/reuse.py.
    code = ("import sys\n"
            "import gpuops.remote, gpuops.remote.warmup, gpuops.ops.preflight, gpuops.ops.jobs\n"
            "import gpuops.render.preflight, gpuops.render.jobs\n"
            "print(sorted(n for n in ('dataclasses', 'inspect', 'ast') if n in sys.modules))")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert proc.stdout.strip() == "[]"
