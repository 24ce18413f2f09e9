"""Code that runs ON the GPU box, and the bundler that ships it there.

Everything in this package is stdlib-only and must run on the box's python3 >= 3.6: no
f-string '=' specifiers, no walrus, no dataclasses, no third-party imports. Modules import
each other relatively (`from . import sysroot`), so the same files work imported locally and
inlined into one script for the box.

`script(entry)` returns a single source text that registers the needed modules under a
private package name and calls `<entry>.main(argv)`. It is sent through the exec channel's
stdin (see gpuops.remote.wrap), never through argv and never through Invoke's in_stream.

A few modules from above this package are shipped too (BEYOND): triage's classifier and the
tables it reads, so the box's supervisor judges a failed attempt with triage's own rules (issue
26: no second rule set; gpuops.onbox.triage.logclass). They stay where they are, and the bundle keeps
gpuops' package structure under the private root (gpuops.onbox.triage.scan is <root>.triage.scan,
this package <root>.onbox), so their relative imports (`from ..onbox import steps`, `from . import
signatures`) resolve on the box as they do here. Moving them into this package instead would
have renamed most of triage (and the Xid and job-state tables the workstation reads everywhere)
for the sake of the bundler. The preflight's and diagnose's tracker rules are shipped for the same
reason: the supervisor judges a run's first minutes with them (gpuops.onbox.track.trackwatch). A bundled module is named relative to this package, as it would be
imported from here: `steps`, `..triage.scan`, `..triage` (that package's __init__). A package's
__init__ runs on the box only when shipped code imports a name defined in it; otherwise the
package is an empty namespace there. What BEYOND ships must meet this package's rules (the
standard library, Python 3.6: tests/test_onbox_bundle.py runs all of it under python3.6 -S).
"""

import functools
import os
import re

_ROOT = "gpuops_box"  # gpuops' private name on the box: never the gpuops a box may have installed
_PKG = _ROOT + ".onbox"
# What the bundle may ship from above this package (paths under gpuops/), with what it imports.
BEYOND = ("triage", "jobs.states", "xid", "findings", "envelope", "errors", "units", "checks.trackers",
          "diagnose.trackers")
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
    """A bundled module's path under gpuops, e.g. ['onbox', 'steps'], ['triage', 'scan']."""
    return name[2:].split(".") if name.startswith("..") else ["onbox", name]


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
    return sorted(f[:-3] for f in os.listdir(_HERE) if f.endswith(".py") and f != "__init__.py")


def sources() -> dict:
    """{module name: source} of every onbox module and of what they ship from BEYOND: what the
    resident helper compiles once. Dependencies come before their dependents (see `loader`)."""
    names = {}
    for module in _names():
        names.update(dict.fromkeys(closure(module)))
    return {name: _source(name) for name in names}


def module_file(name: str) -> str:
    """The file name a bundled module is compiled under (its __file__ on the box)."""
    return "<{}.{}>".format(_ROOT, ".".join(_parts(name)))


def entries() -> list:
    """The modules that can be shipped and run: those with a main(argv)."""
    return [n for n in _names() if re.search(r"^def main\(argv\)", _source(n), re.M)]


_RELATIVE = re.compile(r"^\s*from (\.+)([\w.]*) import ([\w, ]+)", re.M)


def imports(name: str) -> list:
    """The bundled modules that module `name` imports relatively (a name imported from a package
    that is no module of it is the package's __init__). ValueError for one outside BEYOND."""
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
    if len(parts) == 2 and parts[0] == "onbox":
        return parts[1]
    dotted = ".".join(parts)
    if not any(dotted == b or dotted.startswith(b + ".") for b in BEYOND):
        raise ValueError("{} imports gpuops.{}, which the on-box bundle does not ship (onbox.BEYOND)".format(
            module_file(importer), dotted))
    return ".." + dotted


def closure(entry: str) -> list:
    """`entry` and everything it imports, dependencies before dependents."""
    order, seen = [], set()

    def visit(name):
        if name in seen:
            return
        seen.add(name)
        for dep in imports(name):
            visit(dep)
        order.append(name)

    visit(entry)
    return order


@functools.lru_cache(maxsize=None)
def script(entry: str) -> bytes:
    """One self-contained script that runs onbox module `entry` and what it imports."""
    call = "sys.exit(sys.modules[{!r}].main(sys.argv[1:]))\n".format(_PKG + "." + entry)
    return (loader(closure(entry)) + call).encode("utf-8")


def loader(names) -> str:
    """Source that registers bundled modules `names`; each runs when a name in it is first used."""
    parts = [_LOADER.format(root=_ROOT)]
    for name in names:
        parts.append("_define({!r}, {!r}, {!r})\n".format(".".join(_parts(name)), _source(name), _is_package(name)))
    return "".join(parts)
