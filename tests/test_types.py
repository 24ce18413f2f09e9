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
