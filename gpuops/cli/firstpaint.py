"""The spinner's first frames, painted before gpuops imports what a verb needs.

A connecting verb spends its first tenth of a second or more importing (the verb's module, rich,
the transport) before gpuops.cli.spinner can start: the terminal stayed blank for 0.14-0.20 s
warm and longer cold, where issue 38 asks for something within 0.1 s. So the entry point starts
this painter first (stdlib only, nothing else imported): at DELAY_S after the process started it
draws a plain spinner line on stderr and turns it until the program writes anything at all. The
first write to stdout or stderr (rich's own spinner, the report, an error, a Ctrl-C's line) takes
the line back first: it is erased, and the streams are the program's own again. An answer
quicker than DELAY_S never sees a frame.
"""

import atexit
import os
import sys
import threading

# The spinner's turn (this one's and gpuops.cli.spinner's): an answer quicker than this does not
# flicker, and a slower one never leaves the terminal blank for more than a tenth of a second.
DELAY_S = 0.08
FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"  # rich's "dots", the spinner that takes over from this one
TURN_S = 0.08
ERASE = "\r\x1b[2K"


class _Painter:
    def __init__(self, text: str, err, out) -> None:
        self.text, self.err, self.out = text, err, out
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.painted = False

    def run(self, delay_s: float) -> None:
        if self.done.wait(delay_s):
            return
        dim, plain = ("", "") if os.environ.get("NO_COLOR") else ("\x1b[2m", "\x1b[0m")
        turn = 0
        while True:
            with self.lock:
                if self.done.is_set():
                    return
                self.err.write(f"{ERASE}{dim}{FRAMES[turn % len(FRAMES)]}{plain} {self.text}")
                self.err.flush()
                self.painted = True
            turn += 1
            if self.done.wait(TURN_S):
                return

    def take_back(self) -> None:
        """Stop painting and erase the line; the streams are the program's again."""
        with self.lock:
            if self.done.is_set():
                return
            self.done.set()
            sys.stdout, sys.stderr = self.out, self.err
            if self.painted:
                self.err.write(ERASE)
                self.err.flush()


class _Claiming:
    """A stream whose first write takes the painter's line back, then writes as the stream does."""

    def __init__(self, stream, painter: _Painter) -> None:
        self._stream, self._painter = stream, painter

    def write(self, text: str):
        self._painter.take_back()
        return self._stream.write(text)

    def writelines(self, lines):
        self._painter.take_back()
        return self._stream.writelines(lines)

    def __getattr__(self, name: str):
        if name in ("buffer", "fileno"):  # the way to write bytes around write(): the line goes first
            self._painter.take_back()
        return getattr(self._stream, name)


def _since_start() -> float:
    """Seconds since this process started (its start time in /proc); 0 where it cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return max(0.0, up - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def start(text: str) -> None:
    """Paint `text` with a turning spinner on a terminal's stderr from DELAY_S after the process
    started, until the program first writes (or exits)."""
    if not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":
        return
    painter = _Painter(text, sys.stderr, sys.stdout)
    sys.stdout, sys.stderr = _Claiming(sys.stdout, painter), _Claiming(sys.stderr, painter)
    atexit.register(painter.take_back)
    threading.Thread(target=painter.run, args=(max(0.0, DELAY_S - _since_start()),), daemon=True,
                     name="gpuops-first-paint").start()
