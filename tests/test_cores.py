"""Core dumps on the box (gpuops.onbox.host.cores): files where kernel.core_pattern puts them, since the
run started, and systemd-coredump's list through a coredumpctl that prints what systemd's does
(--json=short: time in microseconds, sig as a number; "No coredumps found." and exit 1 when
empty)."""

import json
import os
import time

import pytest

from gpuops.diagnose import crash
from gpuops.errors import BadAnswer
from gpuops.onbox.host import cores


def test_core_files_named_by_the_pattern_since_the_run_started(tmp_path):
    now = time.time()
    for name in ("core", "core.4242", "core.python3.4242", "corefile.txt", "core.old"):
        (tmp_path / name).write_bytes(b"\x7fELF")
    os.utime(tmp_path / "core.old", (now - 3600, now - 3600))
    assert [os.path.basename(f["path"]) for f in cores.files(str(tmp_path), now - 60, "core")] == ["core", "core.4242"]
    assert [os.path.basename(f["path"]) for f in cores.files(str(tmp_path), now - 60, "core.%e.%p")] == [
        "core.python3.4242"]
    elsewhere = tmp_path / "cores"
    elsewhere.mkdir()
    (elsewhere / "core.train.99").write_bytes(b"x")
    assert [f["path"] for f in cores.files("/nonexistent", now - 60, str(elsewhere) + "/core.%e.%p")] == [
        str(elsewhere / "core.train.99")]
    assert cores.files(str(tmp_path), now + 3600, "core") == []


def _coredumpctl(tmp_path, monkeypatch, body):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "coredumpctl"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path / "argv"


def test_coredumpctl_entries_since_the_run_started(tmp_path, monkeypatch):
    rows = [{"time": 1790000000123456, "pid": 4242, "uid": 0, "gid": 0, "sig": 11, "corefile": "present",
             "exe": "/usr/bin/python3.10", "size": 8704000}]
    argv = _coredumpctl(tmp_path, monkeypatch, f'echo "$@" > {tmp_path}/argv\nprintf \'%s\\n\' '
                                               f"'{json.dumps(rows)}'\n")
    doc = cores.coredumpctl(1789999990.7)
    assert argv.read_text().split() == ["list", "--no-pager", "--json=short", "--since=@1789999990"]
    assert doc == {"available": True, "error": None, "entries": [
        {"time": 1790000000.123456, "pid": 4242, "sig": "SIGSEGV", "corefile": "present",
         "exe": "/usr/bin/python3.10", "size": 8704000}]}


def test_coredumpctl_with_nothing_to_list_or_no_journal_access(tmp_path, monkeypatch):
    _coredumpctl(tmp_path, monkeypatch, 'echo "No coredumps found." >&2\nexit 1\n')
    assert cores.coredumpctl(0) == {"available": True, "error": None, "entries": []}
    (tmp_path / "bin" / "coredumpctl").write_text(
        "#!/bin/sh\necho 'Failed to open journal: Permission denied' >&2\nexit 1\n")
    assert cores.coredumpctl(0)["error"] == "Failed to open journal: Permission denied"
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cores.coredumpctl(0) == {"available": False, "error": None, "entries": []}


def test_the_boxs_core_facts_are_bounded_before_a_verdict_reads_them(tmp_path):
    facts = cores.facts(str(tmp_path), time.time() - 60)
    assert crash.checked(json.loads(json.dumps(facts)), "box") == facts
    with pytest.raises(BadAnswer, match="a core file's path length"):
        crash.checked(dict(facts, files=[{"path": "x" * 5000, "size": 1, "mtime": 1.0}]), "box")
    with pytest.raises(BadAnswer, match="the core files"):
        crash.checked(dict(facts, files=[{"path": "/c", "size": 1, "mtime": 1.0}] * 21), "box")
