"""The program's own help and usage lines: pure text first, then through the real program."""

import json
import re
from pathlib import Path

import pytest

from gpuops import surface
from gpuops.cli import helptext
from gpuops.cli.flags import words_to_flag
from gpuops.cli.program import ns

VERBS = sorted(ns.task_names)
ROOT = Path(__file__).resolve().parent.parent


def test_every_verb_is_in_a_group_and_no_group_names_a_missing_verb_twice():
    grouped = [v for _, verbs in helptext.GROUPS for v in verbs]
    assert len(grouped) == len(set(grouped))
    assert set(VERBS) <= set(grouped), set(VERBS) - set(grouped)


def test_overview_groups_verbs_before_any_option_and_fits_the_width():
    text = helptext.overview({"preflight": "Check a box. " * 8, "status": "Job states.", "zeta": "New."}, 80)
    lines = text.splitlines()
    assert lines[0] == helptext.TAGLINE
    assert lines.index("Check") < lines.index("Jobs") < lines.index("Other")
    assert all(len(line) <= 80 for line in lines if not line.startswith("  gpuops "))
    assert "--prompt-for-sudo-password" not in text and "--write-pyc" not in text


def test_verb_help_shows_placeholders_repeatable_flags_and_examples():
    text = helptext.verb_help("launch", "Start it.\n\nMore words.", [
        (("cmd",), True, False, "the command", None), (("env",), True, True, "KEY=VALUE (repeatable)", None),
        (("json",), False, False, "one envelope", None), (("job",), True, False, "the job", "-j")], 80)
    assert text.startswith("Usage: gpuops launch [flags]\n")
    assert "  --cmd=CMD" in text and "--env=ENV ..." in text and "  --json " in text and "  -j, --job=JOB " in text
    assert text.count("repeatable") == 1
    assert "Examples\n  gpuops launch" in text and "Docstring" not in text


@pytest.mark.parametrize("message,verb,expected", [
    ("No idea what 'statsu' is!", None, "unknown verb 'statsu' (did you mean status?)"),
    ("No idea what 'qqqq' is!", None, "unknown verb 'qqqq'; see gpuops --help"),
    ("No idea what '--hots' is!", "status", "unknown flag --hots for status (did you mean --host?)"),
    ("No idea what 'box' is!", "preflight", "preflight takes flags, not 'box'; see gpuops preflight --help"),
    ("Flag <Argument: job> needed value and was not given one!", "status",
     "--job needs a value; see gpuops status --help"),
    ("Flag <Argument: config (f)> needed value and was not given one!", "logs",
     "-f is not a flag of logs; see gpuops logs --help"),
])
def test_invoke_parse_errors_become_lines_a_person_can_act_on(message, verb, expected):
    assert helptext.usage_message(message, verb, VERBS, ["host", "job", "json", "limit"]) == expected


@pytest.mark.parametrize("argv,expected", [
    (["gotcha", "cuda", "oom"], ["gotcha", "--query", "cuda oom"]),
    (["gotcha", "--json", "U7"], ["gotcha", "--query", "U7", "--json"]),
    (["gotcha", "--limit", "3", "inode"], ["gotcha", "--query", "inode", "--limit", "3"]),
    (["logs", "demo", "--host", "box"], ["logs", "--job", "demo", "--host", "box"]),
    (["logs", "--host", "box", "demo"], ["logs", "--job", "demo", "--host", "box"]),
    (["profiles", "autodl"], ["profiles", "--name", "autodl"]),
    (["status", "a", "b"], ["status", "a", "b"]),
    (["logs", "--job", "x", "demo"], ["logs", "--job", "x", "demo"]),
    (["preflight", "box"], ["preflight", "box"]),
])
def test_bare_words_become_the_verbs_one_obvious_flag(argv, expected):
    takes = {"gotcha": {"--limit", "--query"}, "logs": {"--host", "--job", "--tail"}, "status": {"--job"},
             "profiles": {"--name"}}
    assert words_to_flag(argv, takes) == expected


def test_the_index_gives_each_verb_one_row_within_the_width():
    text = helptext.index({"preflight": "a box, checked " * 8, "status": "job states", "zeta": "new"}, 80)
    lines = text.splitlines()
    assert lines[0] == helptext.TAGLINE and len(lines) == 5 and all(len(line) <= 80 for line in lines)
    assert lines[1].startswith("Check") and lines[1].endswith("…") and lines[3].startswith("Other")


def test_top_level_help_is_gpuops_not_invoke(cli):
    r = cli("--help")
    assert r.returncode == 0
    assert r.stdout.startswith(helptext.TAGLINE) and "Core options" not in r.stdout
    assert "--dry" not in r.stdout and "--prompt-for-sudo-password" not in r.stdout
    for verb in VERBS:
        assert f"  {verb} " in r.stdout


def test_dry_never_runs_the_verb(cli, tmp_path):
    """`gpuops --dry launch --cmd 'touch X'` created X although --help said --dry only echoes."""
    marker = tmp_path / "X"
    for flag in ("--dry", "-R", "--echo", "-T 5", "--pty", "--warn-only"):
        r = cli(*flag.split(), "launch", "--cmd", f"touch {marker}", "--jobs-dir", str(tmp_path / "jobs"))
        assert r.returncode == 2 and "not of gpuops" in r.stderr, (flag, r.stderr)
    assert not marker.exists() and not (tmp_path / "jobs").exists()


def test_usage_errors_under_json_are_one_envelope(cli):
    for argv in (["status", "--hots", "x", "--json"], ["statsu", "--json"], ["status", "--job", "--json"]):
        r = cli(*argv)
        assert r.returncode == 2 and r.stderr.startswith("gpuops: ") and r.stderr.count("\n") == 1, argv
        doc = json.loads(r.stdout)
        assert doc["ok"] is False and doc["error"]["kind"] == "usage" and doc["summary"] in r.stderr


def test_bare_words_reach_their_verbs(cli):
    r = cli("gotcha", "--json", "U7")
    assert r.returncode == 0 and json.loads(r.stdout)["data"]["hits"][0]["id"] == "U7"
    r = cli("profiles", "autodl", "--json")
    assert r.returncode == 0 and "autodl" in r.stdout


@pytest.mark.parametrize("argv,expected", [
    (["logs", "-j", "demo", "-f"], ["logs", "--job", "demo", "--follow"]),
    (["status", "-j", "a1b2"], ["status", "--job", "a1b2"]),
    (["launch", "--name", "-f", "--cmd", "x"], ["launch", "--name", "-f", "--cmd", "x"]),  # not a verb of -f
    (["logs", "--tail", "-f"], ["logs", "--tail", "-f"]),  # a value stays a value
    (["logs", "--job", "x", "--", "-f"], ["logs", "--job", "x", "--", "-f"]),
])
def test_short_flags_are_written_long_only_where_the_verb_has_them(argv, expected):
    from gpuops.cli.switches import expand_short

    assert expand_short(argv, {"logs": {"--tail", "--job"}, "launch": {"--name", "--cmd"}}) == expected


def test_the_short_flags_name_every_verb_with_the_long_flag():
    import inspect

    from gpuops.cli.switches import SHORT

    for short, (long, verbs) in SHORT.items():
        having = {name for name in VERBS
                  if long[2:].replace("-", "_") in inspect.signature(ns[name].body).parameters}
        assert set(verbs) == having, short


def test_logs_takes_f_and_j_and_help_shows_them(cli, tmp_path):
    """`gpuops logs -f` was refused with `Flag <Argument: config (f)> needed value`."""
    r = cli("logs", "-j", "nosuchjob", "-f", "--jobs-dir", str(tmp_path))
    assert r.returncode == 4 and "no job 'nosuchjob'" in r.stderr, r.stderr
    text = cli("logs", "--help").stdout
    assert "  -f, --follow " in text and "  -j, --job=JOB " in text


@pytest.mark.parametrize("argv,example", [
    (["logs"], "e.g. gpuops logs --host box --job train --follow"),
    (["wait", "--host", "local"], "e.g. gpuops wait --host box --job train --timeout 3600"),
    (["launch"], "e.g. gpuops launch --host box --name train --cmd 'python train.py'"),
    (["push", "--host", "box", "--src", "."], "e.g. gpuops push --host box --src ./data --dst"),
    (["verify", "--host", "box"], "e.g. gpuops verify --host box --src ./data --dst"),
])
def test_a_missing_flag_shows_a_whole_command_to_copy(cli, argv, example):
    """`gpuops logs` said only "name the job with --job"."""
    r = cli(*argv)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert " needs --" in r.stderr and example in r.stderr


def test_help_verb_is_the_verbs_help_and_help_exit_codes_lists_every_code(cli):
    """`gpuops help launch` was "unknown verb"; the exit codes were listed nowhere in the help."""
    r = cli("help", "launch")
    assert r.returncode == 0 and r.stdout == cli("launch", "--help").stdout
    r = cli("help", "exit-codes")
    from gpuops import errors

    codes = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, int)} | set(errors.INTERRUPTED.values())
    heads = [re.match(r"^  (\d[\d, ]*?) {2,}", line) for line in r.stdout.splitlines()]
    listed = {int(n) for m in heads if m for n in m.group(1).split(",")}
    assert r.returncode == 0 and listed == codes, r.stdout
    r = cli("help", "lanch")
    assert r.returncode == 2 and r.stderr == "gpuops: no help on 'lanch' (did you mean gpuops help launch?)\n"
    assert cli("help").stdout == cli("--help").stdout


def test_the_readmes_exit_code_table_is_the_help_page():
    rows = re.findall(r"^\| ([\d, ]+) \| (.*) \|$", (ROOT / "README.md").read_text(), re.M)
    assert rows == list(helptext.EXIT_CODES)


def test_launch_groups_its_flags_by_what_people_do(cli):
    """Issue 38: 166 rows, with --max-restarts and --nnodes under "Other" rather than torchrun. Each
    flag sits in its section of the description (Verb.sections): none is left to "Other"."""
    import os

    text = cli("help", "launch", env={**os.environ, "COLUMNS": "80"}).stdout
    heads = [line for line in text.splitlines() if line and not line.startswith(" ")]
    from gpuops import engines as registry

    engines = [f"{e.title} (--engine {e.name})" for e in registry.each() if e.flags]
    assert "Slurm (--engine slurm)" in engines  # each engine's own flags under its name
    assert heads[heads.index("What to run"):] == [
        "What to run", "Where it runs", "Engine (--engine)", *engines, "torchrun across boxes (--torchrun)",
        "Run policy: retries, stalls, time limit, checkpoints", "The run outlives its box (--fleet --vault)", "Output",
        "Examples"]
    section, head = {}, "What to run"
    for line in text.split("What to run\n", 1)[1].splitlines():
        if line and not line.startswith(" "):
            head = line
        elif line[2:4] == "--":
            section[line.split("=")[0].split()[0]] = head
    assert section["--max-restarts"] == section["--nnodes"] == section["--rdzv-port"] == \
        "torchrun across boxes (--torchrun)"
    assert section["--stall-after"] == section["--max-runtime"] == section["--keep-checkpoints"] == \
        "Run policy: retries, stalls, time limit, checkpoints"
    assert section["--vault"] == section["--lost-after"] == "The run outlives its box (--fleet --vault)"
    first = [flag for flag, head in section.items() if head == "What to run"]
    assert first[:3] == ["--cmd", "--script", "--name"], first
    assert "with --fleet: how many free GPUs" in " ".join(text.split()), "--gpus says what it means in both cases"


@pytest.mark.parametrize("verb", sorted(surface.verbs()))
def test_examples_fold_between_words_never_inside_one(verb):
    """A long example wrapped mid-token at 80 columns (`--gpus-per-` / `node`), unpastable."""
    import shlex

    for example in helptext.examples(verb):
        lines = helptext.example_lines(example, 80)
        assert all(len(line) <= 80 for line in lines), lines
        joined = " ".join(line.strip().removesuffix("\\").strip() for line in lines)
        assert shlex.split(joined) == shlex.split(example)
