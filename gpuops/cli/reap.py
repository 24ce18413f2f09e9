"""`reap`: free GPU memory held by processes nobody needs any more, never touching live work."""

from functools import partial

from . import spinner
from .common import on_hosts, run
from .spinner import countdown
from .flags import verb


@verb("reap")
def reap(c, host, identity, gpu, min_age, idle_window, term_wait, yes, plan, json, all, verbose) -> None:
    """Find the processes holding GPU memory and reap the orphaned, finished and idle ones."""
    from ..ops import reap as op
    from ..render import reap as render

    def produce():
        # the box samples GPU use over the window only when some process holds a GPU
        with spinner.show(countdown(f"reap: watching GPU holders for up to {idle_window:g}s", idle_window)):
            return on_hosts("reap", host, lambda t: op.reap(t, gpu=gpu, min_age=min_age, idle_window=idle_window,
                                                            term_wait=term_wait, yes=yes, plan=plan), identity)

    run("reap", json, produce, partial(render.render, show_all=all, verbose=verbose), waiting=None)


TASKS = (reap,)
