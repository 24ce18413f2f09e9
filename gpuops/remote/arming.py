"""Arming the box's resident helper (gpuops.remote.resident) from a process of its own.

A master's second call asks for a helper. Arming takes an exec channel and a forward request:
about as long as the call itself, longer on a loaded box. Done on a thread of the call, it was
cut short when the call ended, and every later call tried again (a 64-box fleet view then paid
for 64 arms on every refresh). So the call starts `python -m gpuops.remote.arming` detached and
returns; a marker beside the master's socket keeps a second call from starting another while
one is under way, and a marker older than any arm can last is taken as left by one that died
(gpuops.remote.resident.arm_later starts it).
"""

import contextlib
import os
import sys

from . import mux, resident


def main(argv) -> None:
    """argv: host spec, master socket, idle seconds[, identity]."""
    from .hostspec import resolve
    from .openssh import OpenSSHTarget

    spec, master_socket, idle_s = argv[:3]
    identity = argv[3] if len(argv) > 3 else None
    try:
        target = OpenSSHTarget(resolve(spec, identity), identity, rides_only=True)
        try:
            if target.kept_socket == master_socket:  # the master the asking call rides, nothing else
                resident.arm(target, master_socket, int(idle_s))
        finally:
            target.close()
    except Exception:  # noqa: BLE001 - a shortcut for later calls; exec channels serve meanwhile
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(master_socket + mux.ARMING_SUFFIX)


if __name__ == "__main__":
    main(sys.argv[1:])
