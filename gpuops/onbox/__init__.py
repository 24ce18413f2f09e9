"""Code that runs ON the GPU box, and the bundler that ships it there.

Everything in this package is stdlib-only and must run on the box's python3 >= 3.6: no
f-string '=' specifiers, no walrus, no dataclasses, no third-party imports. Modules import
each other relatively (`from . import sysroot`), so the same files work imported locally and
inlined into one script for the box.

`script(entry)` returns a single source text that registers the needed modules under a
private package name and calls `<entry>.main(argv)`. It is sent through the exec channel's
stdin (see gpuops.remote.wrap), never through argv and never through Invoke's in_stream.
"""

import functools
import os
import re

_PKG = "gpuops_onbox"
# Entries that look beyond the standard library (pynvml for the probe, the reaper and the fleet's
# samples; the torch probe, for the probe and a gang's preflight): they get the box's
# site-packages on every path, an exec channel's `python3` and the resident helper's worker alike
# (gpuops.onbox.resident runs site.main() for them). Every other entry runs with `python3 -S`,
# which spares the site-packages scan and its .pth files on every call.
NEEDS_SITE = frozenset(("probe", "reap", "fleet_facts", "gang_facts"))
# Entries whose children (the user's jobs, the resident helper's workers) inherit the
# interpreter's environment: always run over an exec channel, as the login shell resolves python3
# (see gpuops.remote.base.Target.ship).
STARTS_JOBS = frozenset(("job_launch", "job_queue", "resident"))
_HERE = os.path.dirname(os.path.abspath(__file__))

# A bundled module runs its code the first time a name in it is looked up (a `from .x import y`,
# an `x.f()`): the job entries bundle every engine's box half, and a call runs only its job's.
_LOADER = '''import sys, types
_pkg = types.ModuleType({pkg!r}); _pkg.__path__ = []; sys.modules[{pkg!r}] = _pkg
class _Lazy(types.ModuleType):
    def __getattr__(self, name):
        src = self.__dict__.pop("_gpuops_src", None)
        if src is None:
            raise AttributeError(name)
        exec(compile(src, self.__file__, "exec"), self.__dict__)
        return getattr(self, name)
def _define(name, src):
    full = {pkg!r} + "." + name
    mod = _Lazy(full); mod.__package__ = {pkg!r}; mod.__file__ = "<" + full + ">"  # module_file()
    mod._gpuops_src = src
    sys.modules[full] = mod; setattr(_pkg, name, mod)
'''


@functools.lru_cache(maxsize=None)
def _source(name: str) -> str:
    with open(os.path.join(_HERE, name + ".py"), encoding="utf-8") as f:
        return f.read()


def _names() -> list:
    return sorted(f[:-3] for f in os.listdir(_HERE) if f.endswith(".py") and f != "__init__.py")


def sources() -> dict:
    """{module name: source} of every onbox module: what the resident helper compiles once."""
    return {name: _source(name) for name in _names()}


def module_file(name: str) -> str:
    """The file name a bundled module is compiled under (its __file__ on the box)."""
    return "<{}.{}>".format(_PKG, name)


def entries() -> list:
    """The modules that can be shipped and run: those with a main(argv)."""
    return [n for n in _names() if re.search(r"^def main\(argv\)", _source(n), re.M)]


_RELATIVE = re.compile(r"^\s*from \.(\w*) import ([\w, ]+)", re.M)


def imports(name: str) -> list:
    """Sibling onbox modules that module `name` imports relatively."""
    found = []
    for sub, names in _RELATIVE.findall(_source(name)):
        found += [sub] if sub else [n.strip() for n in names.split(",") if n.strip()]
    return found


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
    names = closure(entry)
    parts = [_LOADER.format(pkg=_PKG)]
    for name in names:
        parts.append("_define({!r}, {!r})\n".format(name, _source(name)))
    parts.append("sys.exit(sys.modules[{!r}].main(sys.argv[1:]))\n".format(_PKG + "." + entry))
    return "".join(parts).encode("utf-8")
