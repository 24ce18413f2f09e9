"""Which code cites each gotcha, and what kind of handling that citation is.

The AST scan of gpuops/**/*.py finds findings that cite a gotcha (`gotcha="U7"` keyword
arguments, `"gotcha": "U7"` dict entries, a Finding's sixth positional argument, a gpuops module
constant such as `xid.GOTCHA`, the literal fallback of `profile.x or "U20"`, or both branches of
`A if cond else B`). Each citation is
given one of four kinds, from the code that makes it rather than from a hand-kept list:

- checked: a check that judges the box, a payload or a plan before or during a run and can say
  warn or fail (gpuops/checks, the gang preflight, sync's budget and verification, teardown-check
  of kept paths);
- prevented: declared in references/gotchas.toml (`prevented_by`: a verb whose design rules the
  gotcha out); no finding is involved;
- explained: code that reads what already happened (gpuops/onbox/triage, gpuops/diagnose, the run
  telemetry's judgement that only diagnose and triage turn into findings, the verdict on a transfer
  once its retry budget ran out), and notes of severity info or ok, which cannot fail anything;
- documented: a reminder printed from profile text whenever the profile has it, whatever the box
  holds (REMINDERS), and every gotcha nothing else covers.

A gotcha id that profile data supplies at run time (teardown's `loss_gotcha`) cannot be seen by the
scan: the index names those findings in `cited_by`, and their kind is the kind of the code that
makes that finding.
"""

import ast
import dataclasses
import functools
import importlib
from pathlib import Path

from .gotcha import split_ids

PACKAGE = Path(__file__).resolve().parent
CHECKED, PREVENTED, EXPLAINED, DOCUMENTED = "checked", "prevented", "explained", "documented"
KINDS = (CHECKED, PREVENTED, EXPLAINED, DOCUMENTED)
# Code that runs after the fact: it explains a crash or a state, it cannot stop one. The run
# telemetry (gpuops/onbox/host/telemetry.py judges the series, gpuops/jobs/runtelemetry.py words it) is
# made into findings only by diagnose and triage, about a run that is over or already stuck.
EXPLAINING = ("gpuops/onbox/triage/", "gpuops/diagnose/", "gpuops/onbox/track/wandblines.py", "gpuops/jobs/runtelemetry.py",
              "gpuops/onbox/host/telemetry.py")
# Functions elsewhere whose findings are verdicts on what already happened: a transfer that failed
# for good, after its retries (its budget, resume and backoff are what `pull` prevents with).
AFTER_THE_FACT = frozenset((("gpuops/ops/sync.py", "failure_finding"),))
NOTES = ("info", "ok")
# Said from the profile's text every time teardown-check runs with that profile; nothing on the
# box or in the pull records decides whether they appear.
REMINDERS = frozenset(("teardown.deletes", "teardown.still-bills", "teardown.clock"))
_SEVERITY_POS, _GOTCHA_POS = 1, 5  # Finding(id, severity, title, evidence, fix, gotcha)


@dataclasses.dataclass(frozen=True)
class Citation:
    file: str
    line: int
    finding: str
    gotcha: str
    kind: str = CHECKED


def _const(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


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
    """A literal id, the literal fallback of `x or "U20"`, or the string a `module.NAME` reference
    to a gpuops module constant holds."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return next((v for v in (_const(n) for n in node.values) if v), None)
    if isinstance(node, ast.IfExp):  # `A if cond else B` cites both: either can be said
        return ", ".join(v for v in (_gotcha_value(n, aliases) for n in (node.body, node.orelse)) if v) or None
    text = _const(node)
    if text is not None or not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return text
    module = aliases.get(node.value.id)
    if not module or not module.startswith(PACKAGE.name + "."):
        return None
    try:
        value = getattr(importlib.import_module(module), node.attr, None)
    except ImportError:
        return None
    return value if isinstance(value, str) else None


def kind_of(rel: str, finding: str, severity, function: str | None = None) -> str:
    """The kind of a finding made in file `rel` (a path from the repository root) by `function`
    with `severity` (a literal, or None when the code computes it)."""
    if rel.startswith(EXPLAINING) or (rel, function) in AFTER_THE_FACT:
        return EXPLAINED
    if finding in REMINDERS:
        return DOCUMENTED
    return EXPLAINED if severity in NOTES else CHECKED


def _sites(node) -> list:
    """[(finding id or None, severity literal or None, gotcha node or None)] that `node` makes."""
    if isinstance(node, ast.Call):
        kws = {k.arg: k.value for k in node.keywords if k.arg}
        finding = _const(kws["id"]) if "id" in kws else (_const(node.args[0]) if node.args else None)
        severity = kws.get("severity")
        if severity is None and _is_finding(node) and len(node.args) > _SEVERITY_POS:
            severity = node.args[_SEVERITY_POS]
        gotcha = kws.get("gotcha")
        if gotcha is None and _is_finding(node) and len(node.args) > _GOTCHA_POS:
            gotcha = node.args[_GOTCHA_POS]
        if gotcha is not None or _is_finding(node):
            return [(finding, _const(severity) if severity is not None else None, gotcha)]
    elif isinstance(node, ast.Dict):
        items = {_const(k): v for k, v in zip(node.keys, node.values) if k is not None and _const(k)}
        if "gotcha" in items:
            return [(_const(items["id"]) if "id" in items else None, _const(items.get("severity")), items["gotcha"])]
    return []


def _scan(root: Path):
    """(rel, line, finding, severity, gotcha node, aliases, function) for every finding site under `root`;
    parsed once per root and set of file versions (citations, finding_kinds and the docs all read
    it, and parsing every module is most of their cost)."""
    paths = sorted(root.rglob("*.py"))
    return _scanned(str(root), tuple((str(p), p.stat().st_mtime_ns) for p in paths))


@functools.lru_cache(maxsize=4)
def _scanned(root, versions):
    return tuple(_parse(Path(root), [Path(p) for p, _ in versions]))


def _parse(root: Path, paths):
    for path in paths:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        rel = path.relative_to(root.parent).as_posix()
        package = ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
        aliases = _module_aliases(tree, package)
        for node, function in _walk(tree, None):
            for finding, severity, gotcha in _sites(node):
                yield rel, node.lineno, finding, severity, gotcha, aliases, function


def _walk(node, function):
    """(node, the name of the innermost function holding it, or None) for every node under `node`."""
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
        yield child, function
        yield from _walk(child, inner)


def citations(root: Path = PACKAGE) -> list:
    """Every gotcha id cited by a finding in the code under `root`, with the citation's kind."""
    out = []
    for rel, line, finding, severity, gotcha, aliases, function in _scan(root):
        if gotcha is None:
            continue
        for gid in split_ids(_gotcha_value(gotcha, aliases) or ""):
            out.append(Citation(rel, line, finding or "", gid, kind_of(rel, finding or "", severity, function)))
    return out


def finding_kinds(root: Path = PACKAGE) -> dict:
    """finding id -> the kinds of the code that makes it (for findings whose gotcha id profile
    data supplies)."""
    out = {}
    for rel, _, finding, severity, _, _, function in _scan(root):
        if finding:
            out.setdefault(finding, set()).add(kind_of(rel, finding, severity, function))
    return out


def by_gotcha(entries: dict, cites: list, kinds: dict | None = None) -> dict:
    """gotcha id -> {kind: sorted names}: finding ids for checked/explained/documented, `verb: how`
    for prevented. Raises ValueError for an index `cited_by` entry no code makes."""
    kinds = finding_kinds() if kinds is None else kinds
    found = {}
    for c in cites:
        found.setdefault(c.gotcha, {}).setdefault(c.kind, set()).add(c.finding or c.file)
    out = {}
    for gid, e in entries.items():
        row = {k: set(v) for k, v in found.get(gid, {}).items()}
        for fid in e.cited_by:
            if fid not in kinds:
                raise ValueError(f"{gid}: cited_by names {fid!r}, which no code in gpuops/ makes")
            for kind in kinds[fid]:
                row.setdefault(kind, set()).add(fid)
        row = {k: sorted(v) for k, v in row.items()}
        if e.prevented_by:
            row[PREVENTED] = [f"`{p.verb}`: {p.how}" for p in e.prevented_by]
        out[gid] = row
    return out


def columns(row: dict) -> list:
    """The kinds a gotcha's row earns; `documented` alone when nothing checks, prevents or explains it."""
    earned = [k for k in (CHECKED, PREVENTED, EXPLAINED) if row.get(k)]
    return earned or [DOCUMENTED]
