"""The program itself: one namespace behind `gpuops` and `inv`, flags only, usage errors exit 2."""

import json
import os
import subprocess
import sys

import pytest

from gpuops.cli.flags import number, seconds
from gpuops.cli.program import ns
from gpuops.errors import UsageError
from tests.conftest import ROOT

VERBS = sorted(ns.task_names)


def test_every_verb_has_help_and_no_positional_surprises(cli):
    for name in VERBS:
        r = cli(name, "--help")
        assert r.returncode == 0, (name, r.stderr[-500:])
        assert "Traceback" not in r.stderr
        assert "-h STRING" not in r.stdout and "-h," not in r.stdout, f"{name}: --host must not take -h"


def test_unknown_flag_is_a_usage_error(cli):
    r = cli("preflight", "--no-such-flag")
    assert r.returncode == 2
    assert r.stderr.startswith("gpuops:") and "Traceback" not in r.stderr


def test_a_stray_word_is_not_silently_taken_as_a_value(cli):
    r = cli("preflight", "somehost")
    assert r.returncode == 2


def test_inv_and_gpuops_expose_the_same_verbs():
    inv = subprocess.run([sys.executable, "-m", "invoke", "--list", "--list-format", "json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    listed = {t["name"] for t in json.loads(inv.stdout)["tasks"]}
    assert listed == set(VERBS)


def test_lookup_verb_takes_bare_words(cli):
    r = cli("gotcha", "zombie", "--json")
    assert r.returncode == 0, r.stderr
    assert "U11" in r.stdout and json.loads(r.stdout)["ok"] is True


@pytest.mark.parametrize("required", ["preflight", "status", "launch", "push", "triage", "diagnose", "reap",
                                      "profiles", "gotcha"])
def test_the_issued_verbs_exist(required):
    assert required in VERBS


def test_no_task_default_lets_invoke_convert_a_flag():
    # Found in review: `--timeout abc` printed Invoke's traceback, because Invoke converts a flag's
    # text by the type of the task's default before gpuops can judge it.
    import inspect

    for name in VERBS:
        for p in list(inspect.signature(ns[name].body).parameters.values())[1:]:
            assert p.default is None or isinstance(p.default, (str, bool)), f"{name} --{p.name}: {p.default!r}"


# (argv, the flag and value the one error line must name). Found in review: the first seven printed
# a traceback, the next three exited 70, and the negative ones were accepted.
BAD_NUMBERS = [
    (["preflight", "--timeout", "abc"], "--timeout", "'abc'"),
    (["status", "--limit", "abc"], "--limit", "'abc'"),
    (["logs", "--job", "j", "--tail", "abc"], "--tail", "'abc'"),
    (["logs", "--job", "j", "--reconnect", "abc"], "--reconnect", "'abc'"),
    (["push", "--host", "local", "--src", ".", "--dst", "/nowhere", "--io-timeout", "1.5"], "--io-timeout", "'1.5'"),
    (["pull", "--host", "local", "--src", "/nowhere", "--dst", "x", "--retry-for", "nan"], "--retry-for", "'nan'"),
    (["gotcha", "zombie", "--limit", "abc"], "--limit", "'abc'"),
    (["stop", "--job", "j", "--grace", "inf"], "--grace", "'inf'"),
    (["stop", "--job", "j", "--grace", "nan"], "--grace", "'nan'"),
    (["queue", "--name", "q", "--wait", "inf"], "--wait", "'inf'"),
    (["stop", "--job", "j", "--grace", "-5"], "--grace", "'-5'"),
    (["launch", "--cmd", "true", "--timeout", "-1"], "--timeout", "'-1'"),
    (["status", "--limit", "-1"], "--limit", "'-1'"),
    (["logs", "--job", "j", "--tail", "-3"], "--tail", "'-3'"),
    (["logs", "--job", "j", "--from-offset", "-1"], "--from-offset", "'-1'"),
    (["queue", "--name", "q", "--wait", "-1"], "--wait", "'-1'"),
    (["diagnose", "--timeout", "0"], "--timeout", "'0'"),
    (["diagnose", "--since", "nan"], "--since", "'nan'"),
    (["diagnose", "--pid", "-4"], "--pid", "'-4'"),
    (["status", "--stall-factor", "inf"], "--stall-factor", "'inf'"),
    (["status", "--stall-min", "1e999"], "--stall-min", "'1e999'"),
    (["reap", "--idle-window", "nan"], "--idle-window", "'nan'"),
    (["reap", "--term-wait", "-1"], "--term-wait", "'-1'"),
    (["reap", "--gpu", "1.0"], "--gpu", "'1.0'"),
    (["preflight", "--timeout", "99999999"], "--timeout", "'99999999'"),
]


@pytest.mark.parametrize("argv,flag,shown", BAD_NUMBERS, ids=["_".join(a[0][:1] + a[0][-2:]) for a in BAD_NUMBERS])
def test_a_bad_number_is_a_usage_error_in_one_line(cli, argv, flag, shown):
    r = cli(*argv)
    assert r.returncode == 2, (r.stdout[-300:], r.stderr[-300:])
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"gpuops: {flag} takes ") and shown in r.stderr
    j = cli(*argv, "--json")
    assert j.returncode == 2 and "Traceback" not in j.stderr
    error = json.loads(j.stdout)["error"]
    assert error["kind"] == "usage" and flag in error["message"] and shown in error["message"]


def test_retry_resume_arg_that_cannot_be_split_is_a_usage_error_before_the_box_is_asked(cli):
    # Found in review: `retry --resume-arg "'x"` exited 70. An unreachable --host shows that it is
    # refused here: asking the box would have exited 3.
    env = dict(os.environ, GPUOPS_TRANSPORT="paramiko")
    r = cli("retry", "--host", "nobody.invalid", "--job", "j", "--resume-arg", "'x", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == "gpuops: --resume-arg \"'x\" cannot be split into words: No closing quotation"
    j = cli("retry", "--host", "nobody.invalid", "--job", "j", "--resume-arg", "'x", "--json", env=env)
    assert j.returncode == 2 and json.loads(j.stdout)["error"]["kind"] == "usage"


@pytest.mark.parametrize("text,kw,expected", [
    ("60", {"integer": True}, 60),
    (" 7 ", {}, 7),
    ("0.5", {}, 0.5),
    ("1e1", {}, 10.0),
    ("0", {}, 0),
    ("100", {}, 100),
    (None, {}, None),
])
def test_number_keeps_good_values_and_their_type(text, kw, expected):
    got = number("--x", text, 0, 100, **kw)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("text,kw", [("1.0", {"integer": True}), ("100.5", {}), ("-0.1", {}), ("nan", {}),
                                     ("inf", {}), ("-inf", {}), ("", {}), ("0x10", {}),
                                     ("1" * 5000, {"integer": True})])
def test_number_refuses_in_one_line_naming_flag_and_value(text, kw):
    with pytest.raises(UsageError) as err:
        number("--x", text, 0, 100, **kw)
    message = err.value.message
    assert message.startswith("--x takes ") and "from 0 to 100" in message and "\n" not in message
    assert len(message) < 120


def test_reap_takes_fractional_seconds():
    # Found in review: `reap --min-age 0.5` printed a traceback (its default was an int).
    from gpuops import surface
    from gpuops.cli.flags import value

    reap = surface.verb("reap")
    given = (("gpu", None), ("min_age", "0.5"), ("idle_window", "0"), ("term_wait", "2.5"))
    assert [value(reap.param(name), text) for name, text in given] == [None, 0.5, 0, 2.5]


@pytest.mark.parametrize("text,kw,expected", [("90", {}, 90), ("15s", {}, 15), ("10m", {}, 600), ("1h30m", {}, 5400),
                                              ("1.5", {}, 1.5), ("2m", {"whole": True}, 120)])
def test_a_duration_flag_takes_seconds_or_units(text, kw, expected):
    # issue 26: `--stall-after 20s`, `--max-runtime 4h`, and every verb that already took seconds
    got = seconds("--x", text, 0, 86400, **kw)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("text,kw", [("10x", {}), ("-5", {}), ("1h1h", {}), ("2d", {}), ("1.5", {"whole": True}),
                                     ("nan", {}), ("", {})])
def test_a_duration_flag_refuses_in_one_line_naming_flag_value_and_forms(text, kw):
    with pytest.raises(UsageError) as err:
        seconds("--x", text, 0, 86400, **kw)
    message = err.value.message
    assert message.startswith("--x takes ") and "15s" in message and "to 1d" in message and repr(text) in message
    assert "\n" not in message and len(message) < 120
