"""One line on stderr that says what gpuops is waiting for, so a terminal is never left blank for
more than a moment: a handshake with its deadline, a box sampling for ten seconds, a wait. Only
on a terminal (a pipe or --json gets nothing), and only once a wait has lasted DELAY_S: an answer
quicker than that does not flicker, and a slower one never leaves the terminal blank for more than
a tenth of a second (at 0.4 s, a cold handshake showed nothing for up to 0.65 s).

What is waited for is a stack: the newest wait is shown (a handshake inside a verb's own wait),
and the line goes when the last one ends."""

import contextlib
import sys
import threading
import time

from ..units import duration
from .firstpaint import DELAY_S


class Spinner:
    def __init__(self, console) -> None:
        self._console = console
        self._waits = []
        self._lock = threading.Lock()  # the stack; the only lock the display thread takes
        self._display = threading.Lock()  # starting and stopping the display, one at a time
        self._live = None
        self._timer = None
        self._dots = None

    @contextlib.contextmanager
    def waiting(self, text):
        """Shown while the block runs; `text` is a string or a callable giving the current one
        (for a countdown)."""
        entry = [text]
        with self._display:
            with self._lock:
                self._waits.append(entry)
            if self._live is None and self._timer is None:
                self._timer = threading.Timer(DELAY_S, self._show)
                self._timer.daemon = True
                self._timer.start()
        try:
            yield
        finally:
            with self._lock:
                self._waits.remove(entry)
            self._end()

    def connecting(self, host: str, deadline):
        """A remote.patience listener: the handshake, with the time left before ssh gives up."""
        return self.waiting(lambda: f"connecting to {host} (gives up in {duration(deadline - time.monotonic())})")

    def _show(self) -> None:
        from rich.live import Live

        with self._display:
            self._timer = None
            with self._lock:
                if not self._waits or self._live is not None:
                    return
            self._live = Live(self, console=self._console, transient=True, refresh_per_second=8,
                              redirect_stdout=False)
            self._live.start()

    def _end(self) -> None:
        """Take the line away once nothing is waited for (Live.stop waits for the display thread,
        which takes only the stack's lock: never hold that here)."""
        with self._display:
            with self._lock:
                if self._waits:
                    return
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._live is not None:
                self._live.stop()
                self._live = None

    def __rich__(self):
        from rich.spinner import Spinner as Dots
        from rich.text import Text

        from ..render.inert import text as inert

        with self._lock:
            text = self._waits[-1][0] if self._waits else ""
        if self._dots is None:  # one for the whole display, so its frames turn
            self._dots = Dots("dots", style="dim")
        self._dots.update(text=Text(inert(text() if callable(text) else text)))
        return self._dots


_active = None


@contextlib.contextmanager
def active(as_json, quiet: bool = False):
    """While a verb runs: a Spinner on a terminal (not for --json, nor when the verb shows its own
    progress: `quiet`), told of every SSH handshake the verb waits for."""
    global _active
    if as_json or quiet or not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    from ..remote import patience

    _active = Spinner(Console(stderr=True))
    patience.listen(_active.connecting)
    try:
        yield
    finally:
        patience.listen(None)
        _active = None


def show(text: str):
    """A context in which the active Spinner (if any) shows `text` (a string or a callable)."""
    return _active.waiting(text) if _active is not None else contextlib.nullcontext()


def countdown(what, seconds):
    """'WHAT (Ns left)' counting down from now, for Spinner.waiting."""
    end = time.monotonic() + seconds
    return lambda: f"{what} ({duration(max(0.0, end - time.monotonic()))} left)"
