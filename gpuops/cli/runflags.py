"""The run policy's flags on `launch` (gpuops.jobs.runpolicy: retries from the newest complete
checkpoint, the stall kill, the time limit, retention, alerts), added to the verb the way
gpuops.cli.engineflags adds each engine's: the body receives them in one dict, `run_flags`."""

from ..jobs.runpolicy import HELP
from .engineflags import adds


def takes():
    """Decorate a verb whose body ends with `run_flags=None` (after @verb)."""
    return adds("run_flags", HELP, dict.fromkeys(HELP))


def policy(flags):
    """The run policy the flags ask for, or None for a plain job; UsageError for one that cannot work."""
    from ..jobs import runpolicy

    return runpolicy.build(**(flags or {}))
