"""Hash files into the box's digest cache as a push lands them, so verifying afterwards finds
their digests ready instead of reading the whole payload again after the transfer.

Reads one JSON request from stdin and prints one JSON document when done:

    request  {"root": PATH, "expect": {REL: SIZE}, "since_ns": BOX CLOCK}
    answer   {"root": ABS, "hashing": {"hashed_files", "hashed_bytes", "cache_hits", "cache_saved"},
              "left": N}

Both engines write a file under a temporary name and rename it into place complete, so a
regular file at its final name, of the expected size, changed (ctime) after `since_ns` (the box's
clock when the push looked at the destination) is one this transfer wrote. It is hashed once its
ctime is old enough for the digest to be stored (see digestcache), and the digest goes into the
cache keyed on its stat, exactly as any other hash would. Nothing here decides a verification:
the verifying manifest that follows still stats every file sent, and reuses a digest only for a
stat that is exactly unchanged; a file not hashed here is simply hashed there.

It ends when every expected file is hashed, when a verifying manifest asks it to stop (it first
saves what it has, see digestcache.settle_follower), when the client is gone (a heartbeat to
stdout fails), or at the deadline the caller's remote timeout sets.
"""

import os
import stat
import sys
import time

from . import digestcache
from .manifest import Abandoned, fs_name, serve, sha256_file

POLL_S = 0.05
NICENESS = 10
BEAT_S = 0.5
STOP_CHECK_S = 0.02


class Follower:
    def __init__(self, request) -> None:
        self.root = os.path.abspath(os.path.expanduser(request["root"]))
        self.root_b = fs_name(self.root)
        self.pending = dict(request.get("expect") or {})
        # A coarse filesystem clock can stamp a file written just after since_ns a little before
        # it; a file changed shortly before is counted in too, which only costs a hash.
        self.since_ns = int(request.get("since_ns") or 0) - digestcache.COARSE_STORE_AFTER_NS
        self.cache = digestcache.DigestCache(self.root, digestcache.file_for(self.root, digestcache.directory()),
                                             follower=True)
        self.keys = {}
        path = self.cache.path
        self.marker = path + digestcache.FOLLOW_SUFFIX
        self.stop_file = path + digestcache.STOP_SUFFIX
        self._beat_at = self._checked_at = 0.0
        self.stopped = False

    def beat(self) -> bool:
        """Keep the marker fresh and tell the client we are alive; False once asked to stop or
        once the client is gone."""
        now = time.time()
        if now - self._beat_at >= BEAT_S:
            self._beat_at = now
            try:
                os.utime(self.marker, None)
                sys.stdout.write(" ")
                sys.stdout.flush()
            except (OSError, ValueError):
                self.stopped = True
        if now - self._checked_at >= STOP_CHECK_S:
            self._checked_at = now
            if os.path.exists(self.stop_file):
                self.stopped = True
        return not self.stopped

    def landed(self, rel, size: int):
        """The stat key of `rel` when this transfer has put it in place and it can be hashed for
        keeps; None while it is missing, still the old file, or too fresh to store."""
        try:
            st = os.lstat(os.path.join(self.root_b, fs_name(rel)))
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size != size or st.st_ctime_ns < self.since_ns:
            return None
        key = digestcache.stat_key(st)
        return key if digestcache.storable(key, digestcache.now_ns()) else None

    def hash_one(self, rel, key) -> None:
        path = os.path.join(self.root_b, fs_name(rel))
        self.keys[rel] = key
        if self.cache.lookup(rel, key) is not None:
            return
        started = digestcache.now_ns()
        try:
            digest, nread = sha256_file(path, tick=self.beat)
            after = digestcache.stat_key(os.lstat(path))
        except (Abandoned, IOError, OSError):
            return
        self.cache.record(rel, key, digest, nread, started, after)

    def run(self) -> None:
        while self.pending and self.beat():
            looking = 0.0
            for rel, size in list(self.pending.items()):
                if not self.beat():
                    break
                started = time.time()
                key = self.landed(rel, size)
                looking += time.time() - started
                if key is not None:
                    self.hash_one(rel, key)
                    del self.pending[rel]
            if self.pending and not self.stopped:
                # Looking at many pending files costs CPU the transfer needs: pause longer
                # after a long look, so looking stays a small share of one core.
                time.sleep(max(POLL_S, 4 * looking))

    def main(self) -> dict:
        # A head start, never a competitor: the transfer writing these files (and any job on the
        # box) gets the CPU first; what is left unhashed when verification starts, it hashes.
        try:
            os.nice(NICENESS)
        except OSError:
            pass
        try:
            os.makedirs(os.path.dirname(self.marker), mode=0o700, exist_ok=True)
            if os.path.exists(self.stop_file):  # left by a follower that died
                os.unlink(self.stop_file)
            open(self.marker, "w").close()
            self.beat()  # the first heartbeat: watching now, verification may ask us to stop
        except OSError:
            return {"root": self.root, "hashing": dict(self.cache.counters(), cache_saved=False),
                    "left": len(self.pending)}
        try:
            self.run()
            saved = self.cache.save(self.keys, looked_at=list(self.keys))
        finally:
            for path in (self.marker, self.stop_file):
                try:
                    os.unlink(path)
                except OSError:
                    pass
        return {"root": self.root, "hashing": dict(self.cache.counters(), cache_saved=saved),
                "left": len(self.pending)}


def main(argv):
    return serve(lambda request: Follower(request).main())
