"""Pure comparison of two manifests: what to send, what differs, what is extra.

An entry is the tree walker's Entry(rel, kind, size, sha256, link) (gpuops.onbox.manifest; kind
"f" file, "d" directory, "l" symlink, "o" other). A file counts as equal only when both sizes
match and both sha256 digests are known and equal: an unhashed file is never assumed in sync.
"""

from dataclasses import dataclass, field

from ..onbox.manifest import Entry

KIND_WORDS = {"f": "file", "d": "directory", "l": "symlink", "o": "special file"}


def by_path(entries) -> dict:
    """{rel: Entry} from Entries or their JSON lists."""
    return {e[0]: e if isinstance(e, Entry) else Entry(*e) for e in entries}


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
    out = []
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


def mismatches(src: dict, dst: dict, rels, src_name="source", dst_name="destination") -> list:
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
