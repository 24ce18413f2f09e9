"""The on-box manifest: one round trip with entries, digests and free space; any name survives;
it runs on the oldest python3 a box may have."""

import glob
import hashlib
import json
import os
import time

import pytest

from gpuops.onbox.sync import digestcache, manifest
from gpuops.remote.local import LocalTarget


def _tree(root):
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"hello")
    (root / "big").write_bytes(os.urandom((1 << 20) + 17))  # more than one read chunk
    (root / "zero").write_bytes(b"")
    (root / "ln").symlink_to("d/f")
    os.mkfifo(root / "fifo")
    with open(os.path.join(os.fsencode(root), b"latin1-\xe9"), "wb") as f:  # not valid UTF-8
        f.write(b"x")
    return root


def test_entries_kinds_and_digests(tmp_path):
    root = _tree(tmp_path / "t")
    doc = manifest.build({"root": str(root), "hash": "all", "space": True})
    by = {e.rel: e for e in doc["entries"]}
    assert by["d"].kind == "d" and by["ln"] == ("ln", "l", 0, None, "d/f") and by["fifo"].kind == "o"
    assert by["d/f"] == manifest.Entry("d/f", "f", 5, hashlib.sha256(b"hello").hexdigest(), None)
    assert by["big"].sha256 == hashlib.sha256((root / "big").read_bytes()).hexdigest()
    assert (by["zero"].size, by["zero"].sha256) == (0, hashlib.sha256(b"").hexdigest())
    odd = [rel for rel in by if rel.startswith("latin1-")][0]
    assert odd.encode("utf-8", "surrogateescape") == b"latin1-\xe9"
    # a JSON list on the wire, the same Entry after it
    assert [manifest.Entry(*e) for e in json.loads(json.dumps(doc))["entries"]] == doc["entries"]
    assert doc["space"]["free_bytes"] > 0 and doc["errors"] == [] and doc["rsync"]


def test_want_hashes_only_same_size_files_and_paths_skip_the_walk(tmp_path):
    root = _tree(tmp_path / "t")
    doc = manifest.build({"root": str(root), "hash": "want", "want": {"d/f": 5, "big": 3}})
    digests = {e[0]: e[3] for e in doc["entries"] if e[1] == "f"}
    assert digests["d/f"] and digests["big"] is None and digests["zero"] is None
    doc = manifest.build({"root": str(root), "paths": ["d/f", "gone"], "hash": "all"})
    assert [e[0] for e in doc["entries"]] == ["d/f"]


def test_missing_root_is_measured_at_its_nearest_parent(tmp_path):
    doc = manifest.build({"root": str(tmp_path / "a" / "b"), "space": True})
    assert doc["exists"] is False and doc["entries"] == []
    assert doc["space"]["measured_at"] == str(tmp_path) and doc["space"]["free_inodes"] > 0


def test_a_path_that_cannot_be_looked_at_is_an_error_not_a_crash(tmp_path):
    root = _tree(tmp_path / "t")
    doc = manifest.build({"root": str(root), "paths": ["d/f/below-a-file", "zero"], "hash": "all"})
    assert [e[0] for e in doc["entries"]] == ["zero"]
    assert doc["errors"] == [["d/f/below-a-file", "Not a directory"]]


def _python36():
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6")))
    return found[0] if found else None


@pytest.mark.skipif(_python36() is None, reason="no python3.6 on this machine to play an old box")
def test_runs_shipped_on_python36(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t")
    bin_dir = tmp_path / "py36"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(_python36())
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    request = {"root": str(root), "rules_before": [".git"], "ignore_file": ".gpuopsignore",
               "rules_after": ["d/"], "hash": "all", "space": True}
    (root / ".gpuopsignore").write_text("zero\n")
    doc = LocalTarget().run_onbox("manifest", stdin=json.dumps(request).encode(), timeout_s=60)
    names = [e[0] for e in doc["entries"]]
    assert "zero" not in names and "d" not in names and "big" in names and ".gpuopsignore" in names
    assert [manifest.Entry(*e) for e in doc["entries"]] == manifest.build(request)["entries"]

    # The digest cache and the landing follower run there too.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    time.sleep(digestcache.STORE_AFTER_NS / 1e9 + 0.05)
    cached = {**request, "cache": "use"}
    first = LocalTarget().run_onbox("manifest", stdin=json.dumps(cached).encode(), timeout_s=60)
    again = LocalTarget().run_onbox("manifest", stdin=json.dumps(cached).encode(), timeout_s=60)
    files = sum(1 for e in doc["entries"] if e[1] == "f")
    assert first["hashing"]["hashed_files"] == again["hashing"]["cache_hits"] == files == 3
    assert again["hashing"]["hashed_files"] == 0 and again["entries"] == doc["entries"]
    follow = {"root": str(root), "expect": {"big": (1 << 20) + 17}, "since_ns": 0}
    done = LocalTarget().run_onbox("landing", stdin=json.dumps(follow).encode(), timeout_s=60)
    assert done["left"] == 0 and done["hashing"]["cache_hits"] == 1
