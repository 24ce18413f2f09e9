"""`reap`: free GPU memory held by processes nobody needs any more, never touching live work."""

from functools import partial

from . import spinner
from .common import on_hosts, run
from .spinner import countdown
from .flags import DAY, number, seconds, verb


def _options(gpu, min_age, idle_window, term_wait):
    return (number("--gpu", gpu, 0, 1023, integer=True, what="a GPU index"),
            seconds("--min-age", min_age, high=366 * DAY), seconds("--idle-window", idle_window, high=3600),
            seconds("--term-wait", term_wait))


@verb(help={
    "host": "'local' (default), an ssh_config alias or user@host:port; comma-separate several",
    "identity": "SSH private key file to use",
    "gpu": "only holders of this GPU index",
    "min-age": "seconds a holder must have run before it counts as idle or orphaned (default 600)",
    "idle-window": ("seconds over which GPU utilisation and each holder's own CPU and I/O are sampled; any GPU use, "
                    "or more than a trickle of CPU or I/O, means busy (default 10)"),
    "term-wait": "seconds between SIGTERM and SIGKILL (default 10)",
    "yes": "signal the reapable holders (without it: print the plan, change nothing, exit 5 if any)",
    "plan": "with --yes: reap only if the reapable set is still this plan id's (from a dry run's data.plan); "
            "else exit 5 with the new plan",
    "json": "print one JSON envelope instead of tables",
    "all": "as --verbose, and list every passing check on its own line, even when that takes more than a screen",
    "verbose": "each finding in full: its evidence and fix (default: one line per finding)",
})
def reap(c, host="local", identity=None, gpu=None, min_age="600", idle_window="10", term_wait="10", yes=False,
         plan=None, json=False, all=False, verbose=False):
    """Find the processes holding GPU memory and reap the orphaned, finished and idle ones."""
    from ..ops import reap as op
    from ..render import reap as render

    def produce():
        index, age, window, wait = _options(gpu, min_age, idle_window, term_wait)
        # the box samples GPU use over the window only when some process holds a GPU
        with spinner.show(countdown(f"reap: watching GPU holders for up to {window:g}s", window)):
            return on_hosts("reap", host, lambda t: op.reap(t, gpu=index, min_age=age, idle_window=window,
                                                            term_wait=wait, yes=yes, plan=plan), identity)

    run("reap", json, produce, partial(render.render, show_all=all, verbose=verbose), waiting=None)


TASKS = (reap,)
