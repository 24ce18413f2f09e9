"""The on-box half of a checked sync: one round trip returns what is at a path, and what fits.

Reads one JSON request from stdin and prints one JSON document:

    request  {"root": PATH, "rules_before": [...], "ignore_file": NAME|null, "rules_after": [...],
              "hash": "all"|"none"|"want", "want": {REL: SIZE}, "paths": [REL...]|null,
              "space": bool}
    answer   {"root": ABS, "exists", "is_dir", "entries": [[REL, KIND, SIZE, SHA256|null, LINK|null]],
              "errors": [[REL, MESSAGE]], "rules": [...], "space": {...}|null, "rsync": PATH|null}

KIND is "f" file, "d" directory, "l" symlink (LINK is its target, never followed), "o" anything
else (sockets, fifos, devices: never synced). With "paths" the tree is not walked: only those
entries are looked at (absent ones are left out), which is how a sync re-checks just what it sent.
"want" hashes a file only when the other side has one of the same size, since a size difference
already decides it. "space" measures free bytes and inodes where the root is, or at its nearest
existing parent when it does not exist yet (creating it is the sync's job, not this probe's).

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

from . import disk
from .ignorerules import Rules, read_lines

CHUNK = 1 << 20
_PARALLEL_BYTES = 32 << 20  # below this, thread start-up costs more than it saves


def fs_name(rel):
    return rel.encode("utf-8", "surrogateescape")


def rel_name(raw):
    return raw.decode("utf-8", "surrogateescape")


def sha256_file(path):
    """(hex digest, bytes read) of one file; the size is what was hashed, even if it grew.

    Small files (most of a code tree) are read in one call; a buffer is only set up for big
    ones, since allocating it per file would cost more than hashing ten thousand small files."""
    with open(path, "rb", buffering=0) as f:
        first = f.read(CHUNK)
        h = hashlib.sha256(first)
        n = len(first)
        if n < CHUNK:
            return h.hexdigest(), n
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while True:
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
        return [rel, "l", 0, None, target]
    if stat.S_ISDIR(mode):
        return [rel, "d", 0, None, None]
    if stat.S_ISREG(mode):
        return [rel, "f", st.st_size, None, None]
    return [rel, "o", 0, None, None]


def walk(root_b, rules, errors):
    """Entries below root (not the root itself), pruned by `rules`, sorted by path."""
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
        for d in it:
            raw = os.path.join(sub, d.name) if sub else d.name
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
            if is_dir:
                stack.append(raw)
    entries.sort(key=lambda e: e[0])
    return entries


def look_at(root_b, rels, errors):
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
    entries.sort(key=lambda e: e[0])
    return entries


def hash_entries(root_b, entries, errors, want=None, workers=None):
    """Fill in sha256 (and the hashed size) of file entries; with `want`, only same-size ones."""
    todo = [e for e in entries if e[1] == "f" and (want is None or want.get(e[0]) == e[2])]
    if not todo:
        return

    def one(e):
        try:
            e[3], e[2] = sha256_file(os.path.join(root_b, fs_name(e[0])))
        except (IOError, OSError) as err:
            return [e[0], err.strerror or str(err)]
        return None

    total = sum(e[2] for e in todo)
    workers = workers or min(4, os.cpu_count() or 1)
    if workers < 2 or total < _PARALLEL_BYTES:
        problems = [one(e) for e in todo]
    else:
        from concurrent.futures import ThreadPoolExecutor

        # Big files first, so one large file does not run alone at the end.
        todo.sort(key=lambda e: -e[2])
        with ThreadPoolExecutor(max_workers=workers) as pool:
            problems = list(pool.map(one, todo))
    errors.extend(p for p in problems if p)


def rules_for(root_b, request):
    """The rule list for this root: before + the root's ignore file (if asked) + after."""
    lines = list(request.get("rules_before") or [])
    name = request.get("ignore_file")
    if name:
        lines += read_lines(os.path.join(root_b, fs_name(name)))
    lines += list(request.get("rules_after") or [])
    return Rules(lines)


def build(request):
    """The answer document for one request (see the module docstring)."""
    root = os.path.abspath(os.path.expanduser(request["root"]))
    root_b = fs_name(root)
    doc = {"root": root, "exists": os.path.exists(root_b), "is_dir": os.path.isdir(root_b),
           "entries": [], "errors": [], "rules": [], "space": None,
           "rsync": shutil.which("rsync")}
    rules = rules_for(root_b, request) if doc["is_dir"] else Rules(())
    doc["rules"] = rules.lines
    errors = doc["errors"]
    if doc["is_dir"]:
        paths = request.get("paths")
        entries = look_at(root_b, paths, errors) if paths is not None else walk(root_b, rules, errors)
        mode = request.get("hash", "none")
        if mode == "all":
            hash_entries(root_b, entries, errors)
        elif mode == "want":
            hash_entries(root_b, entries, errors, want=request.get("want") or {})
        doc["entries"] = entries
    if request.get("space"):
        doc["space"] = disk.measure("destination", root)
    return doc


def main(argv):
    raw = sys.stdin.buffer.read()
    try:
        request = json.loads(raw.decode("utf-8", "surrogateescape"))
    except ValueError as e:
        sys.stdout.write(json.dumps({"error": "bad request: {}".format(e)}))
        return 2
    sys.stdout.write(json.dumps(build(request)))
    return 0
