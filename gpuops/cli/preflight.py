"""`preflight`: is this box going to hurt the run? One round trip, verdicts with fixes."""

from functools import partial

from .common import on_hosts, run
from .flags import seconds, verb


@verb(iterable=["path"], help={
    "host": "'local' (default), an ssh_config alias or user@host:port; comma-separate several",
    "identity": "SSH private key file to use",
    "json": "print one JSON envelope instead of tables",
    "profile": "platform profile whose paths and thresholds apply (see `gpuops profiles`)",
    "path": "extra directory whose free bytes and inodes to check (repeatable); DIR:SIZE (e.g. /data/ckpt:200G) "
            "sets the free space it needs, else a 1 GiB floor applies",
    "timeout": "seconds the on-box probe may run before it is killed on the box",
    "all": "as --verbose, and list every passing check on its own line, even when that takes more than a screen",
    "verbose": "each finding in full: its evidence and fix (default: one line per finding)",
})
def preflight(c, host="local", identity=None, json=False, profile=None, path=None, timeout="60", all=False,
              verbose=False):
    """Check a GPU box before burning GPU-hours on it."""
    from ..ops import preflight as op
    from ..render import preflight as render

    def produce():
        timeout_s = seconds("--timeout", timeout, low=1, whole=True)
        return on_hosts("preflight", host, lambda t: op.preflight(t, profile=profile, paths=path or [],
                                                                    timeout_s=timeout_s), identity)

    run("preflight", json, produce, partial(render.render, show_all=all, verbose=verbose))


TASKS = (preflight,)
