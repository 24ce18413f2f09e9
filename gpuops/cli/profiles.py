"""`profiles`, `gotcha` and `teardown-check`: platform facts, the gotcha reference, teardown safety."""

from functools import partial

from .common import on_hosts, run
from .flags import verb


@verb("profiles")
def profiles(c, name, host, identity, json) -> None:
    """List platform profiles, show one, or guess which one a box is on."""
    from ..ops import catalog
    from ..render import catalog as render

    if host:
        produce = lambda: on_hosts("profiles", host, catalog.guess_on, identity)  # noqa: E731
    elif name:
        produce = lambda: catalog.show_profile(name)  # noqa: E731
    else:
        produce = catalog.list_profiles
    run("profiles", json, produce, render.render_profiles)


@verb("gotcha")
def gotcha(c, query, limit, json) -> None:
    """Look up a gotcha: what you see, why, the fix, and how gpuops checks or prevents it."""
    from ..ops import catalog
    from ..render import catalog as render

    run("gotcha", json, lambda: catalog.find_gotchas(query, limit), render.render_gotchas)


@verb("teardown-check")
def teardown_check(c, host, profile, keep, verb, json, all, verbose) -> None:
    """Before giving a box back: what gets deleted, and is every kept path pulled and verified? Exit 1 if not."""
    from ..ops import teardown
    from ..render import teardown as render

    run("teardown-check", json, lambda: teardown.teardown_check(host, profile, keep or [], verb),
        partial(render.render, show_all=all, verbose=verbose))


TASKS = (profiles, gotcha, teardown_check)
