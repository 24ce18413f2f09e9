"""The program itself: one namespace behind `gpuops` and `inv`, flags only, usage errors exit 2."""

import subprocess
import sys

import pytest

from gpuops.cli.program import ns
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
    import json

    inv = subprocess.run([sys.executable, "-m", "invoke", "--list", "--list-format", "json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    listed = {t["name"] for t in json.loads(inv.stdout)["tasks"]}
    assert listed == set(VERBS)


def test_lookup_verb_takes_bare_words(cli):
    r = cli("gotcha", "zombie", "--json")
    assert r.returncode == 0, r.stderr
    import json

    assert "U11" in r.stdout and json.loads(r.stdout)["ok"] is True


@pytest.mark.parametrize("required", ["preflight", "status", "launch", "push", "triage", "diagnose", "reap",
                                      "profiles", "gotcha"])
def test_the_issued_verbs_exist(required):
    assert required in VERBS
