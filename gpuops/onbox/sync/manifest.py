"""The on-box half of a checked sync: one round trip returns what is at a path, and what fits.

Reads one JSON request from stdin and prints one JSON document:

    request  {"root": PATH, "rules_before": [...], "ignore_file": NAME|null, "rules_after": [...],
              "hash": "all"|"none"|"want"|"cached", "want": {REL: SIZE}, "paths": [REL...]|null,
              "space": bool, "cache": "use"|"rehash"|null}
    answer   {"root": ABS, "exists", "is_dir", "entries": [Entry...],
              "errors": [[REL, MESSAGE]], "rules": [...], "space": {...}|null, "rsync": PATH|null,
              "now_ns": BOX CLOCK,
              "hashing": {"hashed_files", "hashed_bytes", "cache_hits", "cache_saved"}}

An Entry is (rel, kind, size, sha256, link), a list on the wire: kind is "f" file, "d" directory,
"l" symlink (link is its target, never followed), "o" anything else (sockets, fifos, devices:
never synced); sha256 is null until hashed. With "paths" the tree is not walked: only those
entries are looked at (absent ones are left out), which is how a sync re-checks just what it sent.
"want" hashes a file only when the other side has one of the same size, since a size difference
already decides it; "cached" reads no file at all and reports only the digests the cache holds for
unchanged files, for a caller that asks before it knows which files it will need. "space" measures free bytes and inodes where the root is, or at its nearest
existing parent when it does not exist yet (creating it is the sync's job, not this probe's).
"cache" reuses and updates the root's digest cache (see digestcache: a digest is reused only for a
file whose stat is exactly what it was when hashed); "rehash" reads every file and refreshes it.
This runs as part of a sync verb, so writing that cache file on the box is expected.

The same functions build the local manifest (imported, not shipped). Paths are walked as bytes and
decoded as UTF-8 with surrogateescape, so any name the filesystem holds survives the JSON round
trip and maps back to the same bytes.
"""

import hashlib
import json
import os
import shutil
import stat
import sys
import threading
from collections import namedtuple

from . import digestcache
from ..host import disk
from .ignorerules import Rules, read_lines

Entry = namedtuple("Entry", "rel kind size sha256 link")
KINDS = ("f", "d", "l", "o")

CHUNK = 1 << 20
_PARALLEL_BYTES = 32 << 20  # below this, thread start-up costs more than it saves


def fs_name(rel):
    return rel.encode("utf-8", "surrogateescape")


def rel_name(raw):
    return raw.decode("utf-8", "surrogateescape")


class Abandoned(Exception):
    """A hash given up half-way, because its `tick` said so."""


def sha256_file(path, tick=None):
    """(hex digest, bytes read) of one file; the size is what was hashed, even if it grew.

    Small files (most of a code tree) are read in one call; a buffer is only set up for big
    ones, since allocating it per file would cost more than hashing ten thousand small files.
    `tick`, when given, is called between chunks; returning False abandons the hash."""
    with open(path, "rb", buffering=0) as f:
        first = f.read(CHUNK)
        h = hashlib.sha256(first)
        n = len(first)
        if n < CHUNK:
            return h.hexdigest(), n
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while True:
            if tick is not None and not tick():
                raise Abandoned(path)
            got = f.readinto(buf)
            if not got:
                break
            h.update(view[:got])
            n += got
    return h.hexdigest(), n


def _entry(root_b, rel, st):
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        try:
            target = rel_name(os.readlink(os.path.join(root_b, fs_name(rel))))
        except OSError:
            target = None
        return Entry(rel, "l", 0, None, target)
    if stat.S_ISDIR(mode):
        return Entry(rel, "d", 0, None, None)
    if stat.S_ISREG(mode):
        return Entry(rel, "f", st.st_size, None, None)
    return Entry(rel, "o", 0, None, None)


def walk(root_b, rules, errors, keys=None):
    """Entries below root (not the root itself), pruned by `rules`, sorted by path; `keys`
    receives each regular file's stat key (see digestcache)."""
    entries = []
    stack = [b""]
    while stack:
        sub = stack.pop()
        here = os.path.join(root_b, sub) if sub else root_b
        try:
            it = list(os.scandir(here))
        except OSError as e:
            errors.append([rel_name(sub), e.strerror or str(e)])
            continue
        prefix = sub + b"/" if sub else b""
        for d in it:
            raw = prefix + d.name
            rel = rel_name(raw)
            try:
                st = d.stat(follow_symlinks=False)
            except OSError as e:
                errors.append([rel, e.strerror or str(e)])
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if rules.match(rel, is_dir):
                continue
            entries.append(_entry(root_b, rel, st))
            if keys is not None and stat.S_ISREG(st.st_mode):
                keys[rel] = digestcache.stat_key(st)
            if is_dir:
                stack.append(raw)
    entries.sort(key=lambda e: e.rel)
    return entries


def look_at(root_b, rels, errors, keys=None):
    """Entries for just these relative paths; missing ones are left out."""
    entries = []
    for rel in rels:
        try:
            st = os.lstat(os.path.join(root_b, fs_name(rel)))
        except FileNotFoundError:
            continue
        except OSError as e:
            errors.append([rel, e.strerror or str(e)])
            continue
        entries.append(_entry(root_b, rel, st))
        if keys is not None and stat.S_ISREG(st.st_mode):
            keys[rel] = digestcache.stat_key(st)
    entries.sort(key=lambda e: e.rel)
    return entries


def hash_entries(root_b, entries, errors, want=None, workers=None, cache=None, keys=None):
    """The file entries with their sha256 (and the size hashed) filled in; with `want`, only the
    same-size ones. With a `cache` (and the walk's stat `keys`), a file whose stat is unchanged is
    not read. Returns the entries that got a digest."""
    todo = [e for e in entries if e.kind == "f" and (want is None or want.get(e.rel) == e.size)]
    keys = keys or {}
    done = []
    if cache is not None:
        rest = []
        for e in todo:
            digest = cache.lookup(e.rel, keys.get(e.rel))
            if digest is None:
                rest.append(e)
            else:
                done.append(e._replace(sha256=digest))
        todo = rest
    if not todo:
        return done

    def one(e):
        path = os.path.join(root_b, fs_name(e.rel))
        started = digestcache.now_ns()
        try:
            digest, size = sha256_file(path)
        except (IOError, OSError) as err:
            errors.append([e.rel, err.strerror or str(err)])
            return None
        if cache is not None:
            try:
                after = digestcache.stat_key(os.lstat(path))
            except OSError:
                after = None
            cache.record(e.rel, keys.get(e.rel), digest, size, started, after)
        return e._replace(sha256=digest, size=size)

    total = sum(e.size for e in todo)
    workers = workers or min(4, os.cpu_count() or 1)
    if workers < 2 or total < _PARALLEL_BYTES:
        hashed = [one(e) for e in todo]
    else:
        from concurrent.futures import ThreadPoolExecutor

        # Big files first, so one large file does not run alone at the end.
        todo.sort(key=lambda e: -e.size)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            hashed = list(pool.map(one, todo))
    return done + [e for e in hashed if e is not None]


def rules_for(root_b, request):
    """The rule list for this root: before + the root's ignore file (if asked) + after."""
    lines = list(request.get("rules_before") or [])
    name = request.get("ignore_file")
    if name:
        lines += read_lines(os.path.join(root_b, fs_name(name)))
    lines += list(request.get("rules_after") or [])
    return Rules(lines)


class Scan:
    """One root looked at for one request: its entries (`entries`, {rel: Entry} in path order),
    their stat keys and its digest cache. build() runs it to the end; the local side of a sync
    keeps it to hash on a thread while it reads `entries`, whose files only ever gain digests."""

    def __init__(self, request) -> None:
        self.root = os.path.abspath(os.path.expanduser(request["root"]))
        self.root_b = fs_name(self.root)
        self.keys = {}
        self._lock = threading.Lock()
        # The box's clock before anything is looked at: whatever a transfer writes afterwards has
        # a later ctime (see gpuops.onbox.sync.landing).
        self.doc = {"root": self.root, "now_ns": digestcache.now_ns(),
                    "exists": os.path.exists(self.root_b), "is_dir": os.path.isdir(self.root_b),
                    "entries": [], "errors": [], "rules": [], "space": None, "rsync": shutil.which("rsync")}
        rules = rules_for(self.root_b, request) if self.doc["is_dir"] else Rules(())
        self.doc["rules"] = rules.lines
        self.paths = request.get("paths")
        mode = request.get("cache") if self.doc["is_dir"] else None
        self.cache = digestcache.DigestCache.for_request(self.root, mode)
        found = []
        if self.doc["is_dir"]:
            errors = self.doc["errors"]
            found = look_at(self.root_b, self.paths, errors, self.keys) if self.paths is not None \
                else walk(self.root_b, rules, errors, self.keys)
        self.entries = dict((e.rel, e) for e in found)

    def _store(self, entries) -> None:
        with self._lock:
            for e in entries:
                if e.rel in self.entries:
                    self.entries[e.rel] = e

    def drop(self, rels) -> None:
        """Forget these entries (files that vanished meanwhile)."""
        with self._lock:
            for rel in rels:
                self.entries.pop(rel, None)

    def restat(self, rels) -> None:
        """Look at these entries again (after gpuops itself rewrote them): new size, no digest."""
        self._store(look_at(self.root_b, rels, self.doc["errors"], self.keys))

    def take_cached(self, rels=None) -> None:
        """Fill in the digests the cache holds for unchanged files; read nothing."""
        found = []
        for rel in list(self.entries) if rels is None else rels:
            e = self.entries.get(rel)
            digest = self.cache.lookup(rel, self.keys.get(rel)) if e is not None and e.kind == "f" else None
            if digest is not None:
                found.append(e._replace(sha256=digest))
        self._store(found)

    def hash(self, rels=None, want=None, workers=None) -> None:
        todo = [self.entries[r] for r in (list(self.entries) if rels is None else rels) if r in self.entries]
        self._store(hash_entries(self.root_b, todo, self.doc["errors"], want=want, workers=workers,
                                 cache=self.cache, keys=self.keys))

    def finish(self) -> dict:
        """Save the digest cache; the hashing counters for the answer."""
        saved = self.cache.save(self.keys, looked_at=self.paths)
        return dict(self.cache.counters(), cache_saved=saved)


def build(request):
    """The answer document for one request (see the module docstring)."""
    scan = Scan(request)
    doc = scan.doc
    mode = request.get("hash", "none")
    if mode == "all":
        scan.hash()
    elif mode == "want":
        scan.hash(want=request.get("want") or {})
    elif mode == "cached":
        scan.take_cached()
    doc["entries"] = list(scan.entries.values())
    doc["hashing"] = scan.finish()
    if request.get("space"):
        doc["space"] = disk.measure("destination", scan.root)
    return doc


def serve(answer) -> int:
    """Read one JSON request from stdin, print answer(request) as one JSON document."""
    raw = sys.stdin.buffer.read()
    try:
        request = json.loads(raw.decode("utf-8", "surrogateescape"))
    except ValueError as e:
        sys.stdout.write(json.dumps({"error": "bad request: {}".format(e)}))
        return 2
    doc = answer(request)
    try:
        sys.stdout.write(json.dumps(doc))
        sys.stdout.flush()
    except (OSError, ValueError):  # the client is gone
        return 1
    return 0


def main(argv):
    return serve(build)
