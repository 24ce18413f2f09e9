"""Signalling processes without hitting the wrong one: the TERM -> wait -> KILL ladder.

A pid alone is not an identity (pids are reused), so every signal is sent only after the
process's start time is read again and found unchanged; a process group is signalled as a whole
only when every process now in it may be signalled. Used by `gpuops stop` (a job's processes)
and `gpuops reap` (VRAM holders).
"""

import os
import signal
import time

from . import procs

POLL_S = 0.05


def identity(pid: int, start_ticks=None) -> str:
    """'there', 'gone' or 'reused' for the process recorded as (pid, start_ticks). A zombie whose
    threads still run is still there (they hold its open files)."""
    st = procs.stat(pid)
    if st is None:
        return "gone"
    if start_ticks is not None and st["start_ticks"] != int(start_ticks):
        return "reused"
    if st["state"] in ("Z", "X") and not procs.live_threads(pid):
        return "gone"
    return "there"


def name(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "SIG%d" % sig


def send(pid: int, start_ticks, sig):
    """Signal one process if it is still the one recorded: 'sent', 'gone', 'reused' or 'not-permitted'."""
    state = identity(pid, start_ticks)
    if state != "there":
        return state
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        return "not-permitted"
    return "sent"


def group_members(pgid):
    """{(pid, start_ticks)} of the live processes in process group `pgid`."""
    out = set()
    for pid in procs.pids():
        st = procs.stat(pid)
        if st and st["pgid"] == pgid and st["state"] not in ("Z", "X"):
            out.add((pid, st["start_ticks"]))
    return out


def send_group(pgid, sig, allowed=None) -> bool:
    """killpg(pgid) when every live member is in `allowed` ({(pid, start_ticks)}; None allows any
    member: the group is known to be wholly the caller's). True when sent."""
    if not pgid or pgid <= 1:
        return False
    if allowed is not None and not group_members(pgid) <= set(allowed):
        return False
    try:
        os.killpg(pgid, sig)
    except OSError:
        return False
    return True


def wait_until(done, timeout_s) -> bool:
    """Poll done() until it is true or timeout_s passed; its last value."""
    deadline = time.time() + max(0.0, timeout_s)
    while True:
        if done():
            return True
        if time.time() >= deadline:
            return False
        time.sleep(POLL_S)


KILL_SWEEPS = 3


def ladder(targets, term_wait, kill_wait, send_round, still_there, more=None):
    """SIGTERM `targets`, wait up to term_wait for them to go, SIGKILL those still there plus what
    more() finds (children born meanwhile), wait up to kill_wait. A process forked after more()
    looked (a shell loop spawns one every tick until SIGKILL lands) gets a SIGKILL round of its
    own, up to KILL_SWEEPS rounds.

    send_round(items, sig) signals a list of items and returns a report; still_there(item) says
    whether one has not gone yet. Returns [(signal name, items, report)] for each round sent."""
    rounds = [("SIGTERM", list(targets), send_round(list(targets), signal.SIGTERM))]
    wait_until(lambda: not any(still_there(t) for t in targets), term_wait)
    left = [t for t in targets if still_there(t)]
    killed = []
    for _ in range(KILL_SWEEPS if more else 1):
        for extra in (more() if more else []):
            if extra not in left and extra not in killed:
                left.append(extra)
        if not left:
            break
        rounds.append(("SIGKILL", left, send_round(left, signal.SIGKILL)))
        wait_until(lambda: not any(still_there(t) for t in left), kill_wait)
        killed += left
        left = []
    return rounds
