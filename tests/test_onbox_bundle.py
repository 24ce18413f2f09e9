"""The on-box bundle: what runs without site-packages really needs nothing outside the stdlib."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from gpuops import onbox
from gpuops.remote import wrap

_ABSOLUTE = re.compile(r"^\s*(?:import ([\w.]+)|from ([\w.]+) import)", re.M)


@pytest.mark.parametrize("entry", [e for e in onbox.entries() if e not in onbox.NEEDS_SITE])
def test_entries_run_without_site_import_only_the_stdlib(entry):
    for name in onbox.closure(entry):
        for plain, source in _ABSOLUTE.findall(onbox._source(name)):
            if source.startswith("."):
                continue  # a sibling, bundled along
            top = (plain or source).split(".")[0]
            assert top in sys.stdlib_module_names, f"onbox/{name}.py imports {top}, which python3 -S cannot see"


def test_the_manifest_answers_under_python3_minus_S(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"hello\n")
    src = onbox.script("manifest")
    line = wrap.python_line(len(src), (), site=False)
    assert " -S " in line
    request = json.dumps({"root": str(tmp_path), "hash": "all"}).encode()
    out = subprocess.run(["sh", "-c", line], input=src + request, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [e[:3] for e in doc["entries"]] == [["a.txt", "f", 6]]
    assert doc["entries"][0][3] == "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"


def _python36():
    for candidate in (shutil.which("python3.6"), os.path.expanduser("~/.pyenv/versions/3.6.15/bin/python3")):
        if candidate and os.path.exists(candidate):
            try:
                if subprocess.run([candidate, "-c", "pass"], capture_output=True, timeout=30).returncode == 0:
                    return candidate
            except (OSError, subprocess.TimeoutExpired):
                pass
    return None


@pytest.mark.skipif(_python36() is None, reason="no python3.6 on this machine")
def test_every_onbox_module_imports_on_the_oldest_python_a_box_may_have():
    """The bug this prevents: a dataclass, a walrus or an f-string '=' in a shipped module passes
    every test on this machine's Python and breaks the box whose python3 is 3.6."""
    loader = (
        "import importlib, sys, types\n"
        "pkg = types.ModuleType('onbox'); pkg.__path__ = [sys.argv[1]]; sys.modules['onbox'] = pkg\n"
        "for name in sys.argv[2:]:\n"
        "    importlib.import_module('onbox.' + name)\n"
    )
    out = subprocess.run([_python36(), "-S", "-B", "-c", loader, onbox._HERE] + onbox._names(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
