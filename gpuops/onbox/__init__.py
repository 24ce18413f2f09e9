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

_PKG = "gpuops_onbox"
_HERE = os.path.dirname(os.path.abspath(__file__))

_LOADER = '''import sys, types
_pkg = types.ModuleType({pkg!r}); _pkg.__path__ = []; sys.modules[{pkg!r}] = _pkg
def _define(name, src):
    full = {pkg!r} + "." + name
    mod = types.ModuleType(full); mod.__package__ = {pkg!r}; mod.__file__ = "<" + full + ">"
    sys.modules[full] = mod; setattr(_pkg, name, mod)
    return mod, src
_pending = []
'''


@functools.lru_cache(maxsize=None)
def _source(name: str) -> str:
    with open(os.path.join(_HERE, name + ".py"), encoding="utf-8") as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def script(entry: str, deps: tuple = ("sysroot",)) -> bytes:
    """One self-contained script that runs onbox module `entry` with `deps` available."""
    names = list(dict.fromkeys(deps + (entry,)))
    parts = [_LOADER.format(pkg=_PKG)]
    for name in names:
        parts.append("_pending.append(_define({!r}, {!r}))\n".format(name, _source(name)))
    # Define every module object first, then execute in order, so relative imports resolve.
    parts.append(
        "for _m, _s in _pending:\n"
        "    exec(compile(_s, _m.__file__, 'exec'), _m.__dict__)\n"
        "sys.exit(sys.modules[{!r}].main(sys.argv[1:]))\n".format(_PKG + "." + entry)
    )
    return "".join(parts).encode("utf-8")
