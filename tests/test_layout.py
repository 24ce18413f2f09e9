"""The layout holds: no import cycle under gpuops/, each layer imports only the layers below it,
and no module grows past what one reader can hold."""

import ast
import re
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


def _cycles(graph=None):
    """Strongly connected components of more than one node (Tarjan), of the module graph or `graph`."""
    graph = GRAPH if graph is None else graph
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert not _cycles()


def test_the_cycle_finder_finds_one(monkeypatch):
    monkeypatch.setitem(GRAPH, "gpuops.xid", GRAPH["gpuops.xid"] | {"gpuops.units"})
    monkeypatch.setitem(GRAPH, "gpuops.units", GRAPH["gpuops.units"] | {"gpuops.xid"})
    assert _cycles() == [["gpuops.units", "gpuops.xid"]]


# ---------------------------------------------------------------- packages


def _package_of(module):
    """The package a module counts in: its folder (gpuops.onbox.run), or, for a module right under
    gpuops/, the module itself (gpuops.xid): each of those is a piece of a layer of its own."""
    parts = module.split(".")
    folder = parts if MODULES[module].name == "__init__.py" else parts[:-1]
    return module if len(folder) == 1 else ".".join(folder)


def _package_graph(graph=None):
    """{package: the packages its modules import}, from the module graph."""
    out = {}
    for module, deps in (GRAPH if graph is None else graph).items():
        here = _package_of(module)
        out.setdefault(here, set()).update(_package_of(d) for d in deps)
    return {p: deps - {p} for p, deps in out.items()}


def test_no_package_cycle():
    assert not _cycles(_package_graph())


def test_the_package_cycle_finder_finds_one(monkeypatch):
    """Two modules that import nothing of each other still make a cycle of their packages."""
    procs = "gpuops.onbox.host.procs"
    monkeypatch.setitem(GRAPH, procs, GRAPH[procs] | {"gpuops.onbox.reaper.reap_rules"})
    assert _cycles(_package_graph()) == [["gpuops.onbox.host", "gpuops.onbox.reaper"]]
    assert not _cycles()


# What may import what: each layer's packages, and the layers it stands on. A package imports its own
# layer and the layers below it, the ones it stands on and theirs, never one above or beside it.
# Bottom first. Another package is a row here before it can import anything.
LAYERS = {
    # plain tables and rules; BELOW (gpuops.onbox.BELOW) of them go to the box too
    "base": (("gpuops", "gpuops.errors", "gpuops.units", "gpuops.xid", "gpuops.findings", "gpuops.states",
              "gpuops.envelope", "gpuops.boundary", "gpuops.contained", "gpuops.placement", "gpuops.tomlschema",
              "gpuops.sshspec", "gpuops.gotcha", "gpuops.verbindex"), ()),
    # the bundler, which reads the on-box code as text and imports none of it
    "onbox": (("gpuops.onbox",), ()),
    # the code that runs on the box, bottom first
    "onbox.host": (("gpuops.onbox.host",), ("base",)),
    "onbox.triage": (("gpuops.onbox.triage",), ("base",)),
    "onbox.helper": (("gpuops.onbox.helper",), ()),
    "onbox.sync": (("gpuops.onbox.sync",), ("onbox.host",)),
    "onbox.reaper": (("gpuops.onbox.reaper",), ("onbox.host",)),
    "onbox.track": (("gpuops.onbox.track",), ("onbox.host", "onbox.triage")),
    "onbox.gang": (("gpuops.onbox.gang",), ("onbox.sync",)),
    "onbox.run": (("gpuops.onbox.run",), ("onbox.gang", "onbox.track")),
    "onbox.engines": (("gpuops.onbox.engines",), ("onbox.run",)),
    "onbox.facts": (("gpuops.onbox.facts",), ("onbox.engines",)),
    "onbox.jobs": (("gpuops.onbox.jobs",), ("onbox.engines",)),
    "onbox.all": ((), ("onbox", "onbox.helper", "onbox.reaper", "onbox.facts", "onbox.jobs")),
    # the workstation's rules and records, which read what the box answers
    "records": (("gpuops.pullindex", "gpuops.probecache", "gpuops.qualifystore", "gpuops.fleetstate"), ("onbox.all",)),
    "rules": (("gpuops.checks", "gpuops.shapes", "gpuops.datasheet", "gpuops.profiles", "gpuops.sitedefaults",
               "gpuops.profiles_guess", "gpuops.fleetfile", "gpuops.coverage"), ("onbox.all",)),
    "jobs": (("gpuops.jobs", "gpuops.diagnose"), ("rules", "records")),
    "engines": (("gpuops.engines",), ("jobs",)),
    # one description per verb, which both faces read: neither face, nor what runs a verb
    "surface": (("gpuops.surface",), ("engines",)),
    # I/O: SSH and the copies over it
    "remote": (("gpuops.remote",), ("rules", "onbox.all")),
    "sync": (("gpuops.sync",), ("remote", "records")),
    # what a person reads of each job engine's work (one module per engine), which the verbs' summaries
    # are made of: text in the words of its engine, from the facts the engine answers
    "words": (("gpuops.render.engines",), ()),
    # drawing for people: data in, text out; no I/O layer
    "render": (("gpuops.render",), ("onbox.all", "words")),
    "ops": (("gpuops.ops",), ("sync", "engines", "words")),
    "keeper": (("gpuops.keeper",), ("ops", "render")),
    "mcp": (("gpuops.mcp",), ("ops", "surface", "keeper")),
    "cli": (("gpuops.cli", "gpuops.refdocs"), ("ops", "surface", "keeper", "render")),
    "main": (("gpuops.__main__",), ("cli",)),
}


def _layer_of(package):
    return next((name for name, (members, _) in LAYERS.items() if package in members), None)


def _beneath(layer):
    """The layers `layer` stands on, directly or through another."""
    out, todo = set(), list(LAYERS[layer][1])
    while todo:
        below = todo.pop()
        if below not in out:
            out.add(below)
            todo += LAYERS[below][1]
    return out


def _against_the_layers(graph=None):
    """'a -> b' for each package import that goes up or sideways in LAYERS, and each package no
    row places."""
    packages = _package_graph(graph)
    wrong = [f"{p}: in no layer" for p in sorted(set(packages) | {d for ds in packages.values() for d in ds})
             if _layer_of(p) is None]
    for package, deps in sorted(packages.items()):
        here = _layer_of(package)
        wrong += [f"{package} -> {d}" for d in sorted(deps)
                  if here and _layer_of(d) and _layer_of(d) != here and _layer_of(d) not in _beneath(here)]
    return wrong


def test_no_package_imports_one_above_or_beside_it():
    wrong = _against_the_layers()
    assert not wrong, wrong


@pytest.mark.parametrize("module,imported,says", [
    ("gpuops.onbox.host.procs", "gpuops.ops.jobs", "gpuops.onbox.host -> gpuops.ops"),         # up
    ("gpuops.sync.rsync", "gpuops.render.inert", "gpuops.sync -> gpuops.render"),                  # beside
    ("gpuops.render.live", "gpuops.remote.wrap", "gpuops.render -> gpuops.remote"),                # beside
    ("gpuops.onbox.triage.scan", "gpuops.onbox.host.procs", "gpuops.onbox.triage -> gpuops.onbox.host"),
])
def test_the_layer_rule_finds_an_import_against_it(monkeypatch, module, imported, says):
    monkeypatch.setitem(GRAPH, module, GRAPH[module] | {imported})
    assert says in _against_the_layers()


def test_every_package_has_a_layer_and_every_layer_a_package():
    members = [m for ms, _ in LAYERS.values() for m in ms]
    assert len(members) == len(set(members))
    assert set(members) == set(_package_graph()), set(members) ^ set(_package_graph())


MAX_MODULES = 30


def _crowded(root):
    """{folder: modules} for each folder under `root` with more than MAX_MODULES modules."""
    counts = {}
    for path in Path(root).rglob("*.py"):
        if path.name != "__init__.py" and "__pycache__" not in path.parts:
            folder = str(path.parent.relative_to(root))
            counts[folder] = counts.get(folder, 0) + 1
    return {f: n for f, n in counts.items() if n > MAX_MODULES}


def test_no_folder_holds_more_modules_than_a_reader_can_find_their_way_in():
    assert not _crowded(PACKAGE)


def test_the_folder_rule_finds_a_crowded_one(tmp_path):
    for i in range(MAX_MODULES + 1):
        (tmp_path / "flat" / f"m{i}.py").parent.mkdir(exist_ok=True)
        (tmp_path / "flat" / f"m{i}.py").write_text("")
    (tmp_path / "flat" / "__init__.py").write_text("")
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "m.py").write_text("")
    assert _crowded(tmp_path) == {"flat": MAX_MODULES + 1}


# What goes to the box: every module under gpuops.onbox but the bundler, and the bottom tables they
# import (gpuops.onbox.BELOW), so the box's supervisor classifies a failed attempt with triage's own
# rules (issue 26: no second rule set) while nothing above (ops, jobs' rules, remote ...) can reach it.
SHIPPED = {"gpuops." + name for name in onbox.sources()}


def test_the_shipped_code_imports_only_shipped_code():
    assert {m for m in SHIPPED if not m.startswith("gpuops.onbox.")} <= {f"gpuops.{b}" for b in onbox.BELOW}
    wrong = sorted(f"{m} -> {d}" for m in SHIPPED for d in GRAPH[m] if d not in SHIPPED)
    assert not wrong, wrong


def test_everything_under_onbox_is_shipped_and_nothing_beside_it_but_the_bottom_tables():
    """BELOW names what may go, not what does: a bottom module nothing on the box imports stays."""
    assert {m for m in MODULES if m.startswith("gpuops.onbox.")} <= SHIPPED
    assert "gpuops.onbox" not in SHIPPED and "gpuops.ops.triage_locate" not in SHIPPED
    assert {_layer_of(_package_of(m)) for m in SHIPPED if not m.startswith("gpuops.onbox.")} == {"base"}


def test_the_bundler_refuses_an_import_from_above_that_it_does_not_ship(monkeypatch):
    monkeypatch.setattr(onbox, "_source", lambda name: "from ...ops import triage\n")
    with pytest.raises(ValueError, match="imports gpuops.ops.triage, which the on-box bundle does not ship"):
        onbox.imports("onbox.triage.logclass")


def test_entries_are_named_by_their_leaf_and_no_two_share_one():
    """Target.ship("probe") finds gpuops.onbox.facts.probe wherever the folder puts it."""
    assert onbox.closure("probe")[-1] == "onbox.facts.probe" and "probe" in onbox.entries()
    assert len(onbox.entries()) == len(set(onbox.entries()))


def test_no_module_is_longer_than_one_reader_can_hold():
    long = {n: len(p.read_text().splitlines()) for n, p in MODULES.items()}
    assert not {n: c for n, c in long.items() if c > MAX_LINES}


# ---------------------------------------------------------------- engines


def _engine_names():
    from gpuops import engines
    from gpuops.onbox.engines import registry as on_box

    return set(engines.names()), set(on_box.ENGINES)


def _engine_of(module):
    """The engine a module belongs to (gpuops.engines.slurm_state -> slurm), or None: its halves
    here and on the box, and its words (gpuops.render.engines.slurm)."""
    package, _, leaf = module.rpartition(".")
    if package not in ("gpuops.engines", "gpuops.onbox.engines", "gpuops.render.engines"):
        return None
    return next((e for e in _engine_names()[0] if leaf == e or leaf.startswith(e + "_")), None)


# The registries name every engine; they import engines, never compare them.
REGISTRIES = {"gpuops.engines", "gpuops.engines.base", "gpuops.onbox.engines.registry"}
# Log triage reads the scheduler words a log or a harness summary prints (`triage --slurm-state`),
# not a gpuops job's engine: its words are its own (tests/test_shared_rules.py).
# The classifier's modules: gpuops/onbox/triage/ but the step, log and retry rules beside them.
_CLASSIFIER = ("advice", "aux", "classes", "classify", "facts", "framework_advice", "frameworks", "matcher",
               "logtriage", "progress", "readers", "scan", "signatures", "status", "stepwindow", "tbcontext",
               "timestamps", "wording")
WORDS_OF_THEIR_OWN = tuple(f"gpuops.onbox.triage.{m}" for m in _CLASSIFIER) + ("gpuops.ops.triage", "gpuops.cli.triage")
# The profile schema names every detach word, a scheduler's too.
SCHEDULER_WORDS = {"gpuops.profiles"}


def _engine_words():
    """Each engine's own state words that are not gpuops' state names (STOPPED, NODE_FAIL ...)."""
    from gpuops import engines
    from gpuops import states

    return {w for e in engines.each() for w in e.states} - set(states.NAMES)


def _engine_refs(node, names):
    """Whether an expression names an engine: 'slurm', SLURM, jobrecord.SLURM, (BOX, SLURM), 'slurm_job_id'."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in names or any(node.value.startswith(n + "_") for n in names - {"box"})
    if isinstance(node, ast.Name):
        return node.id.lower() in names and node.id.isupper()
    if isinstance(node, ast.Attribute):
        return node.attr.lower() in names and node.attr.isupper()
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_engine_refs(e, names) for e in node.elts)
    return False


def _names_one(node, names):
    return any(isinstance(n, ast.Constant) and n.value in names for n in ast.walk(node))


def _engine_keys():
    """The keys only an engine's records carry (slurm_job_id, ray_submission_id ...): its own job id
    key, and the keys under its name that its box half adds to a record or its stop targets hold."""
    from gpuops import engines

    return {k for e in engines.each() for k in ((e.job_id_key,) if e.job_id_key else ()) + tuple(e.meta_fields)
            + tuple(e.stop_target) if k == e.job_id_key or k.startswith(e.name + "_")}


def _scheduler_words():
    """A profile's launch.detach words that mean a scheduler's job (sbatch, k8s-job): only the profile
    schema and the engine that runs it spell one; anyone else asks the registry (engines.runs_detach)."""
    from gpuops.profiles import SCHEDULER_DETACH

    return set(SCHEDULER_DETACH)


_WORD = re.compile(r"\w+")


def _docstrings(tree):
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _engine_branches(path, names, words, own_words, keys=frozenset(), schedulers=frozenset()):
    """'line: what' for each place a module compares an engine, reads an engine's own field,
    spells an engine's own state word, names an engine's own key in a table (`slurm_job_id` in a
    list of row keys) or spells a scheduler's detach word (`SCHEDULED = ("k8s-job",)`)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    seen = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(_engine_refs(n, names) for n in [node.left] + node.comparators):
            found.append(f"{node.lineno}: compares an engine")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and _engine_refs(node.args[0], names - {"box"}) and not own_words:
            found.append(f"{node.lineno}: reads {node.args[0].value!r}")
            seen.add(id(node.args[0]))
        elif isinstance(node, ast.Subscript) and _engine_refs(node.slice, names - {"box"}) and not own_words:
            found.append(f"{node.lineno}: reads {ast.unparse(node.slice)}")
            seen.update(id(n) for n in ast.walk(node.slice))
        elif isinstance(node, ast.Constant) and node.value in words and not own_words:
            found.append(f"{node.lineno}: spells {node.value!r}")
        elif isinstance(node, ast.keyword) and node.arg == "engine" and _names_one(node.value, names):
            found.append(f"{node.value.lineno}: picks an engine by name")
        elif isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "engine" and
                                                _names_one(v, names) for k, v in zip(node.keys, node.values)):
            found.append(f"{node.lineno}: picks an engine by name")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs | seen \
                and not own_words and keys & set(_WORD.findall(node.value)):
            found.append(f"{node.lineno}: names {sorted(keys & set(_WORD.findall(node.value)))[0]!r}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                and node.value in schedulers:
            found.append(f"{node.lineno}: spells the detach {node.value!r}")
    return found


def test_both_registries_name_the_same_engines():
    from gpuops.onbox.engines import registry as on_box

    here, box = _engine_names()
    assert here == box and "box" in here
    assert all(module.NAME == name for name, module in on_box.ENGINES.items())


def test_no_module_but_an_engines_own_branches_on_the_engine_or_spells_its_states():
    """A new engine is new modules plus a registry line each side: nothing else may say
    `engine == "slurm"`, read `slurm_job_id` or spell NODE_FAIL."""
    names, words, keys, schedulers = _engine_names()[0], _engine_words(), _engine_keys(), _scheduler_words()
    wrong = []
    for module, path in sorted(MODULES.items()):
        if _engine_of(module) or module in REGISTRIES:
            continue
        own = module.startswith(WORDS_OF_THEIR_OWN)
        theirs = schedulers if module not in SCHEDULER_WORDS else frozenset()
        wrong += [f"{module}:{w}" for w in _engine_branches(path, names, words, own, keys, theirs)]
    assert not wrong, wrong


def test_the_engine_rule_finds_a_branch(tmp_path):
    names = _engine_names()[0]
    branchy = tmp_path / "branchy.py"
    branchy.write_text('if meta.get("engine") == "slurm":\n    pass\nif e in (BOX, SLURM):\n    x = row["slurm_job_id"]\n'
                       'y = "NODE_FAIL"\nlaunch(engine="slurm" if slurm else None)\n')
    found = _engine_branches(branchy, names, _engine_words(), False)
    assert sorted(f.split(":")[0] for f in found) == ["1", "3", "4", "5", "6"], found


def test_the_engine_rule_finds_an_engines_key_or_a_schedulers_word_in_a_table(tmp_path):
    """The leaks of issue 35 a fourth engine would trip on: a row's keys listing `slurm_job_id`, an
    answer's shape spelling it, a profile's scheduler named by hand (`SCHEDULED = ("k8s-job",)`).
    A docstring may say them."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text('"""Rows carry slurm_job_id; k8s-job is refused."""\n'
                     'ROW = ("job_id", "slurm_job_id")\nSHAPE = "engine:s slurm_job_id:s? engine_job_id:s?"\n'
                     'SCHEDULED = ("k8s-job",)\nFINE = ("engine_job_id", "job_id")\n')
    found = _engine_branches(leaky, _engine_names()[0], _engine_words(), False, _engine_keys(), _scheduler_words())
    assert sorted(found) == ["2: names 'slurm_job_id'", "3: names 'slurm_job_id'", "4: spells the detach 'k8s-job'"], found


def test_engine_modules_are_reached_through_the_registries_only():
    """Only a registry or the engine's own modules import an engine's module."""
    wrong = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() for d in deps
                   if _engine_of(d) and m not in REGISTRIES and _engine_of(m) != _engine_of(d))
    assert not wrong, wrong


def test_an_onbox_package_s_init_imports_nothing():
    """Every module of a package runs its __init__ first: an __init__ that imported its package's
    modules made reading one step line load the whole classifier, and one Slurm word every engine's
    supervisor (and subprocess, on a call that must start no process)."""
    heavy = []
    for init in sorted((Path(__file__).resolve().parent.parent / "gpuops" / "onbox").glob("*/__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)):
            heavy.append(str(init))
    assert not heavy
