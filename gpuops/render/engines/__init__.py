"""What a person reads of a job engine's work: each engine's words, found by its registry name.

An engine (gpuops.engines) answers facts: a job's record, the targets its box half would stop, how
a stop ended. How those read is here, one module per engine named after it (the name in
gpuops.engines.ENGINES), each holding WORDS (a gpuops.render.engines.base.Words): a new engine is
its module here too, and nothing branches on which engine it is (tests/test_layout.py). The verbs
(gpuops.ops) make their summaries from these words; tests/test_engine_seam.py holds every
registered engine to having them.
"""

import importlib

from .base import Words


def of(name: str) -> Words:
    """The words of the engine `name`: an engine's own name from gpuops.engines' registry (which
    refuses a name it does not hold), never a box's or an agent's text."""
    return importlib.import_module(f"{__name__}.{name}").WORDS
