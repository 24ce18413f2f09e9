"""`profiles`, `gotcha` and `teardown-check`: platform facts, the gotcha reference, teardown safety."""

from functools import partial

from .common import on_hosts, run
from .flags import number, verb


@verb(help={
    "name": "show one profile in full (default: list them all)",
    "host": "guess the platform of this box from its hostname, mounts and env names (reported, never applied)",
    "identity": "SSH private key file to use with --host",
    "json": "print one JSON envelope instead of tables",
})
def profiles(c, name=None, host=None, identity=None, json=False):
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


@verb(help={
    "query": "a gotcha id (U7, AD4, RP3) or keywords (inode, xid, crlf, stdin, zombie …)",
    "limit": "at most this many entries (default 5)",
    "json": "print one JSON envelope instead of text",
})
def gotcha(c, query=None, limit="5", json=False):
    """Look up a gotcha: what you see, why, the fix, and how gpuops checks or prevents it."""
    from ..ops import catalog
    from ..render import catalog as render

    run("gotcha", json, lambda: catalog.find_gotchas(query, number("--limit", limit, 1, 1000, integer=True)),
        render.render_gotchas)


@verb(iterable=["keep"], help={
    "host": "the box, named as it was when pulling (the pull index is keyed by it)",
    "profile": "platform profile: decides what the verb deletes (see `gpuops profiles`)",
    "keep": "path on the box you need after teardown: absolute, or relative to the login home (repeatable)",
    "verb": "stop (the platform's meter-stop verb, default), pause, or destroy",
    "json": "print one JSON envelope instead of tables",
    "all": "as --verbose, and list every passing check on its own line, even when that takes more than a screen",
    "verbose": "each finding in full: its evidence and fix (default: one line per finding)",
})
def teardown_check(c, host=None, profile=None, keep=None, verb="stop", json=False, all=False, verbose=False):
    """Before giving a box back: what gets deleted, and is every kept path pulled and verified? Exit 1 if not."""
    from ..ops import teardown
    from ..render import teardown as render

    run("teardown-check", json, lambda: teardown.teardown_check(host, profile, keep or [], verb),
        partial(render.render, show_all=all, verbose=verbose))


TASKS = (profiles, gotcha, teardown_check)
