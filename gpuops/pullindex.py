"""Local record of verified pulls, so a teardown decision can rest on evidence, not memory.

Each verified `gpuops pull` writes a manifest next to the data (`.NAME.gpuops-manifest.json` beside
the directory NAME it pulled into, outside the tree: a file of the user's may have any name
inside it, `.gpuops-manifest.json` too, and is synced like any other) and appends one line to
`<state dir>/pulls.jsonl`: {host, remote, local, manifest, files, bytes, verified_at}. The state
dir is $GPUOPS_STATE_DIR, else $XDG_STATE_HOME/gpuops, else ~/.local/state/gpuops.

Manifest file format: {"schema": 1, "host", "remote", "local", "verified_at",
"files": [{"path", "size", "sha256"}]}.
"""

import json
import os
import posixpath

from .onbox.sync.destlock import beside


def manifest_for(local_root: str) -> str:
    """Where the manifest of a verified pull into `local_root` is kept."""
    return beside(local_root, ".gpuops-manifest.json")


def state_dir() -> str:
    if os.environ.get("GPUOPS_STATE_DIR"):
        return os.environ["GPUOPS_STATE_DIR"]
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "gpuops")


def write_state(name: str, doc) -> None:
    """`doc` as JSON in the state dir's file `name`, readable by this user only, replaced whole
    (a reader sees the old file or the new one); OSError when it cannot be written."""
    from .contained import Root

    os.makedirs(state_dir(), mode=0o700, exist_ok=True)
    Root(state_dir()).write_atomic(name, json.dumps(doc).encode("utf-8"), mode=0o600)


def read_state(name: str, most: int = 1 << 20) -> dict:
    """The JSON object in the state dir's file `name`, or {} where there is none, it is not one or
    it is larger than `most` bytes: best effort, like the caches that use it."""
    try:
        with open(os.path.join(state_dir(), name), encoding="utf-8") as f:
            data = json.loads(f.read(most + 1)[:most])
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_per_host(name: str, data, keep, stamp) -> None:
    """`data` ({host: entry}) kept as by write_state, only the `keep` entries newest by their `stamp`
    key: best effort, like the caches that use it (a file that cannot be written is as good as none)."""
    if len(data) > keep:
        by_age = sorted(data, key=lambda h: (data[h] or {}).get(stamp, 0) if isinstance(data[h], dict) else 0)
        for old in by_age[: len(data) - keep]:
            del data[old]
    try:
        write_state(name, data)
    except OSError:
        pass


def index_path() -> str:
    return os.path.join(state_dir(), "pulls.jsonl")


def record(entry: dict) -> None:
    os.makedirs(state_dir(), exist_ok=True)
    line = json.dumps(entry, sort_keys=True) + "\n"
    # One write() of one line on an O_APPEND file: concurrent pulls never interleave records.
    fd = os.open(index_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def _under(path: str, root: str) -> bool:
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def find(host: str, remote: str) -> list:
    """Recorded pulls of `host` whose remote path is `remote` or contains it, newest first."""
    try:
        with open(index_path(), encoding="utf-8") as f:
            entries = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []
    hits = [e for e in entries if e.get("host") == host and _under(remote, e.get("remote", ""))]
    return sorted(hits, key=lambda e: e.get("verified_at", ""), reverse=True)
