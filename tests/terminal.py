"""The real CLI on a real pseudo-terminal of a given size: what a person sees (spinners, bars,
colour), where a pipe would show none of it."""

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

from tests.conftest import ROOT

_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def run(*args, cols=80, rows=24, env=None, timeout=60, interrupt_after=None):
    """(exit code, everything written to the terminal, ANSI and all) of `gpuops ARGS` with both
    stdout and stderr on one pty of `cols` x `rows`. interrupt_after: a test of the bytes so far;
    once true, the program gets Ctrl-C's SIGINT (its whole process group, as a terminal sends it)."""
    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = dict(env or os.environ, TERM="xterm-256color")
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    proc = subprocess.Popen([sys.executable, "-m", "gpuops", *args], cwd=ROOT, env=env, stdin=side, stdout=side,
                            stderr=side, start_new_session=True)
    os.close(side)
    out, deadline = bytearray(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other side closed: everything is read
                break
            if not chunk:
                break
            out.extend(chunk)
            if interrupt_after is not None and interrupt_after(bytes(out)):
                interrupt_after = None
                os.killpg(proc.pid, signal.SIGINT)
        elif proc.poll() is not None:
            break
    os.close(main)
    try:
        code = proc.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return code, out.decode("utf-8", "replace")


def frames(raw):
    """Every line the terminal was shown (redrawn ones included), control sequences removed."""
    return [line.rstrip() for line in _CONTROL.sub("", raw).replace("\r", "\n").split("\n") if line.strip()]

