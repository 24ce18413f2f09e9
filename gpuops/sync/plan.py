"""Pure comparison of two manifests: what to send, what differs, what is extra.

An entry is the tree walker's Entry(rel, kind, size, sha256, link) (gpuops.onbox.sync.manifest; kind
"f" file, "d" directory, "l" symlink, "o" other). A file counts as equal only when both sizes
match and both sha256 digests are known and equal: an unhashed file is never assumed in sync.

The box's manifests are untrusted: their entries come in here, through by_path, and each is checked
before any of it is used, since a rel becomes a local path and a link target a local symlink.
"""

import re
from dataclasses import dataclass, field

from ..contained import problem as path_problem
from ..errors import BadAnswer
from ..onbox.sync.manifest import KINDS, Entry

KIND_WORDS = {"f": "file", "d": "directory", "l": "symlink", "o": "special file"}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_QUOTED = 120


def by_path(entries, host: str = "the box") -> dict:
    """{rel: Entry} from Entries (this machine's own walk) or their JSON lists (the box's answer,
    each checked by `entry`)."""
    if isinstance(entries, (str, bytes, dict)):
        raise BadAnswer(f"{host}: the box's manifest is not gpuops's: its entries are a {type(entries).__name__}")
    found = {}
    for e in entries:
        e = e if isinstance(e, Entry) else entry(e, host)
        found[e.rel] = e
    return found


def entry(raw, host: str = "the box") -> Entry:
    """One entry of the box's manifest, once it is one gpuops's walker could have written: a
    relative path that stays inside the root, a known kind, a size, a digest, a link target.
    Anything else is BadAnswer (exit 3) quoting the offending value."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 5:
        _bad(host, f"an entry {_quote(raw)} is not [path, kind, size, sha256, link]")
    rel, kind, size, sha256, link = raw
    why = path_problem(rel)
    if why:
        _bad(host, f"the path {_quote(rel)} {why}")
    if not isinstance(kind, str) or kind not in KINDS:
        _bad(host, f"{_quote(rel)} has the kind {_quote(kind)}")
    if type(size) is not int or size < 0:
        _bad(host, f"{_quote(rel)} has the size {_quote(size)}")
    if sha256 is not None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
        _bad(host, f"{_quote(rel)} has the sha256 {_quote(sha256)}")
    if link is not None and not (isinstance(link, str) and "\0" not in link):
        _bad(host, f"{_quote(rel)} has the link target {_quote(link)}")
    return Entry(rel, kind, size, sha256, link)


def _quote(value) -> str:
    shown = repr(value)
    return shown if len(shown) <= _QUOTED else shown[:_QUOTED] + " ..."


def _bad(host: str, what):
    raise BadAnswer(f"{host}: the box's manifest is not gpuops's: {what}")


def same_size_files(src: dict, dst: dict) -> dict:
    """{rel: size} of source files whose destination counterpart is a file of the same size:
    only these need hashing before the plan, since any other difference already decides."""
    return {rel: e.size for rel, e in src.items()
            if e.kind == "f" and rel in dst and dst[rel].kind == "f" and dst[rel].size == e.size}


def problem(s, d):
    """Why destination entry `d` does not match source entry `s` (None when it does)."""
    if d is None:
        return "missing"
    if s.kind != d.kind:
        return "type"
    if s.kind == "l":
        return None if s.link == d.link else "link"
    if s.kind != "f":
        return None
    if s.size != d.size:
        return "size"
    if not s.sha256 or not d.sha256:
        return "unreadable"
    return None if s.sha256 == d.sha256 else "content"


@dataclass
class Plan:
    send: list = field(default_factory=list)      # rels to create or replace, in path order
    equal: list = field(default_factory=list)     # rels already identical at the destination
    skipped: list = field(default_factory=list)   # special files (sockets, fifos, devices)
    extras: list = field(default_factory=list)    # topmost destination-only rels


def make(src: dict, dst: dict) -> Plan:
    plan = Plan()
    for rel in sorted(src):
        s = src[rel]
        if s.kind == "o":
            plan.skipped.append(rel)
        elif problem(s, dst.get(rel)) is None:
            plan.equal.append(rel)
        else:
            plan.send.append(rel)
    plan.extras = extras(src, dst)
    return plan


def extras(src: dict, dst: dict) -> list:
    """Destination-only rels, topmost only (a directory stands for everything under it)."""
    out: list = []
    for rel in sorted(dst):
        if rel in src:
            continue
        if out and rel.startswith(out[-1] + "/"):
            continue
        out.append(rel)
    return out


def _side(e):
    if e is None:
        return None
    doc = {"kind": KIND_WORDS.get(e.kind, e.kind)}
    if e.kind == "f":
        doc.update(size=e.size, sha256=e.sha256)
    elif e.kind == "l":
        doc["target"] = e.link
    return doc


def mismatches(src: dict, dst: dict, rels, src_name: str = "source", dst_name: str = "destination") -> list:
    """[{path, problem, <src_name>: {...}, <dst_name>: {...}}] for every rel that differs."""
    out = []
    for rel in rels:
        s, d = src.get(rel), dst.get(rel)
        if s is None or s.kind == "o":  # special files are never synced, so never compared
            continue
        why = problem(s, d)
        if why:
            out.append({"path": rel, "problem": why, src_name: _side(s), dst_name: _side(d)})
    return out


def parents(rels) -> list:
    """Every ancestor directory of `rels` (relative), shallowest first."""
    seen = set()
    for rel in rels:
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            seen.add("/".join(parts[:i]))
    return sorted(seen, key=lambda p: (p.count("/"), p))
