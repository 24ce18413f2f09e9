"""The gotcha reference: load the index, search it, and generate the catalog and coverage docs.

`references/gotchas.toml` is the single source: one table per stable id (U1–U43 from the
universal catalog, platform ids such as AD4, RP3, VAST2, LAM6). Each entry says what you see,
why it happens, the fix, and how gpuops deals with it: `checked_by` (finding ids that detect
it), `prevented_by` (a verb whose design rules it out, and how), or neither (reference only).

The generated reference documents (catalog, coverage, the profile schema) are gpuops.refdocs'.
"""

import dataclasses
import functools
import re
from pathlib import Path

from . import tomlschema
from .errors import UsageError

REPO = Path(__file__).resolve().parent.parent
INDEX = Path(__file__).resolve().parent / "data" / "references" / "gotchas.toml"  # links to references/
ID = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)?")
THEMES = {
    "process": "Processes and SSH", "disk": "Disk and storage", "memory": "Memory and OOM",
    "transfer": "Transfers", "monitoring": "Monitoring", "gpu": "GPU health", "io": "Data loading and IO",
    "env": "Environment and containers", "cost": "Cost and teardown", "secrets": "Secrets and trackers",
    "delegated": "Experiment hygiene (pointers)", "autodl": "AutoDL", "runpod": "RunPod", "vastai": "vast.ai",
    "lambda": "Lambda", "paperspace": "Paperspace", "china": "Chinese rentals (Matpool, Gpushare, Featurize, LanRui)",
    "generic": "Any SSH box", "slurm": "Slurm", "kubernetes": "Kubernetes", "notebook": "Colab and Kaggle",
}


@dataclasses.dataclass(frozen=True)
class Prevention:
    verb: str = dataclasses.field(metadata={"doc": "gpuops verb whose design prevents it"})
    how: str = dataclasses.field(metadata={"doc": "the mechanism, one sentence"})


@dataclasses.dataclass(frozen=True)
class Gotcha:
    id: str = dataclasses.field(metadata={"file": False})
    title: str
    theme: str = dataclasses.field(metadata={"choices": tuple(THEMES)})
    symptom: str
    cause: str
    fix: str
    keywords: tuple[str, ...]
    platforms: tuple[str, ...] = ()
    see: tuple[str, ...] = ()
    checked_by: tuple[str, ...] = ()
    prevented_by: tuple[Prevention, ...] = ()

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def load_index(path: Path = INDEX) -> dict:
    """id -> Gotcha, in file order. Raises UsageError (file:line: key: problem) on a bad entry."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read the gotcha index {path}: {e}") from None
    data, src = tomlschema.parse(str(path), text)
    entries = {}
    for gid, raw in data.items():
        if not ID.fullmatch(gid):
            raise src.error((gid,), "gotcha ids are uppercase letters and digits, e.g. U7, AD4, AD-DANGER")
        if not isinstance(raw, dict):
            raise src.error((gid,), "expected a table")
        entries[gid] = tomlschema.build(Gotcha, raw, src, (gid,), id=gid)
    for gid, entry in entries.items():
        for i, other in enumerate(entry.see):
            if other not in entries:
                raise src.error((gid, "see", i), f"refers to unknown gotcha {other!r}")
    return entries


@functools.lru_cache(maxsize=1)
def _cached_index() -> dict:
    return load_index()


def index() -> dict:
    return _cached_index()


def known_ids() -> frozenset:
    return frozenset(index())


def split_ids(value: str) -> list:
    """A finding's gotcha field may cite several ids: "U6, U7"."""
    return [part for part in re.split(r"[,\s]+", value or "") if part]


def get(gid: str):
    return index().get(gid.strip().upper())


# ---- search -------------------------------------------------------------------------------------

def _tokens(text: str) -> list:
    return [t for t in re.split(r"[^\w.+/-]+", text.lower()) if t]


def _score(entry: Gotcha, query: str, words: list) -> int:
    if entry.id.lower() == query.strip().lower():
        return 1000
    total = 0
    keywords = [k.lower() for k in entry.keywords]
    title = entry.title.lower()
    body = " ".join((entry.symptom, entry.cause, entry.fix)).lower()
    for word in words:
        points = 0
        if word in keywords:
            points = 10
        elif any(word in k for k in keywords):
            points = 6
        if word in title:
            points += 4
        if word in body:
            points += 1
        if word == entry.id.lower() or word in (p.lower() for p in entry.platforms):
            points += 8
        if points == 0:
            return 0  # every word must match somewhere
        total += points
    return total


def search(query: str, limit: int = 5):
    """(hits, total): the best `limit` entries for an id or keywords, and how many matched."""
    query = (query or "").strip()
    if not query:
        raise UsageError("give --query: a gotcha id (U7, AD4) or keywords (inode, xid, crlf …)")
    if limit < 1:
        raise UsageError("--limit must be at least 1")
    words = _tokens(query)
    scored = [(s, n, e) for n, e in enumerate(index().values()) if (s := _score(e, query, words))]
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [e for _, _, e in scored[:limit]], len(scored)
