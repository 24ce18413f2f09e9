"""Start the SSH handshake while the program is still starting.

An OpenSSH handshake takes ~0.2 s, and importing Python, Invoke and a verb's modules another
~0.1 s; a verb may then walk a local tree before its first remote call. `gpuops ... --host H`
therefore calls start() first thing, before those imports: a background ControlMaster for H
begins shaking hands at once, and target_for() hands the verb a target that adopts it, so the
handshake overlaps the start-up instead of following it.

Only plain OpenSSH transports are warmed (not paramiko, not `local`). The program reads the host
from argv with gpuops.cli.switches, the way Invoke will, so a `--host=` that is really another
flag's value is never contacted. When an earlier call's master is still kept (gpuops.remote.mux)
there is nothing to warm. A target's own master that is never adopted (a usage error, a verb that
does not connect) is closed when the program exits; if the program is killed instead,
ControlPersist ends it within half a minute of idleness. A kept master stays, as it would have
after a verb that used it.
"""

import atexit

from .hostspec import is_local, prefetch, resolve, split_hosts

_MAX_HOSTS = 8  # the fan-out's pool size: warming more would only queue handshakes
_waiting: dict = {}


def start(host_value, identity=None) -> None:
    """Open a background master for each remote host in `host_value` (as --host takes it).
    Never raises: a bad spec or an unknown alias is reported later by the verb itself."""
    if not host_value:
        return
    specs = [s for s in split_hosts(host_value)[:_MAX_HOSTS] if not is_local(s)]
    # ssh's answer for each host is on its way while the transport's modules load.
    for spec in specs:
        prefetch(spec)
    from .openssh import OpenSSHTarget, chosen

    if chosen() != "openssh":
        return
    for spec in specs:
        if (spec, identity) in _waiting:
            continue
        try:
            target = OpenSSHTarget(resolve(spec, identity), identity)
            target.start_master()
        except Exception:  # noqa: BLE001 - a head start must never be the thing that fails
            continue
        _waiting[(spec, identity)] = target


def take(spec, identity=None):
    """The warmed target for this host, once; None when there is none."""
    return _waiting.pop((spec, identity), None)


@atexit.register
def _close_unused() -> None:
    while _waiting:
        _, target = _waiting.popitem()
        target.close()
