"""The type checker holds what pyproject.toml's [tool.mypy] names clean: records, engines, operations
and I/O primitives are checked where annotated, and a wrong annotation fails the suite."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_nothing_in_what_it_checks():
    api = pytest.importorskip("mypy.api")
    cache = ROOT / ".pytest_cache" / "mypy"
    out, err, code = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache)])
    assert code == 0, out[-4000:] + err[-2000:]


def _annotated(path: Path) -> tuple:
    import ast

    done = total = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = a.posonlyargs + a.args + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p]
            total += 1
            done += node.returns is not None or any(p.annotation is not None for p in params)
    return done, total


def test_at_least_half_of_the_functions_say_their_types():
    """Issue 35's floor: a function that names its parameters' or its result's type tells the reader
    and the type checker what flows through it. The annotations added by a codemod were checked at
    run time (typeguard over the unit tier) and the ones that lied were dropped."""
    counts = [_annotated(p) for p in (ROOT / "gpuops").rglob("*.py")]
    done, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
    assert done / total >= 0.5, f"{done} of {total} functions annotated"
