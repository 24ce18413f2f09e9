"""The box's interpreter, resolved once per master and then run directly (gpuops.remote.wrap, base,
mux), against a real sshd whose login rc puts a pyenv-like `python3` shim (a bash script) first
on PATH: the shim runs once, a remembered path the box lost or cannot start falls back to it,
a new master starts afresh, and a path from the box is validated and quoted before use."""

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gpuops.remote import hostspec, knownkeys, mux, wrap
from gpuops.remote.targets import target_for
from tests.conftest import kept_masters
from tests.rig.sshd import keygen

REAL_PYTHON = os.path.realpath(sys.executable)

# Like pyenv's shim: a bash script that picks a version and execs it, exporting what it chose.
SHIM = """#!/usr/bin/env bash
set -e
echo "$$" >> "$HOME/shim.log"
export SHIM_VERSION="$(cat "$HOME/version")"
exec "$HOME/versions/$SHIM_VERSION/bin/python3" "$@"
"""


class ShimBox:
    """A box whose login rc puts HOME/shims first on PATH; HOME/version picks the interpreter."""

    def __init__(self, rig, name, root, version="a"):
        self.home = root / name
        (self.home / "shims").mkdir(parents=True)
        (self.home / ".bashrc").write_text(f'export PATH="{self.home}/shims:$PATH"\n')
        shim = self.home / "shims" / "python3"
        shim.write_text(SHIM)
        shim.chmod(0o755)
        self.install(version)
        self.box = rig.box(name, env={"HOME": str(self.home)})
        self.spec = self.box.spec

    def install(self, version):
        """Make `version` the one the shim runs (a link to this machine's python)."""
        bin_dir = self.home / "versions" / version / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        if not (bin_dir / "python3").exists():
            os.symlink(REAL_PYTHON, bin_dir / "python3")
        (self.home / "version").write_text(version)
        return str(bin_dir / "python3")

    def shim_runs(self) -> int:
        log = self.home / "shim.log"
        return len(log.read_text().split()) if log.exists() else 0


@pytest.fixture
def reuse(monkeypatch):
    """Kept masters, their calls on exec channels (the resident helper, which runs none, is off)."""
    with kept_masters(monkeypatch, "gi-", resident=False) as runtime:
        yield runtime


@pytest.fixture
def homes():
    root = tempfile.mkdtemp(prefix="gi-home-")
    yield Path(root)
    shutil.rmtree(root, ignore_errors=True)


def _ask(spec, root="/"):
    """One on-box call as a separate gpuops call would make it: its own target."""
    t = target_for(spec)
    try:
        return t.run_onbox("manifest", stdin=json.dumps({"root": str(root), "paths": []}).encode())
    finally:
        t.close()


def _socket(spec):
    return mux.socket_path(mux.shared_dir(), hostspec.resolve(spec), None)


def _remembered(spec):
    """What a call on this host's master would be offered, as gpuops.remote.openssh asks."""
    resolved = hostspec.resolve(spec)
    return mux.read_python(_socket(spec), keys=lambda: knownkeys.trusted(resolved.known_hosts,
                                                                         resolved.known_hosts_name))[0]


def _open_master(spec):
    t = target_for(spec)
    try:
        t.run("true")
    finally:
        t.close()


def test_the_shim_runs_once_per_master_and_later_calls_run_the_interpreter_directly(rig, reuse, homes, cli):
    b = ShimBox(rig, "py-once", homes)
    _open_master(b.spec)
    for _ in range(3):
        assert _ask(b.spec)["exists"] is True
    assert b.shim_runs() == 1
    assert _remembered(b.spec) == str(b.home / "versions" / "a" / "bin" / "python3")
    r = cli("status", "--host", b.spec, "--json", env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert b.shim_runs() == 1, "a separate gpuops process rides the same master and its remembered interpreter"
    assert "gpuops:python=" not in r.stderr


def test_without_kept_masters_a_target_remembers_for_its_own_lifetime(rig, homes, monkeypatch, fresh_logins):
    monkeypatch.setenv("GPUOPS_TRANSPORT", "openssh")
    b = ShimBox(rig, "py-own", homes)
    t = target_for(b.spec)
    try:
        for _ in range(3):
            assert t.run_onbox("manifest", stdin=b'{"root": "/", "paths": []}')["exists"] is True
    finally:
        t.close()
    assert b.shim_runs() == 1


def _remove(python):
    shutil.rmtree(python.parents[1])


def _break(python):
    """Still an executable file, but its interpreter is gone: exec fails (127) and nothing runs."""
    python.unlink()
    python.write_text("#!/nonexistent/python3\n")
    python.chmod(0o755)


@pytest.mark.parametrize("lose", [_remove, _break], ids=["removed", "cannot-start"])
def test_an_interpreter_the_box_lost_falls_back_to_the_shim_and_is_relearned(rig, reuse, homes, lose):
    b = ShimBox(rig, f"py-lost-{lose.__name__[1:]}", homes)
    _open_master(b.spec)
    _ask(b.spec)
    new = b.install("b")
    lose(b.home / "versions" / "a" / "bin" / "python3")
    assert _ask(b.spec)["exists"] is True, "the call itself succeeds, through the shim"
    assert b.shim_runs() == 2 and _remembered(b.spec) == new
    _ask(b.spec)
    assert b.shim_runs() == 2


def test_a_new_master_to_the_same_box_keeps_its_interpreter_and_each_box_its_own(rig, reuse, homes):
    one, two = ShimBox(rig, "py-one", homes, "a"), ShimBox(rig, "py-two", homes, "c")
    for b in (one, two):
        _open_master(b.spec)
        _ask(b.spec)
    assert _remembered(one.spec).endswith("/py-one/versions/a/bin/python3")
    assert _remembered(two.spec).endswith("/py-two/versions/c/bin/python3")
    # the master goes (an expiry, a disconnect): its successor talks to the same box, same host key
    assert mux.close(_socket(one.spec))
    _open_master(one.spec)
    assert _remembered(one.spec).endswith("/py-one/versions/a/bin/python3")
    _ask(one.spec)
    assert one.shim_runs() == 1 and two.shim_runs() == 1


def test_a_reprovisioned_box_starts_from_the_shim(rig, reuse, homes, tmp_path):
    """A new machine at the same address has a new host key, which the user accepts only after
    removing the old one: what was learned under the old key is not offered to it."""
    b = ShimBox(rig, "py-reprovisioned", homes)
    _open_master(b.spec)
    _ask(b.spec)
    assert mux.close(_socket(b.spec))
    b.box.stop()
    b.box.host_key = keygen(tmp_path / "new_host_key")
    b.box.start()
    rig.forget_port(b.box.port)  # ssh-keygen -R, as the refusal advises
    _open_master(b.spec)
    assert _remembered(b.spec) is None
    _ask(b.spec)
    assert b.shim_runs() == 2


def test_jobs_start_through_the_shim_so_they_inherit_what_it_sets(rig, reuse, homes, cli, tmp_path):
    b = ShimBox(rig, "py-jobs", homes)
    _open_master(b.spec)
    _ask(b.spec)
    out = tmp_path / "version-seen"
    r = cli("launch", "--host", b.spec, "--jobs-dir", str(tmp_path / "jobs"), "--cmd",
            f'echo "$SHIM_VERSION" > {out}', "--json", env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 20
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert out.read_text() == "a\n"


def test_a_path_with_shell_syntax_is_quoted_never_run(rig, reuse, homes):
    b = ShimBox(rig, "py-odd", homes)
    odd = "v $(touch PWNED); 'x"
    b.install(odd)
    _open_master(b.spec)
    _ask(b.spec)
    assert _remembered(b.spec) == str(b.home / "versions" / odd / "bin" / "python3")
    assert _ask(b.spec, root=b.home)["exists"] is True
    assert b.shim_runs() == 1
    assert not list(b.home.rglob("PWNED")) and not os.path.exists("PWNED")


@pytest.mark.parametrize("path", ["python3", "./python3", "/usr/../bin/python3", "/usr/bin/./python3", "/usr/bin/",
                                  "/usr/bin/python3\n; rm -rf ~", "/usr/bin/py\x1bthon", "", None, 42,
                                  "/" + "a" * 2000])
def test_an_interpreter_path_that_is_not_a_plain_absolute_path_is_refused(path):
    assert not wrap.valid_python(path)
    line = wrap.python_line(10, python=path)
    assert "if [ -x" not in line


def test_the_bootstraps_line_is_taken_out_of_stderr_and_only_a_valid_path_kept():
    assert wrap.took_python(b"rc noise\ngpuops:python=/opt/py/bin/python3\nboom\n") == (
        "/opt/py/bin/python3", b"rc noise\nboom\n")
    assert wrap.took_python(b"gpuops:python=relative/python3\n") == (None, b"")
    assert wrap.took_python(b"gpuops:python=/p/\xff\n") == (None, b"")
    assert wrap.took_python(b"just an error\n") == (None, b"just an error\n")


def test_a_remembered_file_for_another_master_or_malformed_is_ignored(tmp_path):
    import socket as sk

    path = str(tmp_path / "s")
    with sk.socket(sk.AF_UNIX) as s:
        s.bind(path)
        master = mux.identity(path)
        mux.write_python(path, "/opt/py/bin/python3", master)
        assert mux.read_python(path) == ("/opt/py/bin/python3", master)
        mux.write_python(path, "/opt/other/python3", [0, 0, 0])
        assert mux.read_python(path)[0] == "/opt/py/bin/python3", "a call that began on another master writes nothing"
        for doc in ({"master": [0, 0, 0], "python": "/opt/py/bin/python3"}, {"master": master, "python": "py"}, [],
                    {"master": [0, 0, 0], "python": "/opt/py/bin/python3", "keys": []}):
            with open(path + mux.PYTHON_SUFFIX, "w") as f:
                json.dump(doc, f)
            assert mux.read_python(path, keys=lambda: set()) == (None, master)
        with open(path + mux.PYTHON_SUFFIX, "w") as f:
            json.dump({"master": [0, 0, 0], "python": "/opt/py/bin/python3", "keys": ["SHA256:a", "SHA256:b"]}, f)
        assert mux.read_python(path, keys=lambda: {"SHA256:b", "SHA256:a"})[0] == "/opt/py/bin/python3", \
            "another master to a box trusted under the same keys"
        assert mux.read_python(path, keys=lambda: {"SHA256:a"})[0] is None
        assert mux.read_python(path)[0] is None
