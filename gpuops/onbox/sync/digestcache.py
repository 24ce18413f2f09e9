"""A per-root cache of sha256 digests, keyed on each file's full stat, so unchanged files are not
read again. Used on both ends of a sync (locally, and on the box by the manifest a sync verb runs).

A digest is reused only when the file's (relative path, size, mtime_ns, ctime_ns, inode, device)
are all exactly what they were when it was hashed: the stat tuple git's index and borg's files
cache rely on. Why a hit means the content is unchanged:

  * Every operation that can change a file's bytes (write, truncate, a shared-mmap write fault,
    fallocate) sets its ctime to the current time, and user space cannot set ctime at all:
    `touch`/utime() restoring an old mtime sets ctime to now. So a rewrite that restores size and
    mtime still misses.
  * Replacing a file (rename over it, delete and recreate, or an editor's save) gives a different
    inode, and even a recycled inode number comes with a fresh ctime.
  * The racy case: a change within the same timestamp tick as the previous one leaves ctime
    unchanged. So a digest is stored only when the file's ctime lies clearly before the moment
    its read began (STORE_AFTER_NS when the ctime carries sub-second digits, COARSE_STORE_AFTER_NS
    on whole-second or two-second filesystems), a distance which the coarse kernel clock,
    the timestamp granularity and a change during the read cannot bridge. Any later change gets
    a later ctime, hence a different key. The stat is taken again after reading, and a file that
    changed meanwhile is not stored.

What this cannot see, like git and rsync: a clock set backwards by root, a filesystem that does not
keep ctime (ctime 0 is never stored), raw writes to the block device. `--rehash` ignores the
caches for a paranoid full re-read, and stores what it reads.

One JSON file per root directory under $XDG_CACHE_HOME/gpuops/digests/ (default ~/.cache), named
by a hash of the root's absolute path, replaced atomically (temporary file + rename), holding only
entries seen in the latest walk of that root. An unreadable file or another schema version is
ignored (everything is hashed again). Cache files untouched for MAX_AGE_S are removed when another
is saved. Stdlib only, python3 >= 3.6, like the rest of gpuops.onbox.
"""

import hashlib
import json
import os
import tempfile
import threading
import time

SCHEMA = 1
STORE_AFTER_NS = 100 * 1000 * 1000
COARSE_STORE_AFTER_NS = 2 * 1000 * 1000 * 1000 + STORE_AFTER_NS
MAX_AGE_S = 30 * 86400
_BILLION = 1000 * 1000 * 1000

# Request modes: "use" reads and writes the cache, "rehash" only writes what it hashed afresh.
MODES = ("use", "rehash")


def directory(environ=None):
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuops", "digests")


def file_for(root, where):
    """The cache file of absolute root path `root` inside directory `where`."""
    name = hashlib.sha256(os.fsencode(root)).hexdigest()[:40]
    return os.path.join(where, name + ".json")


def stat_key(st) -> list:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def now_ns():
    return int(time.time() * _BILLION)


def storable(key, read_started_ns):
    """Whether a digest read from a file with this key, from `read_started_ns` on, may be kept."""
    ctime = key[2]
    if ctime <= 0:
        return False
    # Only the kernel sets ctime, so whole-second values mean a whole-second filesystem (mtime
    # proves nothing: tar and rsync set it).
    return ctime < read_started_ns - (STORE_AFTER_NS if ctime % _BILLION else COARSE_STORE_AFTER_NS)


def _matches(entry, key):
    """Whether a cache entry [size, mtime_ns, ctime_ns, inode, device, sha256] is for exactly
    this stat key (and well formed: the file may have been written by anything)."""
    return isinstance(entry, list) and len(entry) == 6 and entry[:5] == key and isinstance(entry[5], str)


class DigestCache:
    """Digests of one root's files. lookup() before hashing, record() after; save() at the end.

    With `path` None nothing is read or written (the cache is off) and only the counters work."""

    def __init__(self, root, path=None, read=True, follower=False) -> None:
        self.root = root
        self.path = path
        if path and not follower:
            settle_follower(path)
        self._old = self._load() if (path and read) else {}
        self._new = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.hashed_files = 0
        self.hashed_bytes = 0

    @classmethod
    def for_request(cls, root, mode, environ=None):
        if mode not in MODES:
            return cls(root)
        return cls(root, file_for(root, directory(environ)), read=mode == "use")

    def _load(self):
        try:
            with open(self.path, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("root") != self.root:
            return {}
        entries = doc.get("entries")
        return entries if isinstance(entries, dict) else {}

    def lookup(self, rel, key):
        """The cached digest of `rel` when its stat is exactly `key`, else None."""
        if key is None:
            return None
        old = self._old.get(rel)
        if not _matches(old, key):
            return None
        with self._lock:
            self.hits += 1
            self._new[rel] = old
        return old[5]

    def record(self, rel, key, digest, nread, read_started_ns, key_after) -> None:
        """Count one file hashed; keep its digest when the file stood still and is old enough."""
        with self._lock:
            self.hashed_files += 1
            self.hashed_bytes += nread
            if (self.path and key is not None and key_after == key and nread == key[0]
                    and storable(key, read_started_ns)):
                self._new[rel] = key + [digest]

    def counters(self) -> dict:
        return {"hashed_files": self.hashed_files, "hashed_bytes": self.hashed_bytes, "cache_hits": self.hits}

    def save(self, keys, looked_at=None):
        """Write the cache. `keys` is {rel: stat key} of the files this run found. After a walk
        (`looked_at` None) they are the whole tree, so entries for anything else are dropped;
        after a look at some paths (`looked_at`), entries for other paths stay. Entries whose
        stat no longer matches go."""
        if not self.path:
            return False
        with self._lock:
            if looked_at is None:
                kept = {}
            else:
                gone = set(looked_at)
                kept = {r: e for r, e in self._old.items() if r not in gone and r not in keys}
            for rel, key in keys.items():
                entry = self._new.get(rel) or self._old.get(rel)
                if _matches(entry, key):
                    kept[rel] = entry
        if kept == self._old:
            return False
        return self._write(kept)

    def _write(self, entries) -> bool:
        where = os.path.dirname(self.path)
        try:
            os.makedirs(where, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=where)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"schema": SCHEMA, "root": self.root, "entries": entries}, f, separators=(",", ":"))
            os.replace(tmp, self.path)
        except (OSError, ValueError):
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        self._old = entries
        _expire(where, self.path)
        return True


# A follower (gpuops.onbox.sync.landing) hashes files into a root's cache while a transfer writes them.
# It keeps FOLLOW_SUFFIX beside the cache file fresh while it works; any other user of the cache
# first asks it to stop (STOP_SUFFIX), then waits for it to save and leave, so that each save
# starts from the previous one. A marker untouched for FOLLOWER_STALE_S belongs to a dead one.
FOLLOW_SUFFIX = ".follow"
STOP_SUFFIX = ".stop"
FOLLOWER_STALE_S = 2.0


def _fresh(path):
    try:
        return time.time() - os.stat(path).st_mtime < FOLLOWER_STALE_S
    except OSError:
        return False


def settle_follower(path) -> None:
    """Stop a live follower of this cache file and wait until it has saved and left."""
    marker = path + FOLLOW_SUFFIX
    if not _fresh(marker):
        return
    try:
        with open(path + STOP_SUFFIX, "w"):
            pass
    except OSError:
        return
    while _fresh(marker):
        time.sleep(0.01)


def _expire(where, keep) -> None:
    """Remove cache files of roots not synced for MAX_AGE_S (roots come and go; files should not
    pile up), and temporary files a killed writer left behind."""
    limit = time.time() - MAX_AGE_S
    try:
        names = os.listdir(where)
    except OSError:
        return
    for name in names:
        path = os.path.join(where, name)
        if path == keep or not name.endswith(".json"):
            continue
        try:
            if os.stat(path).st_mtime < (time.time() - 3600 if name.startswith(".tmp-") else limit):
                os.unlink(path)
        except OSError:
            pass
