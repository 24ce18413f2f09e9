"""The on-box bundle: what runs without site-packages really needs nothing outside the stdlib."""

import json
import re
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
