"""The gotcha reference: load the index, search it, and generate the catalog and coverage docs.

`references/gotchas.toml` is the single source: one table per stable id (U1–U43 from the
universal catalog, platform ids such as AD4, RP3, VAST2, LAM6). Each entry says what you see,
why it happens, the fix, and how gpuops deals with it: `checked_by` (finding ids that detect
it), `prevented_by` (a verb whose design rules it out, and how), or neither (reference only).

`references/catalog.md` and `references/COVERAGE.md` are generated from the index; coverage
also scans gpuops/**/*.py for findings that cite a gotcha (`gotcha="U7"` keyword arguments and
`"gotcha": "U7"` dict entries), so a new check shows up once the docs are regenerated:

    python -m gpuops.gotcha --coverage          # print the coverage table
    python -m gpuops.gotcha --write             # regenerate every generated reference doc
    python -m gpuops.gotcha --check             # exit 1 when a generated doc is stale
"""

import ast
import dataclasses
import functools
import re
import sys
from pathlib import Path

from . import tomlschema
from .errors import UsageError

REPO = Path(__file__).resolve().parent.parent
INDEX = Path(__file__).resolve().parent / "data" / "references" / "gotchas.toml"  # links to references/
PACKAGE = Path(__file__).resolve().parent
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


# ---- findings that cite gotchas -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Citation:
    file: str
    line: int
    finding: str
    gotcha: str


def _const(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


_GOTCHA_POS = 5  # Finding(id, severity, title, evidence, fix, gotcha)


def _is_finding(call) -> bool:
    f = call.func
    return (isinstance(f, ast.Name) and f.id == "Finding") or (isinstance(f, ast.Attribute) and f.attr == "Finding")


def citations(root: Path = PACKAGE) -> list:
    """Every literal gotcha id cited by a finding in the code under `root`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        rel = path.relative_to(root.parent).as_posix()
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, ast.Call):
                kws = {k.arg: k.value for k in node.keywords if k.arg}
                finding = _const(kws["id"]) if "id" in kws else (_const(node.args[0]) if node.args else None)
                if "gotcha" in kws:
                    pairs.append((finding, kws["gotcha"]))
                elif _is_finding(node) and len(node.args) > _GOTCHA_POS:
                    pairs.append((finding, node.args[_GOTCHA_POS]))
            elif isinstance(node, ast.Dict):
                items = {_const(k): v for k, v in zip(node.keys, node.values) if k is not None and _const(k)}
                if "gotcha" in items:
                    pairs.append((_const(items["id"]) if "id" in items else None, items["gotcha"]))
            for finding, value in pairs:
                for gid in split_ids(_const(value) or ""):
                    out.append(Citation(rel, node.lineno, finding or "", gid))
    return out


# ---- generated docs ----------------------------------------------------------------------------

def checked_by_code(cites: list = None) -> dict:
    """gotcha id -> finding ids (or file paths, when the id is not a literal) citing it in code."""
    found = {}
    for c in citations() if cites is None else cites:
        found.setdefault(c.gotcha, set()).add(c.finding or c.file)
    return found


def _coverage_rows(entries: dict, cites: list) -> list:
    found = checked_by_code(cites)
    rows = []
    for gid, e in entries.items():
        checked = sorted(set(e.checked_by) | found.get(gid, set()))
        prevented = [f"`{p.verb}`: {p.how}" for p in e.prevented_by]
        status = " + ".join(s for s, on in (("checked", checked), ("prevented", prevented)) if on) or "reference"
        rows.append((gid, e, status, checked, prevented))
    return rows


def coverage_markdown(entries: dict = None, cites: list = None) -> str:
    entries = index() if entries is None else entries
    cites = citations() if cites is None else cites
    rows = _coverage_rows(entries, cites)
    counts = {}
    for _, _, status, _, _ in rows:
        for part in status.split(" + "):
            counts[part] = counts.get(part, 0) + 1
    out = [
        "# Gotcha coverage",
        "",
        "Generated by `python -m gpuops.gotcha --write` from `references/gotchas.toml` and the findings",
        "in `gpuops/` that cite a gotcha. Do not edit by hand; `tests/test_gotcha.py` fails when it is stale.",
        "",
        f"{len(rows)} gotchas: {counts.get('checked', 0)} checked by a finding, "
        f"{counts.get('prevented', 0)} prevented by a verb's design, {counts.get('reference', 0)} reference only.",
        "",
        "| id | gotcha | status | checked by (finding) | prevented by (verb: how) |",
        "|---|---|---|---|---|",
    ]
    for gid, e, status, checked, prevented in rows:
        cell = lambda xs: "<br>".join(x.replace("|", "\\|") for x in xs)  # noqa: E731
        out.append(f"| {gid} | {e.title.replace('|', '/')} | {status} | {cell(f'`{c}`' for c in checked)} "
                   f"| {cell(prevented)} |")
    return "\n".join(out) + "\n"


def catalog_markdown(entries: dict = None, cites: list = None) -> str:
    entries = index() if entries is None else entries
    found = checked_by_code(cites)
    out = [
        "# Gotcha catalog",
        "",
        "What goes wrong on rented GPU machines, why, and what to do. Generated from",
        "`references/gotchas.toml` by `python -m gpuops.gotcha --write`; search it with",
        "`gpuops gotcha --query WORDS`. Ids are stable: U1–U43 apply anywhere, the others belong to one",
        "platform (see `gpuops profiles --name NAME`).",
        "",
    ]
    by_theme = {}
    for e in entries.values():
        by_theme.setdefault(e.theme, []).append(e)
    for theme, title in THEMES.items():
        if theme not in by_theme:
            continue
        out += [f"## {title}", ""]
        for e in by_theme[theme]:
            out += [f"### {e.id}: {e.title}", "", f"- **Symptom:** {e.symptom}", f"- **Cause:** {e.cause}",
                    f"- **Fix:** {e.fix}"]
            out.append(f"- **gpuops:** {handling(e, found.get(e.id, ()))}")
            if e.see:
                out.append(f"- **See also:** {', '.join(e.see)}")
            out += [f"- **Keywords:** {', '.join(e.keywords)}", ""]
    return "\n".join(out).rstrip() + "\n"


def handling(e: Gotcha, found=()) -> str:
    """One sentence: how gpuops checks or prevents this (declared in the index or cited in code)."""
    parts = []
    checked = sorted(set(e.checked_by) | set(found))
    if checked:
        parts.append("checked by " + ", ".join(f"`{c}`" for c in checked))
    parts += [f"prevented by `gpuops {p.verb}`: {p.how}" for p in e.prevented_by]
    return "; ".join(parts) or "reference only"


def generated_docs() -> dict:
    """Path -> expected text of every generated reference document."""
    from .profiles import schema_markdown

    cites = citations()
    return {
        REPO / "references" / "COVERAGE.md": coverage_markdown(cites=cites),
        REPO / "references" / "catalog.md": catalog_markdown(cites=cites),
        REPO / "profiles" / "SCHEMA.md": "# Profile schema\n\nGenerated from `gpuops/profiles.py` by "
        "`python -m gpuops.gotcha --write`; see profiles/README.md.\n\n" + schema_markdown(),
    }


def stale_docs() -> list:
    return [p for p, text in generated_docs().items()
            if not p.exists() or p.read_text(encoding="utf-8") != text]


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--coverage"]:
        sys.stdout.write(coverage_markdown())
        return 0
    if args == ["--write"]:
        for path, text in generated_docs().items():
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
        return 0
    if args == ["--check"]:
        stale = stale_docs()
        for path in stale:
            print(f"stale: {path.relative_to(REPO)} (run: python -m gpuops.gotcha --write)", file=sys.stderr)
        return 1 if stale else 0
    print("usage: python -m gpuops.gotcha --coverage | --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
