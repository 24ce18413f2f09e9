"""The vault: a local directory that holds a run's checkpoints, log and events off the box.

    VAULT/RUN/
      checkpoints/NAME                          a checkpoint, complete and verified: a directory, or
                                                one file (`checkpoint-100.pt`)
      checkpoints/.NAME.gpuops-manifest.json    its manifest (the verified pull's: path, size, sha256;
                                                a file's says kind "file" and lists the file alone)
      .incoming/NAME~TOKEN                      a copy under way: never complete, whatever it holds
      boxes/N-ALIAS/JOB/                        attempt N's job directories on box ALIAS (log, events,
                                                records), every node's of a gang
      outputs/NAME                              what the run must leave behind (--output): a directory
                                                or one file

A checkpoint arrives by a verified pull (gpuops.ops.pull: both ends hashed) into .incoming/, then
its manifest and then its directory are renamed into checkpoints/. It counts as held only when the
directory and its manifest are both there, so a keeper killed mid-copy leaves at most an
.incoming/ entry (replaced by the next copy) or a manifest alone, neither of which is held.
Before a checkpoint leaves the vault for a new box, its files are hashed against its manifest.

A checkpoint that is one file comes the same way: the verified pull is of the box's checkpoint
directory with rules (only()) that carry that one entry, into .incoming/NAME~TOKEN/NAME; its
manifest (kind "file") and then the file itself are renamed in. It is held only as a regular
file whose manifest says "file" (a directory only under a manifest that does not), and it goes
back to a box by a push of the directory holding it under the same rules.

Names come from the box: only a plain name (no '/', not hidden, no control character) is used.
A vault on another machine (`--vault HOST:DIR`) is gpuops.keeper.remotevault, with the same layout.
"""

import hashlib
import json
import os
import secrets

from .. import contained, errors
from ..pullindex import manifest_for

CHECKPOINTS, INCOMING, BOXES, OUTPUTS = "checkpoints", ".incoming", "boxes", "outputs"
MAX_NAME = 255
TOKEN = "~"  # .incoming/NAME~TOKEN: one copy's own place


def plain(name: object) -> bool:
    """True for a name that is one plain entry: what a box's checkpoint name must be to be copied."""
    return (isinstance(name, str) and 0 < len(name) <= MAX_NAME and "/" not in name and not name.startswith(".")
            and not any(ord(c) < 32 or ord(c) == 127 for c in name))


FILE = "file"  # a manifest's kind for a checkpoint that is one file


def only(name: str) -> tuple:
    """Sync rule lines (--exclude's, gitignore syntax) that carry only the entry `name` at the root of
    a directory (all of it, when it is a directory): every character but a letter or digit escaped,
    so the name is matched as it is."""
    return ("/*", "!/" + "".join(c if c.isascii() and c.isalnum() else "\\" + c for c in name))


def kind_of(doc: dict) -> str:
    """"file" or "dir": what a held checkpoint with manifest `doc` is."""
    return FILE if doc.get("kind") == FILE else "dir"


def file_manifest(doc: dict | None, name: str) -> dict | None:
    """A verified pull's manifest `doc`, of a directory that holds file `name` alone, as the manifest of
    checkpoint `name` held as that one file (kind "file"); None when it is not exactly that."""
    if doc is None or [f["path"] for f in doc["files"]] != [name]:
        return None
    return {**doc, "kind": FILE}


HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_@")
USAGE = "--vault DIR (here) or HOST:DIR (over SSH); a local path with ':' is written ./a:b or /abs/a:b"


def parse(text: str) -> tuple:
    """(HOST, DIR) of `--vault HOST:DIR`, or (None, DIR) of a local directory. As scp and rsync
    read it: HOST:DIR when a ':' comes before any '/', so `./a:b` and `/x/a:b` are local paths.
    On the host, a DIR of `~/x` is `x` under the home directory; UsageError (exit 2) on a bad one."""
    if not isinstance(text, str) or not text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise errors.UsageError(f"--vault {text!r}: {USAGE}")
    head, colon, rest = text.partition(":")
    if not colon or "/" in head:
        return None, text
    if not head or head.startswith("-") or not set(head) <= HOST_CHARS or not rest:
        raise errors.UsageError(f"--vault {text!r}: {USAGE}")
    if rest == "~" or rest.startswith("~/"):
        rest = rest[2:] or "."
    elif rest.startswith("~"):
        raise errors.UsageError(f"--vault {text!r}: on the host, DIR is absolute or under ~/ ({USAGE})")
    return head, rest


class Vault:
    def __init__(self, root, run_id) -> None:
        if not plain(run_id):
            raise errors.UsageError(f"a run id is one plain name, not {run_id!r}")
        self.root = os.path.join(os.path.abspath(os.path.expanduser(root)), run_id)
        for sub in (CHECKPOINTS, INCOMING, BOXES, OUTPUTS):
            os.makedirs(os.path.join(self.root, sub), mode=0o700, exist_ok=True)

    def make(self) -> "Vault":
        """The vault, made (here __init__ made it: a vault that cannot be written fails at once)."""
        return self

    def path(self, *parts) -> str:
        return os.path.join(self.root, *parts)

    def landing(self, *parts) -> str:
        """Where a pull of the vault's `parts` (a box's log, an output) lands: here, the place itself."""
        return self.path(*parts)

    def land(self, local: str, *parts: str) -> None:
        """What landing() received is in the vault (here it already is); a remote vault says why not."""
        return None

    def checkout(self, name: str) -> str:
        """Checkpoint `name` on this machine, hashed against its manifest: Refused when it differs."""
        bad = self.verify(name)
        if bad:
            raise errors.Refused(f"vault checkpoint {name} no longer matches its manifest ({', '.join(bad[:3])})")
        return self.path(CHECKPOINTS, name)

    def checked_in(self, name: str) -> None:
        """checkout()'s copy is no longer needed (here it is the vault's own: kept)."""

    def held(self) -> list:
        """[{name, files, bytes, verified_at}] of the complete checkpoints, in order of arrival."""
        out = []
        base = self.path(CHECKPOINTS)
        for name in os.listdir(base):
            doc = _manifest(self.path(CHECKPOINTS, name)) if plain(name) else None
            if doc is not None and _is(self.path(CHECKPOINTS, name), kind_of(doc)):
                out.append({"name": name, "files": len(doc["files"]), "bytes": sum(f["size"] for f in doc["files"]),
                            "verified_at": doc.get("verified_at"), "arrived": os.stat(manifest_for(
                                self.path(CHECKPOINTS, name))).st_mtime})
        out.sort(key=lambda h: (h["arrived"], h["name"]))
        return out

    def incoming(self, name: str) -> str:
        """A fresh place to copy checkpoint `name` into: a name of its own (a copy a killed keeper
        left running cannot write into it), after what earlier copies of `name` left is removed."""
        self.clear(name)
        return os.path.join(self.path(INCOMING), f"{name}{TOKEN}{secrets.token_hex(4)}")

    def clear(self, name: str) -> None:
        """What copies of checkpoint `name` left in the incoming place (a pull that failed or was
        refused, a keeper killed mid-copy) removed: only the keeper's own token-named places."""
        self._check(name)
        base = self.path(INCOMING)
        for left in os.listdir(base):
            if left.split(TOKEN, 1)[0] in (name, f".{name}"):
                contained.Root(base).remove(left)

    def claim(self, name: str, src, kind: str = "dir") -> None:
        """Checkpoint `name`, verified at `src` (from incoming()) by its pull, becomes held: the
        manifest first, the directory last (the rename that makes it complete). A `kind` "file"
        checkpoint was pulled as `src`/NAME alone: its manifest, then that file, are renamed in."""
        self._check(name)
        dst = self.path(CHECKPOINTS, name)
        doc = _manifest(src) if os.path.dirname(src) == self.path(INCOMING) else None
        if kind == FILE:
            doc = file_manifest(doc, name) if os.path.isfile(os.path.join(src, name)) else None
        if doc is None:
            raise errors.BadAnswer(f"vault: {name} has no verified manifest; not claimed")
        if os.path.lexists(dst):
            self.drop(name)
        if kind == FILE:
            contained.Root(self.path(CHECKPOINTS)).write_atomic(os.path.basename(manifest_for(dst)),
                                                                json.dumps(doc).encode("ascii"))
            os.replace(os.path.join(src, name), dst)
            os.unlink(manifest_for(src))
            contained.Root(self.path(INCOMING)).remove(os.path.basename(src))
            return
        os.replace(manifest_for(src), manifest_for(dst))
        os.replace(src, dst)

    def drop(self, name: str) -> None:
        """Stop holding checkpoint `name`: its manifest goes first, so it is never half held."""
        self._check(name)
        where = self.path(CHECKPOINTS, name)
        try:
            os.unlink(manifest_for(where))
        except FileNotFoundError:
            pass
        if os.path.lexists(where):
            contained.Root(self.path(CHECKPOINTS)).remove(name)

    def verify(self, name: str) -> list:
        """Paths of checkpoint `name` that differ from its manifest (missing, other size or sha256)."""
        self._check(name)
        where = self.path(CHECKPOINTS, name)
        doc = _manifest(where)
        if doc is None:
            return ["(manifest)"]
        if kind_of(doc) == FILE:
            return [] if _is(where, FILE) and file_manifest(doc, name) and _same(where, doc["files"][0]) else [name]
        bad = []
        for f in doc["files"]:
            path = os.path.join(where, f["path"])
            if os.path.relpath(path, where).startswith("..") or not os.path.isfile(path):
                bad.append(f["path"])
            elif not _same(path, f):
                bad.append(f["path"])
        return bad

    def _check(self, name: str):
        if not plain(name):
            raise errors.BadAnswer(f"vault: {name!r} is not a plain checkpoint name; not copied")


def _is(path: str, kind: str) -> bool:
    """`path` is a regular file (kind "file") or a directory (any other), not through a link."""
    return not os.path.islink(path) and (os.path.isfile(path) if kind == FILE else os.path.isdir(path))


def _same(path: str, f: dict) -> bool:
    return os.path.getsize(path) == f["size"] and _sha256(path) == f["sha256"]


def _manifest(where):
    try:
        with open(manifest_for(where), encoding="ascii") as f:
            return valid_manifest(json.load(f))
    except (OSError, ValueError):
        return None


def valid_manifest(doc: object) -> dict | None:
    """`doc` when it is a manifest (files: [{path, size, sha256}]), else None."""
    if not isinstance(doc, dict):
        return None
    files = doc.get("files")
    if not isinstance(files, list) or not all(isinstance(x, dict) and isinstance(x.get("path"), str) and
                                              isinstance(x.get("size"), int) and isinstance(x.get("sha256"), str)
                                              for x in files):
        return None
    return doc


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

