"""The digest cache on its own (in-process, the code both ends run): reused only while a file's
whole stat is unchanged, never trusted after touch -m, a rewrite with mtime restored, or a
replacement by rename; racily fresh files are not stored; bad cache files are ignored; entries
are bounded by the walk; the landing follower fills it and stops when verification asks."""

import hashlib
import json
import os
import threading
import time

import pytest

from gpuops.onbox.sync import digestcache, landing, manifest


def wait_storable(*paths):
    """Sleep until these files' digests may be stored (their ctime is safely in the past)."""
    for p in paths:
        ctime = os.lstat(p).st_ctime_ns
        slack = digestcache.STORE_AFTER_NS if ctime % 10 ** 9 else digestcache.COARSE_STORE_AFTER_NS
        delay = (ctime + slack) / 1e9 - time.time() + 0.02
        if delay > 0:
            time.sleep(delay)


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def _tree(root, n=4, size=5000):
    root.mkdir()
    (root / "sub").mkdir()
    for i in range(n):
        (root / ("sub" if i % 2 else ".") / f"f{i}").write_bytes(os.urandom(size))
    return root


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


def _build(root, cache="use", **request):
    doc = manifest.build({"root": str(root), "hash": "all", "cache": cache, **request})
    digests = {e[0]: e[3] for e in doc["entries"] if e[1] == "f"}
    return doc["hashing"], digests


def _truth(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in _files(root)}


def test_unchanged_files_are_not_read_again_and_the_file_is_private(tmp_path, cache_home):
    root = _tree(tmp_path / "t")
    wait_storable(*_files(root))
    first, digests = _build(root)
    assert (first["hashed_files"], first["cache_hits"], first["cache_saved"]) == (4, 0, True)
    assert first["hashed_bytes"] == 4 * 5000 and digests == _truth(root)
    again, digests = _build(root)
    assert (again["hashed_files"], again["hashed_bytes"], again["cache_hits"]) == (0, 0, 4)
    assert again["cache_saved"] is False  # nothing changed, nothing rewritten
    assert digests == _truth(root)
    path = digestcache.file_for(str(root), str(cache_home / "gpuops" / "digests"))
    assert os.path.exists(path) and os.stat(path).st_mode & 0o777 == 0o600


def _same_size_rewrite(path, keep_mtime=True):
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    with open(path, "r+b") as f:
        f.write(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_any_stat_change_means_the_file_is_read_again(tmp_path, cache_home):
    root = _tree(tmp_path / "t")
    wait_storable(*_files(root))
    _build(root)
    touched, rewritten, replaced, untouched = root / "f0", root / "sub" / "f1", root / "f2", root / "sub" / "f3"

    # touch -m: same bytes, same size, another mtime.
    st = os.stat(touched)
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))
    # A rewrite of the same size with the old mtime put back: only ctime tells.
    before = os.stat(rewritten)
    _same_size_rewrite(rewritten)
    after = os.stat(rewritten)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert after.st_ctime_ns != before.st_ctime_ns
    # Replaced by rename (an editor's save): same size and mtime, another inode.
    st = os.stat(replaced)
    tmp = root / ".f2.new"
    tmp.write_bytes(os.urandom(5000))
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, replaced)
    assert os.stat(replaced).st_ino != st.st_ino

    counts, digests = _build(root)
    assert (counts["hashed_files"], counts["cache_hits"]) == (3, 1)
    assert digests == _truth(root)
    assert hashlib.sha256(untouched.read_bytes()).hexdigest() == digests["sub/f3"]


def test_a_digest_is_not_stored_while_the_file_is_racily_fresh(tmp_path, cache_home):
    root = _tree(tmp_path / "t", n=1)
    first, _ = _build(root)  # hashed within the same instant it was written
    assert first["hashed_files"] == 1
    again, _ = _build(root)
    assert again["hashed_files"] == 1 and again["cache_hits"] == 0  # not trusted, read again
    wait_storable(root / "f0")
    _build(root)
    last, _ = _build(root)
    assert last["cache_hits"] == 1


def test_rehash_ignores_the_cache_but_refreshes_it(tmp_path, cache_home):
    root = _tree(tmp_path / "t")
    wait_storable(*_files(root))
    _build(root)
    counts, digests = _build(root, cache="rehash")
    assert (counts["hashed_files"], counts["cache_hits"]) == (4, 0) and digests == _truth(root)
    assert _build(root)[0]["cache_hits"] == 4


@pytest.mark.parametrize("content", [b"{not json", json.dumps({"schema": 999, "entries": {}}).encode(),
                                     json.dumps({"schema": digestcache.SCHEMA, "root": "/elsewhere",
                                                 "entries": {"f0": [1, 2, 3, 4, 5, "x" * 64]}}).encode(),
                                     json.dumps({"schema": digestcache.SCHEMA, "entries": ["odd"]}).encode()])
def test_an_unreadable_or_foreign_cache_file_is_ignored(tmp_path, cache_home, content):
    root = _tree(tmp_path / "t")
    wait_storable(*_files(root))
    path = digestcache.file_for(str(root), str(cache_home / "gpuops" / "digests"))
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(content)
    counts, digests = _build(root)
    assert (counts["hashed_files"], counts["cache_hits"], counts["cache_saved"]) == (4, 0, True)
    assert digests == _truth(root)
    assert json.load(open(path))["schema"] == digestcache.SCHEMA


def test_entries_are_bounded_by_the_walk_and_kept_by_a_partial_look(tmp_path, cache_home):
    root = _tree(tmp_path / "t")
    wait_storable(*_files(root))
    _build(root)
    path = digestcache.file_for(str(root), str(cache_home / "gpuops" / "digests"))
    assert sorted(json.load(open(path))["entries"]) == ["f0", "f2", "sub/f1", "sub/f3"]
    # Looking at some paths (how a sync re-checks what it sent) keeps the others.
    (root / "f0").unlink()
    counts, _ = _build(root, paths=["f0", "f2"])
    assert counts["cache_hits"] == 1
    assert sorted(json.load(open(path))["entries"]) == ["f2", "sub/f1", "sub/f3"]
    # A walk keeps only what it saw: an excluded file's entry goes.
    _build(root, rules_after=["sub/f3"])
    assert sorted(json.load(open(path))["entries"]) == ["f2", "sub/f1"]


def test_cache_off_reads_everything_and_writes_nothing(tmp_path, cache_home):
    root = _tree(tmp_path / "t")
    wait_storable(*_files(root))
    for _ in range(2):
        counts, _ = _build(root, cache=None)
        assert counts == {"hashed_files": 4, "hashed_bytes": 20000, "cache_hits": 0, "cache_saved": False}
    assert not cache_home.exists()


def _follow(root, expect, since_ns):
    out = {}
    follower = landing.Follower({"root": str(root), "expect": expect, "since_ns": since_ns})
    t = threading.Thread(target=lambda: out.update(follower.main()), daemon=True)
    t.start()
    return t, out


def test_the_follower_hashes_files_as_they_land_and_verification_reuses_them(tmp_path, cache_home):
    root = tmp_path / "dst"
    root.mkdir()
    (root / "old").write_bytes(b"o" * 3000)  # same size as what lands, but not written since
    since = digestcache.now_ns()
    wait_storable(root / "old")
    payload = {f"n{i}": os.urandom(3000) for i in range(3)}
    t, out = _follow(root, {**{k: 3000 for k in payload}, "old": 3000}, since + digestcache.COARSE_STORE_AFTER_NS)
    for name, data in payload.items():  # land like the engines do: a temporary name, then a rename
        part = root / f".{name}.part"
        part.write_bytes(data)
        os.replace(part, root / name)
    wait_storable(*(root / n for n in payload))
    time.sleep(0.3)  # the follower polls every 50 ms
    counts, digests = _build(root, paths=sorted(payload) + ["old"])  # stops the follower first
    t.join(5)
    assert not t.is_alive()
    assert out["hashing"]["hashed_files"] == 3 and out["left"] == 1  # "old" never landed
    assert counts["cache_hits"] == 3 and counts["hashed_files"] == 1
    assert digests == {**{k: hashlib.sha256(v).hexdigest() for k, v in payload.items()},
                       "old": hashlib.sha256(b"o" * 3000).hexdigest()}


def test_verification_stops_a_waiting_follower_promptly(tmp_path, cache_home):
    root = tmp_path / "dst"
    root.mkdir()
    t, out = _follow(root, {"never": 10}, digestcache.now_ns())
    time.sleep(0.2)
    start = time.monotonic()
    _build(root)
    assert time.monotonic() - start < 1.5
    t.join(5)
    assert not t.is_alive() and out["left"] == 1
    where = os.path.dirname(digestcache.file_for(str(root), str(cache_home / "gpuops" / "digests")))
    assert [n for n in os.listdir(where) if not n.endswith(".json")] == []  # no marker left behind
