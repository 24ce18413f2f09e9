"""`reap`: free GPU memory held by processes nobody needs any more, never touching live work."""

from ..ops.hosts import on_hosts
from .common import run
from .flags import verb


def _options(gpu, min_age, idle_window, term_wait):
    from ..errors import UsageError

    if gpu is not None:
        try:
            gpu = int(gpu)
        except ValueError:
            raise UsageError(f"--gpu takes a GPU index (0, 1, ...), not {gpu!r}") from None
        if gpu < 0:
            raise UsageError(f"--gpu takes a GPU index (0, 1, ...), not {gpu}")
    for flag, value in (("--min-age", min_age), ("--idle-window", idle_window), ("--term-wait", term_wait)):
        if value < 0:
            raise UsageError(f"{flag} takes seconds >= 0, not {value}")
    return gpu


@verb(help={
    "host": "'local' (default), an ssh_config alias or user@host:port; comma-separate several",
    "identity": "SSH private key file to use",
    "gpu": "only holders of this GPU index",
    "min-age": "seconds a holder must have run before it counts as idle or orphaned (default 600)",
    "idle-window": "seconds over which GPU utilisation is sampled; any use means busy (default 10)",
    "term-wait": "seconds between SIGTERM and SIGKILL (default 10)",
    "yes": "signal the reapable holders (without it: print the plan, change nothing, exit 5 if any)",
    "json": "print one JSON envelope instead of tables",
})
def reap(c, host="local", identity=None, gpu=None, min_age=600, idle_window=10, term_wait=10, yes=False, json=False):
    """Find the processes holding GPU memory and reap the orphaned, finished and idle ones."""
    from ..ops import reap as op
    from ..render import reap as render

    def produce():
        index = _options(gpu, min_age, idle_window, term_wait)
        return on_hosts("reap", host, lambda t: op.reap(t, gpu=index, min_age=min_age, idle_window=idle_window,
                                                        term_wait=term_wait, yes=yes), identity)

    run("reap", json, produce, render.render)


TASKS = (reap,)
