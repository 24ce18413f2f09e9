"""The probe and the checks agree on the facts' shape (gpuops.checks.shape): what the probe says is
declared, and what a check reads is declared, so a renamed or misspelt key cannot go unnoticed."""

import ast
import subprocess
from pathlib import Path

import pytest

from gpuops import checks
from gpuops.checks import shape
from gpuops.checks.thresholds import DEFAULTS
from gpuops.onbox.facts import probe
from gpuops.remote.local import LocalTarget
from tests.fixtures.fakegpu.boxes import compose

CHECKS = Path(checks.__file__).resolve().parent


@pytest.mark.parametrize("scenario", [None, "healthy", "hw-slowdown", "xid79", "xid79-lost", "ecc-dbe",
                                      "orphan-memory"])
def test_the_probe_answers_only_with_declared_keys(scenario, tmp_path, monkeypatch):
    root, env = compose(tmp_path, "v1-oom" if scenario is None else "v2-healthy", scenario)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    holder = subprocess.Popen(["sleep", "30"], stdin=open(root / "dev" / "nvidia0", "rb")) if scenario else None
    try:
        facts = LocalTarget().run_onbox("probe", ["--path", str(tmp_path / "not-yet")], timeout_s=60)
    finally:
        if holder:
            holder.kill()
            holder.wait()
    assert shape.undeclared(facts) == []
    if scenario:
        assert facts["gpu"]["devices"] and facts["gpu"]["holders"] and facts["kernlog"]["readable"]


def test_this_machines_probe_answers_only_with_declared_keys():
    assert shape.undeclared(LocalTarget().run_onbox("probe", timeout_s=60)) == []


def _read_keys(tree):
    """String keys a module reads: x.get("k") and x["k"] (stores, like evidence["k"] = ..., are
    the check's own output, not facts)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            found.add((node.args[0].value, node.lineno))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            found.add((node.slice.value, node.lineno))
    return found


def test_every_key_a_check_reads_is_declared():
    known = shape.keys() | set(DEFAULTS) | set(probe.THREAD_ENV)
    unknown = []
    for path in sorted(CHECKS.glob("*.py")):
        if path.name == "shape.py":
            continue
        for key, line in _read_keys(ast.parse(path.read_text())):
            if key not in known:
                unknown.append(f"{path.name}:{line} {key!r}")
    assert not unknown, unknown


def test_an_undeclared_key_is_named_with_its_path():
    doc = {"gpu": {"devices": [{"index": 0, "bogus": 1}]}, "tools": {"anything": True}, "nope": 1}
    assert shape.undeclared(doc) == ["facts.gpu.devices[0].bogus", "facts.nope"]
