"""The layout holds: no import cycle under gpuops/, each layer imports only the layers below it,
and no module grows past what one reader can hold."""

import ast
from pathlib import Path

import pytest

import gpuops
from gpuops import onbox

PACKAGE = Path(gpuops.__file__).resolve().parent
MAX_LINES = 450


def _module(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path):
    """Every gpuops module `path` imports, at module level or inside a function."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("gpuops"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            if not prefix.startswith("gpuops"):
                continue
            for a in node.names:
                found.add(f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix)
    return {m for m in found if m in MODULES and m != name}


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def _cycles():
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert not _cycles()


def test_the_cycle_finder_finds_one(monkeypatch):
    monkeypatch.setitem(GRAPH, "gpuops.xid", GRAPH["gpuops.xid"] | {"gpuops.units"})
    monkeypatch.setitem(GRAPH, "gpuops.units", GRAPH["gpuops.units"] | {"gpuops.xid"})
    assert _cycles() == [["gpuops.units", "gpuops.xid"]]


@pytest.mark.parametrize("lower,upper", [
    ("gpuops.onbox", ("gpuops.ops", "gpuops.cli", "gpuops.mcp", "gpuops.render", "gpuops.remote", "gpuops.checks",
                      "gpuops.triage", "gpuops.sync", "gpuops.jobs")),
    ("gpuops.checks", ("gpuops.ops", "gpuops.cli", "gpuops.mcp", "gpuops.render", "gpuops.remote")),
    ("gpuops.triage", ("gpuops.ops", "gpuops.cli", "gpuops.mcp", "gpuops.render", "gpuops.remote")),
    ("gpuops.jobs", ("gpuops.ops", "gpuops.cli", "gpuops.mcp", "gpuops.render", "gpuops.remote")),
    ("gpuops.ops", ("gpuops.cli", "gpuops.mcp", "gpuops.render")),
    ("gpuops.render", ("gpuops.cli", "gpuops.mcp", "gpuops.ops")),
    ("gpuops.mcp", ("gpuops.cli", "gpuops.render")),
])
def test_a_layer_never_imports_one_above_it(lower, upper):
    wrong = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() if m.startswith(lower)
                   for d in deps if d.startswith(upper) and not (lower == "gpuops.onbox" and d in SHIPPED))
    assert not wrong, wrong


# What goes to the box: every onbox module and what they import from above (gpuops.onbox.BEYOND:
# triage's classifier and the tables it reads). gpuops.onbox may import from a layer above it only
# those, so the box's supervisor classifies a failed attempt with triage's own rules (issue 26: no
# second rule set) while nothing else above (ops, jobs' rules, remote ...) can reach the box.
SHIPPED = {".".join(["gpuops"] + onbox._parts(name)) for name in onbox.sources()}


def test_the_shipped_code_imports_only_shipped_code():
    assert {m for m in SHIPPED if not m.startswith("gpuops.onbox.")} <= {
        m for m in MODULES if any(m == f"gpuops.{b}" or m.startswith(f"gpuops.{b}.") for b in onbox.BEYOND)}
    wrong = sorted(f"{m} -> {d}" for m in SHIPPED for d in GRAPH[m] if d not in SHIPPED)
    assert not wrong, wrong


def test_what_is_shipped_from_above_onbox_is_only_what_onbox_imports():
    """BEYOND names what may go, not what does: a triage module nothing on the box imports (its
    log locator, which runs scontrol) stays on the workstation."""
    assert "gpuops.triage.classify" in SHIPPED and "gpuops.triage.locate" not in SHIPPED
    assert {m for m in MODULES if m.startswith("gpuops.onbox.")} <= SHIPPED


def test_the_bundler_refuses_an_import_from_above_that_it_does_not_ship(monkeypatch):
    monkeypatch.setattr(onbox, "_source", lambda name: "from ..ops import triage\n")
    with pytest.raises(ValueError, match="imports gpuops.ops.triage, which the on-box bundle does not ship"):
        onbox.imports("logclass")


def test_no_module_is_longer_than_one_reader_can_hold():
    long = {n: len(p.read_text().splitlines()) for n, p in MODULES.items()}
    assert not {n: c for n, c in long.items() if c > MAX_LINES}
