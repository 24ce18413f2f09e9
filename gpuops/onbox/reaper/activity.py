"""A process's own activity over the reaper's sampling window: CPU time and I/O bytes.

A GPU at 0 % says nothing about the process holding it: a run tokenising, loading data or writing
a checkpoint leaves its GPU idle for minutes. NVML's per-process numbers are no substitute (its
accounting is per lifetime, off by default and root-only to enable, and `--query-compute-apps` has
no utilisation field), so the evidence is the kernel's: user + system ticks from /proc/PID/stat and
rchar + wchar from /proc/PID/io, read before and after the window, summed over the holder and
every process under it (a main process waits while its DataLoader workers compute).
"""

import time

from ..host import procs


def snapshot(table) -> dict:
    """{'at': time, 'procs': {pid: (start_ticks, cpu_ticks, io bytes or None)}} of every process."""
    return {"at": time.time(),
            "procs": dict((pid, (st["start_ticks"], st["cpu_ticks"], procs.io_bytes(pid))) for pid, st in table.items())}


def measure(pid: int, before, table):
    """{window_s, cpu_s, io_bytes, cpu_total_s, processes} for `pid` and what runs under it, from
    `before` (a snapshot) to now; io_bytes is None when any of them hides its /proc/PID/io."""
    kids = {}
    for child, st in table.items():
        kids.setdefault(st["ppid"], []).append(child)
    window = max(0.0, time.time() - before["at"])
    cpu, io, total = 0, 0, 0
    members = [p for p in [pid] + procs.descendants(pid, kids) if p in table]
    for p in members:
        st = table[p]
        start, cpu0, io0 = before["procs"].get(p, (None, 0, 0))
        if start != st["start_ticks"]:
            cpu0, io0 = 0, 0  # started during the window: everything it did, it did in the window
        io1 = procs.io_bytes(p)
        cpu += max(0, st["cpu_ticks"] - cpu0)
        total += st["cpu_ticks"]
        if io is not None:
            io = None if io1 is None or io0 is None else io + max(0, io1 - io0)
    return {"window_s": round(window, 3), "cpu_s": round(cpu / float(procs.CLK_TCK), 2), "io_bytes": io,
            "cpu_total_s": round(total / float(procs.CLK_TCK), 2), "processes": len(members)}
