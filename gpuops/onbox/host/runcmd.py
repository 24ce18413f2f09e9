"""External commands on the box, started early and collected later, never waited on forever.

The probe starts its slow commands (nvidia-smi, the torch import) first and reads /proc while they
run, so the box's answer costs roughly the slowest command, not their sum. Every command gets a
deadline; one that overruns is killed and reported as timed out, and the probe carries on.
Commands run with LC_ALL=C so their output parses the same on every box.
"""

import os
import shutil
import subprocess
import time
from typing import Sequence

_started = []  # pids of our own children, so the probe never reports them as device holders


class Pending(object):
    """A started command (or the reason it could not start)."""

    def __init__(self, argv, proc=None, deadline=0.0, error=None) -> None:
        self.argv = argv
        self.proc = proc
        self.deadline = deadline
        self.error = error


def _env():
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    return env


def start(argv, timeout_s):
    """Start `argv` (argv[0] looked up on PATH); never raises."""
    exe = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0])
    if not exe:
        return Pending(argv, error="not found on PATH")
    try:
        proc = subprocess.Popen([exe] + list(argv[1:]), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=_env(), close_fds=True)
    except (OSError, ValueError) as e:
        return Pending(argv, error="cannot start: %s" % (e,))
    _started.append(proc.pid)
    return Pending(argv, proc, time.time() + timeout_s)


def started_pids():
    return set(_started)


def finish(pending) -> dict:
    """{'rc', 'out', 'err', 'error'}: error is None when the command ran to its end."""
    if pending.proc is None:
        return {"rc": None, "out": "", "err": "", "error": pending.error}
    proc = pending.proc
    try:
        out, err = proc.communicate(timeout=max(0.05, pending.deadline - time.time()))
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel (D state): abandon it rather than hang the probe
        return {"rc": None, "out": "", "err": "", "error": "timed out"}
    return {"rc": proc.returncode, "out": out.decode("utf-8", "replace"),
            "err": err.decode("utf-8", "replace"), "error": None}


def run(argv, timeout_s):
    return finish(start(argv, timeout_s))


def available(names: Sequence[str]):
    """{name: True/False} for commands on PATH."""
    return dict((n, shutil.which(n) is not None) for n in names)
