"""Fixtures for the sync tests: real sshd boxes (one without rsync), a wire meter, odd trees.

Both ends keep digest caches (gpuops.onbox.sync.digestcache): the boxes' go to a session directory
(XDG_CACHE_HOME through sshd's SetEnv), this machine's to each test's own directory, so no test
reads or writes ~/.cache."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.sync.wiremeter import WireMeter

ROOT = Path(__file__).resolve().parents[2]

# Names that break naive quoting: spaces, both quotes, command substitution, a leading dash,
# a glob, a backslash, a newline, non-ASCII.
ODD_NAMES = ["with space", "it's", 'say "hi"', "$(touch pwned)", "-rf", "star*", "back\\slash", "new\nline",
             "ünïcödé ✓"]


def make_tree(root: Path) -> Path:
    """Nested dirs, an empty dir, a symlink, a 0-byte file and odd names, files and dirs alike."""
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "empty dir").mkdir()
    (root / "a" / "b" / "c" / "deep.txt").write_text("deep\n")
    (root / "zero").write_bytes(b"")
    (root / "bin.dat").write_bytes(os.urandom(70_000))
    for i, name in enumerate(ODD_NAMES):
        (root / name).write_text(f"file {i}\n")
        (root / "a" / name).mkdir()
        (root / "a" / name / name).write_text(f"nested {i}\n")
    (root / "link").symlink_to("a/b/c/deep.txt")
    (root / "dangling").symlink_to("nowhere/at all")
    (root / "script.sh").write_text("#!/bin/sh\necho ok\n")
    os.chmod(root / "script.sh", 0o755)
    return root


def snapshot(root: Path, skip=()) -> dict:
    """{rel: (kind, size, sha256 | link target, exec bit)} of everything under root."""
    out = {}
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, base).decode("utf-8", "surrogateescape")
            if rel in skip:
                continue
            if os.path.islink(full):
                out[rel] = ("l", 0, os.readlink(full), False)
            elif os.path.isdir(full):
                out[rel] = ("d", 0, None, False)
            else:
                data = open(full, "rb").read()
                out[rel] = ("f", len(data), hashlib.sha256(data).hexdigest(), bool(os.stat(full).st_mode & 0o100))
    return out


@pytest.fixture
def sync_env(rig, tmp_path):
    """Environment for the CLI: the rig's ssh_config, a private pull index and digest cache."""
    return {**rig.env(), "GPUOPS_STATE_DIR": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}


def run_cli(env, *args, timeout=180):
    """(CompletedProcess, envelope or None) for `gpuops ARGS --json`."""
    proc = subprocess.run([sys.executable, "-m", "gpuops", *args, "--json"], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = None
    return proc, doc


@pytest.fixture(scope="session")
def no_rsync_path(tmp_path_factory):
    """A PATH directory holding everything /usr/bin has except rsync."""
    d = tmp_path_factory.mktemp("no-rsync-bin")
    for name in os.listdir("/usr/bin"):
        if name != "rsync":
            (d / name).symlink_to(f"/usr/bin/{name}")
    return d


@pytest.fixture(scope="session")
def sftp_box(rig, no_rsync_path, box_cache):
    """A box whose PATH has no rsync: push and pull must fall back to SFTP."""
    box = rig.box("norsync", env={"PATH": str(no_rsync_path), "XDG_CACHE_HOME": str(box_cache)})
    out = subprocess.run(["ssh", "-F", str(rig.ssh_config), "-o", "StrictHostKeyChecking=accept-new", box.spec,
                          "command -v rsync || echo none"], capture_output=True, text=True, timeout=30).stdout
    assert out.strip() == "none", f"the no-rsync box still finds rsync: {out!r}"
    return box


@pytest.fixture
def metered(rig, fresh_logins):
    """metered(box, rate) -> (alias, WireMeter): an ssh_config alias whose traffic is counted. Calls
    make their own connections: a kept master would arm the resident helper over the metered link,
    and its code would count as the transfer's bytes (and, on a slow link, hold the transfer back)."""
    meters = []

    def make(box, rate=None, name=None):
        meter = WireMeter(box.port, rate)
        meters.append(meter)
        alias = name or f"{box.name}-metered-{meter.port}"
        rig.alias(alias, port=meter.port)
        return alias, meter

    yield make
    for m in meters:
        m.close()


def _session_processes(box):
    """Every process under the box's sshd listener: each connection's sshd and what it runs."""
    found, parents = [], [box.proc.pid]
    while parents:
        out = subprocess.run(["pgrep", "-P", ",".join(map(str, parents))], capture_output=True, text=True).stdout
        parents = [int(p) for p in out.split()]
        found += parents
    return found


def freeze_sessions(box, patience_s=2.0):
    """SIGSTOP every process of the box's live connections (each connection's sshd and its
    children): the link stays open but nothing moves. Looks again for up to `patience_s` when
    none is found at first (a connection between its fork and its first child)."""
    deadline = time.monotonic() + patience_s
    pids = _session_processes(box)
    while not pids and time.monotonic() < deadline:
        time.sleep(0.02)
        pids = _session_processes(box)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
    return pids


def cut_when(path_glob_dir: Path, pattern, threshold, box, timeout=60, how=None, wire=None):
    """Start a thread that kills the box's live connections (or does `how(box)`) once a file
    matching `pattern` under `path_glob_dir` reaches `threshold` bytes; returns (thread, record).
    `wire()`, when given, is read at that moment: the bytes the meter had passed by then."""
    how = how or (lambda b: b.kill_session_children())
    record = {"cut_at": None, "killed": [], "wire_at_cut": None}

    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in path_glob_dir.rglob(pattern) if path_glob_dir.exists() else ():
                try:
                    size = p.stat().st_size
                except OSError:
                    continue
                if size >= threshold:
                    record["cut_at"] = size
                    record["wire_at_cut"] = wire() if wire else None
                    record["killed"] = how(box)
                    return
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t, record


def mount_tmpfs(path: Path, size: str, inodes: int):
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},nr_inodes={inodes}", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root / CAP_SYS_ADMIN): {r.stderr.strip()}")


@pytest.fixture
def small_fs(tmp_path):
    """A 2 MiB tmpfs with 64 inodes, unmounted afterwards."""
    where = tmp_path / "small"
    mount_tmpfs(where, "2m", 64)
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def clean(path: Path):
    shutil.rmtree(path, ignore_errors=True)
