"""`preflight`: is this box going to hurt the run? One round trip, verdicts with fixes."""

from functools import partial

from .common import on_hosts, run
from .flags import verb


@verb("preflight")
def preflight(c, host, identity, json, profile, path, qualify, timeout, all, verbose) -> None:
    """Check a GPU box before burning GPU-hours on it."""
    from ..ops import preflight as op
    from ..render import preflight as render

    def produce():
        return on_hosts("preflight", host, lambda t: op.preflight(t, profile=profile, paths=path or [],
                                                                    timeout_s=timeout, qualify=qualify), identity)

    run("preflight", json, produce, partial(render.render, show_all=all, verbose=verbose))


TASKS = (preflight,)
