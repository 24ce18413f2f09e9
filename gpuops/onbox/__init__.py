"""Code that runs ON the GPU box, and the bundler that ships it there.

Everything under this package is stdlib-only and must run on the box's python3 >= 3.6: no
f-string '=' specifiers, no walrus, no dataclasses, no third-party imports. Modules import
each other relatively (`from ..host import sysroot`), so the same files work imported locally and
inlined into one script for the box. The code lives in sub-packages by concern (host, triage, run,
track, gang, sync, reaper, facts, engines, jobs, helper; README "Architecture" draws their order);
this module alone is the workstation's, and is never shipped.

`script(entry)` returns a single source text that registers the needed modules under a
private package name and calls `<entry>.main(argv)`. It is sent through the exec channel's
stdin (see gpuops.remote.wrap), never through argv and never through Invoke's in_stream. An entry
is named by its module's leaf name (`probe`, `job_launch`) wherever it lives under this package:
entries() finds them, and no two entries share a leaf name.

The bundle keeps gpuops' package structure under the private root (gpuops.onbox.triage.scan is
<root>.onbox.triage.scan), so relative imports resolve on the box as they do here. A bundled module
is named by its path under gpuops: `onbox.triage.scan`, `onbox.engines` (that package's __init__),
`xid`. Besides this package it ships only BELOW: the bottom layer of gpuops, plain tables and
rules that import nothing above them (the Xid table, the job states, findings, the envelope,
errors, units), which the workstation reads everywhere and the box's classifier reads too (issue
26: no second rule set). A package's __init__ runs on the box only when shipped code imports a name
defined in it; otherwise the package is an empty namespace there. What BELOW ships must meet this
package's rules (the standard library, Python 3.6: tests/test_onbox_bundle.py runs all of it under
python3.6 -S).
"""

import functools
import os
import re
from typing import Sequence

_ROOT = "gpuops_box"  # gpuops' private name on the box: never the gpuops a box may have installed
# What the bundle may ship besides this package: gpuops' bottom modules (tests/test_layout.py LAYERS).
BELOW = ("xid", "states", "findings", "envelope", "errors", "units")
# Entries that look beyond the standard library (pynvml for the probe, the reaper and the fleet's
# samples; the torch probe, for the probe and a gang's preflight): they get the box's
# site-packages on every path, an exec channel's `python3` and the resident helper's worker alike
# (gpuops.onbox.helper.resident runs site.main() for them). Every other entry runs with `python3 -S`,
# which spares the site-packages scan and its .pth files on every call.
NEEDS_SITE = frozenset(("probe", "reap", "fleet_facts", "gang_facts", "qualify"))
# Entries whose children (the user's jobs, the resident helper's workers) inherit the
# interpreter's environment: always run over an exec channel, as the login shell resolves python3
# (see gpuops.remote.base.Target.ship).
STARTS_JOBS = frozenset(("job_launch", "job_queue", "resident"))
_HERE = os.path.dirname(os.path.abspath(__file__))
_GPUOPS = os.path.dirname(_HERE)

# A bundled module runs its code the first time a name in it is looked up (a `from .x import y`,
# an `x.f()`): the job entries bundle every engine's box half, and a call runs only its job's.
_LOADER = '''import sys, types
class _Lazy(types.ModuleType):
    def __getattr__(self, name):
        src = self.__dict__.pop("_gpuops_src", None)
        if src is None:
            raise AttributeError(name)
        exec(compile(src, self.__file__, "exec"), self.__dict__)
        return getattr(self, name)
def _package(full):
    if full not in sys.modules:
        mod = sys.modules[full] = _Lazy(full); mod.__path__ = []; mod.__package__ = full
        parent, _, leaf = full.rpartition(".")
        if parent:
            setattr(_package(parent), leaf, mod)
    return sys.modules[full]
def _define(name, src, is_package):
    full = {root!r} + "." + name; parent, _, leaf = full.rpartition(".")
    mod = _package(full) if is_package else _Lazy(full)
    mod.__package__ = full if is_package else parent; mod.__file__ = "<" + full + ">"  # module_file()
    mod._gpuops_src = src
    sys.modules[full] = mod; setattr(_package(parent), leaf, mod)
'''


def _parts(name: str) -> list:
    """A bundled module's path under gpuops, e.g. ['onbox', 'triage', 'steps'], ['xid']."""
    return name.split(".")


def _file(parts) -> str:
    base = os.path.join(_GPUOPS, *parts)
    return os.path.join(base, "__init__.py") if os.path.isdir(base) else base + ".py"


def _is_package(name: str) -> bool:
    return os.path.isdir(os.path.join(_GPUOPS, *_parts(name)))


@functools.lru_cache(maxsize=None)
def _source(name: str) -> str:
    with open(_file(_parts(name)), encoding="utf-8") as f:
        return f.read()


def _names() -> list:
    """Every module under this package, sub-packages' __init__ included, this module not."""
    found = []
    for dirpath, dirs, files in os.walk(_HERE):
        dirs[:] = sorted(d for d in dirs if os.path.isfile(os.path.join(dirpath, d, "__init__.py")))
        package = ["onbox"] + os.path.relpath(dirpath, _HERE).split(os.sep)
        package = package if dirpath != _HERE else ["onbox"]
        for f in files:
            if f.endswith(".py"):
                found.append(".".join(package if f == "__init__.py" else package + [f[:-3]]))
    return sorted(n for n in found if n != "onbox")


def sources() -> dict:
    """{module name: source} of every onbox module and of what they ship from BELOW: what the
    resident helper compiles once. Dependencies come before their dependents (see `loader`)."""
    names = {}
    for module in _names():
        names.update(dict.fromkeys(closure(module)))
    return {name: _source(name) for name in names}


def module_file(name: str) -> str:
    """The file name a bundled module (or an entry) is compiled under (its __file__ on the box)."""
    return "<{}.{}>".format(_ROOT, _bundled(name))


@functools.lru_cache(maxsize=None)
def _entries() -> dict:
    """{leaf name: bundled name} of the modules that can be shipped and run: those with a main(argv)."""
    found = {}
    for name in _names():
        if re.search(r"^def main\(argv\)", _source(name), re.M):
            leaf = name.rpartition(".")[2]
            if leaf in found:
                raise ValueError("two on-box entries are named {}: {} and {}".format(leaf, found[leaf], name))
            found[leaf] = name
    return found


def entries() -> list:
    """The entries' names, as Target.ship and run_onbox take them."""
    return sorted(_entries())


def _bundled(name: str) -> str:
    """An entry's bundled name; a bundled name as it is."""
    return _entries().get(name, name)


_RELATIVE = re.compile(r"^\s*from (\.+)([\w.]*) import ([\w, ]+)", re.M)


def imports(name: str) -> list:
    """The bundled modules that module `name` imports relatively (a name imported from a package
    that is no module of it is the package's __init__). ValueError for one that is neither under
    this package nor in BELOW."""
    parts = _parts(name)
    package = parts if _is_package(name) else parts[:-1]
    found = []
    for dots, sub, names in _RELATIVE.findall(_source(name)):
        base = package[:len(package) - len(dots) + 1] + (sub.split(".") if sub else [])
        for word in [n.split()[0] for n in names.split(",") if n.strip()]:
            target = base + [word] if os.path.exists(_file(base + [word])) else base
            found.append(_named(target, name))
    return list(dict.fromkeys(found))


def _named(parts, importer) -> str:
    dotted = ".".join(parts)
    shipped = dotted in BELOW or (parts[0] == "onbox" and len(parts) > 1)
    if not shipped or not os.path.exists(_file(parts)):
        raise ValueError("{} imports gpuops.{}, which the on-box bundle does not ship (onbox.BELOW)".format(
            module_file(importer), dotted))
    return dotted


def closure(entry: str) -> list:
    """`entry` (an entry's or a bundled module's name) and everything it imports, dependencies
    before dependents."""
    order, seen = [], set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for dep in imports(name):
            visit(dep)
        order.append(name)

    visit(_bundled(entry))
    return order


@functools.lru_cache(maxsize=None)
def script(entry: str) -> bytes:
    """One self-contained script that runs onbox module `entry` and what it imports."""
    call = "sys.exit(sys.modules[{!r}].main(sys.argv[1:]))\n".format(_ROOT + "." + _bundled(entry))
    return (loader(closure(entry)) + call).encode("utf-8")


def loader(names: Sequence[str]) -> str:
    """Source that registers bundled modules `names`; each runs when a name in it is first used."""
    parts = [_LOADER.format(root=_ROOT)]
    for name in names:
        parts.append("_define({!r}, {!r}, {!r})\n".format(name, _source(name), _is_package(name)))
    return "".join(parts)
