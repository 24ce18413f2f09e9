"""The on-box bundle: what runs without site-packages really needs nothing outside the stdlib."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from gpuops import onbox
from gpuops.remote import wrap
from tests.onboxsrc import needed_imports as _needed_imports


@pytest.mark.parametrize("entry", [e for e in onbox.entries() if e not in onbox.NEEDS_SITE])
def test_entries_run_without_site_import_only_the_stdlib(entry):
    for name in onbox.closure(entry):
        for top in _needed_imports(onbox._source(name)):
            assert top in sys.stdlib_module_names, f"onbox/{name}.py imports {top}, which python3 -S cannot see"


def test_an_import_outside_a_try_block_is_needed():
    assert _needed_imports("import json\ntry:\n    import pynvml\nexcept ImportError:\n    pass\n") == {"json"}
    assert _needed_imports("def f():\n    import pynvml\n") == {"pynvml"}


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
def test_every_shipped_module_imports_on_the_oldest_python_a_box_may_have():
    """The bug this prevents: a dataclass, a walrus, an f-string '=' or namedtuple(defaults=) in a
    shipped module passes every test on this machine's Python and breaks the box whose python3 is
    3.6. Every module the bundle ships, triage's classifier and the bottom tables it reads included, is loaded
    by the bundle's own loader, without site-packages."""
    names = list(onbox.sources())
    assert "onbox.triage.classify" in names and "xid" in names
    # The loader runs a module when a name in it is first used: ask each for one, so every module
    # runs (its imports first) and none is left unrun.
    src = onbox.loader(names) + (
        "pending = [m for k, m in sys.modules.items() if k.startswith('gpuops_box') and '_gpuops_src' in m.__dict__]\n"
        "for m in pending:\n"
        "    getattr(m, '_gpuops_run', None)\n"
        "print(len(pending), sum('_gpuops_src' in m.__dict__ for m in pending))\n")
    out = subprocess.run([_python36(), "-S", "-B", "-"], input=src, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [str(len(names)), "0"]


def test_a_bundled_module_keeps_its_package_under_the_private_root():
    """triage's modules import `.steps`, `...xid` and their siblings relatively: on the box they
    resolve to the bundle's own modules, the one `steps` that the rest of onbox uses too, never to a
    gpuops the box may have installed."""
    src = onbox.loader(onbox.closure("logclass")) + (
        "import json\n"
        "m = sys.modules\n"
        "print(json.dumps([sorted(n for n in m if n.startswith('gpuops')),"
        " m['gpuops_box.onbox.triage.classify'].steps is m['gpuops_box.onbox.triage.steps'],"
        " m['gpuops_box.onbox.triage.scan'].xid is m['gpuops_box.xid'],"
        " m['gpuops_box.onbox.triage.logclass'].triage_pieces.__module__]))\n")
    out = subprocess.run([sys.executable, "-S", "-B", "-"], input=src, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    names, same_steps, same_xid, where = json.loads(out.stdout)
    assert same_steps and same_xid and where == "gpuops_box.onbox.triage.logtriage"
    assert not [n for n in names if n.split(".")[0] != "gpuops_box"]
    assert "gpuops_box.states" in names and not [n for n in names if n.startswith(("gpuops_box.ops", "gpuops_box.jobs"))]
