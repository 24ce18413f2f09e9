"""Digest caches on both ends of a real sync (sshd, rsync): a re-sync reads no file, and any stat
change on either end (touch -m, a rewrite with mtime restored, a replacement by rename) makes
exactly that file be read again, so tampering is still caught. `--rehash` (through the CLI) reads
everything. The operations run in-process, to keep the test quick; the CLI is the same call."""

import os

from gpuops.ops import push, verify
from gpuops.ops.sync import Options
from gpuops.remote.targets import target_for
from tests.sync.conftest import run_cli
from tests.sync.test_digestcache import wait_storable

NAMES = ["a", "b", "c", "d", "e"]


def _hashing(doc):
    h = doc["data"]["hashing"]
    return {side: (h[side]["hashed_files"], h[side]["cache_hits"]) for side in ("local", "remote")}


def _rewrite_keeping_mtime(path, data):
    st = os.stat(path)
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _op(fn, box, *roots):
    target = target_for(box.spec)
    try:
        doc = fn(target, *map(str, roots), Options())
    finally:
        target.close()
    return doc


def test_caches_on_both_ends_are_used_and_never_trusted_after_a_stat_change(rsync_box, sync_env, tmp_path,
                                                                             monkeypatch):
    for name in ("GPUOPS_SSH_CONFIG", "GPUOPS_STATE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, sync_env[name])
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    for name in NAMES:
        (src / name).write_bytes(os.urandom(10_000))
    wait_storable(*(src / n for n in NAMES))

    doc = _op(push.push, rsync_box, src, dst)
    assert doc["ok"], doc["summary"]
    # Each file read once per end: locally before sending, on the box as it landed or after.
    assert _hashing(doc)["local"] == (5, 0) and _hashing(doc)["remote"][0] == 5
    wait_storable(*(dst / n for n in NAMES))
    _op(verify.verify, rsync_box, src, dst)  # stores any digest the push read while its file was too fresh

    doc = _op(push.push, rsync_box, src, dst)
    assert doc["ok"] and doc["data"]["sent_paths"] == 0 and doc["data"]["verified"]
    assert _hashing(doc) == {"local": (0, 5), "remote": (0, 5)}  # not one file read

    st = os.stat(src / "a")
    os.utime(src / "a", ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))          # local: touch -m only
    _rewrite_keeping_mtime(src / "d", os.urandom(10_000))                      # local: new bytes, old mtime
    _rewrite_keeping_mtime(dst / "b", os.urandom(10_000))                      # box: new bytes, old mtime
    part = dst / ".c.tmp"                                                      # box: replaced by rename
    part.write_bytes(os.urandom(10_000))
    os.utime(part, ns=(os.stat(dst / "c").st_atime_ns, os.stat(dst / "c").st_mtime_ns))
    os.replace(part, dst / "c")

    doc = _op(verify.verify, rsync_box, src, dst)
    assert not doc["ok"]
    assert sorted(m["path"] for m in doc["data"]["mismatches"]) == ["b", "c", "d"]
    assert _hashing(doc) == {"local": (2, 3), "remote": (2, 3)}  # exactly the changed files were read

    doc = _op(push.push, rsync_box, src, dst)
    assert doc["ok"] and doc["data"]["verified"] and doc["data"]["sent_paths"] == 3
    assert all((dst / n).read_bytes() == (src / n).read_bytes() for n in NAMES)

    proc, doc = run_cli(sync_env, "verify", "--host", rsync_box.spec, "--local", str(src), "--remote", str(dst),
                        "--rehash")
    assert proc.returncode == 0
    assert _hashing(doc) == {"local": (5, 0), "remote": (5, 0)}
