"""Who hears that a handshake is being waited for, so that a person is not left before a blank
screen: the transports announce each SSH handshake they wait on, with its deadline, and the CLI
shows it on a terminal (gpuops.cli.spinner). Nothing listens unless a front end says so."""

import contextlib
import time

_listener = None


def listen(listener) -> None:
    """listener(host, deadline) -> a context manager held while the handshake lasts (deadline in
    time.monotonic() seconds); None: nobody listens."""
    global _listener
    _listener = listener


@contextlib.contextmanager
def connecting(host: str, seconds):
    """Held while a handshake to `host`, given up after `seconds`, is waited for."""
    if _listener is None:
        yield
        return
    with _listener(host, time.monotonic() + seconds):
        yield
