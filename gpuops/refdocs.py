"""The generated reference documents, and the scan of the code that feeds them.

`references/catalog.md`, `references/COVERAGE.md`, `profiles/SCHEMA.md` and the citation table
`gpuops gotcha` reads (gpuops/data/references/citations.json) are generated from the
gotcha index (gpuops.gotcha), the profile schema (gpuops.profiles) and the code: coverage scans
gpuops/**/*.py for findings that cite a gotcha (`gotcha="U7"` keyword arguments, `"gotcha": "U7"`
dict entries, or a gpuops module constant such as `xid.GOTCHA`), so a new check shows up once the
docs are regenerated:

    python -m gpuops.refdocs --coverage          # print the coverage table
    python -m gpuops.refdocs --write             # regenerate every generated reference doc
    python -m gpuops.refdocs --check             # exit 1 when a generated doc is stale
"""

import ast
import dataclasses
import functools
import json
import sys
from pathlib import Path

from .gotcha import CITATIONS, COMPILED, REPO, THEMES, Gotcha, compiled, load_index, split_ids

PACKAGE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def source() -> dict:
    """The index as references/gotchas.toml says it; never the compiled copy made from it."""
    return load_index()


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


def _module_aliases(tree, package: str) -> dict:
    """{local name: module name} for the `from X import m [as a]` lines of one file."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[:len(base) - node.level + 1] if node.level else []
            prefix = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                aliases[a.asname or a.name] = f"{prefix}.{a.name}" if prefix else a.name
    return aliases


def _gotcha_value(node, aliases):
    """A literal id, or the string a `module.NAME` reference to a gpuops module constant holds."""
    text = _const(node)
    if text is not None or not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return text
    module = aliases.get(node.value.id)
    if not module or not module.startswith(PACKAGE.name + "."):
        return None
    import importlib

    try:
        value = getattr(importlib.import_module(module), node.attr, None)
    except ImportError:
        return None
    return value if isinstance(value, str) else None


def citations(root: Path = PACKAGE) -> list:
    """Every gotcha id cited by a finding in the code under `root`: a literal, or a constant of a
    gpuops module named as module.NAME (gpuops.xid.GOTCHA)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        rel = path.relative_to(root.parent).as_posix()
        package = ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
        aliases = _module_aliases(tree, package)
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
                for gid in split_ids(_gotcha_value(value, aliases) or ""):
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
    entries = source() if entries is None else entries
    cites = citations() if cites is None else cites
    rows = _coverage_rows(entries, cites)
    counts = {}
    for _, _, status, _, _ in rows:
        for part in status.split(" + "):
            counts[part] = counts.get(part, 0) + 1
    out = [
        "# Gotcha coverage",
        "",
        "Generated by `python -m gpuops.refdocs --write` from `references/gotchas.toml` and the findings",
        "in `gpuops/` that cite a gotcha. Do not edit by hand; `tests/test_refdocs.py` fails when it is stale.",
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
    entries = source() if entries is None else entries
    found = checked_by_code(cites)
    out = [
        "# Gotcha catalog",
        "",
        "What goes wrong on rented GPU machines, why, and what to do. Generated from",
        "`references/gotchas.toml` by `python -m gpuops.refdocs --write`; search it with",
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
    table = {gid: sorted(found) for gid, found in checked_by_code(cites).items()}
    return {
        CITATIONS: json.dumps(table, indent=1, sort_keys=True) + "\n",
        COMPILED: compiled(source()),
        REPO / "references" / "COVERAGE.md": coverage_markdown(cites=cites),
        REPO / "references" / "catalog.md": catalog_markdown(cites=cites),
        REPO / "profiles" / "SCHEMA.md": "# Profile schema\n\nGenerated from `gpuops/profiles.py` by "
        "`python -m gpuops.refdocs --write`; see profiles/README.md.\n\n" + schema_markdown(),
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
            print(f"stale: {path.relative_to(REPO)} (run: python -m gpuops.refdocs --write)", file=sys.stderr)
        return 1 if stale else 0
    print("usage: python -m gpuops.refdocs --coverage | --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
