"""A platform profile's table for the jobs of one engine: `[NAME]` under the engine's registry name
(gpuops.engines.ENGINES), one module here per engine that has one, holding TABLE: a frozen
dataclass whose docstring says what the table is and whose fields are each the default of the
engine's flag of the same name ("" for none; gpuops.engines.base.Engine.profile_defaults).

A new engine's table is its module here: gpuops.profiles loads whichever there are, so no
profile code names an engine (tests/test_engine_seam.py holds each to a registered engine's flags).
"""

import importlib
import pkgutil


def tables() -> dict:
    """{engine name: its table's dataclass}, in name order."""
    return {m.name: importlib.import_module(f"{__name__}.{m.name}").TABLE
            for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)}
