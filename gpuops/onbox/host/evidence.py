"""The evidence diagnose reads beside a job's records (gpuops.onbox.jobs.diagnose), for every engine:
the tail of a log, and the kernel log's OOM-killer and Xid lines stamped after a moment. Reads only."""

import re
import time

from . import kernlog, procs
from typing import Sequence

TAIL_BYTES = 64 * 1024
HEAD_BYTES = 16 * 1024
_DMESG_STAMP = re.compile(r"^\[\s*(\d+)\.(\d+)\]")


def line_time(line, btime, now):
    """Wall-clock epoch of a kernel-log line: dmesg's uptime stamp or a syslog/ISO stamp."""
    m = _DMESG_STAMP.match(line)
    if m and btime:
        return btime + int(m.group(1))
    return kernlog.stamp(line, now)


def _after(lines, since, btime, now):
    """Lines stamped at or after `since`; unstamped lines are kept (they cannot be excluded)."""
    kept = []
    for line in lines:
        t = line_time(line, btime, now)
        if t is None or t >= since - 1:
            kept.append(line)
    return kept


def tail(path, limit: int = TAIL_BYTES):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except (OSError, IOError):
        return None


def head(path, limit: int = HEAD_BYTES):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except (OSError, IOError):
        return None


def _kernel(since, pids: Sequence[int]):
    src = kernlog.source_lines()
    doc = {"readable": src["readable"], "source": src.get("source"), "tried": src.get("tried")}
    if not src["readable"]:
        return doc
    now, btime = time.time(), procs.boot_time()
    recent = _after(src["lines"], since, btime, now)
    found = kernlog.scan(recent)
    doc["oom_named"] = [o for o in found["oom_kills"] if o["pid"] in pids]
    doc["oom_other"] = [o for o in found["oom_kills"] if o["pid"] not in pids]
    doc["xid"] = found["xid"]
    return doc


def with_kernel(ev, since, pids: Sequence[int]) -> None:
    kern = _kernel(since, pids)
    ev["kernel_readable"] = kern["readable"]
    ev["kernel_source"] = kern.get("source")
    ev["kernel_tried"] = kern.get("tried")
    ev["kernel_oom_named"] = kern.get("oom_named", [])
    ev["kernel_oom_other"] = kern.get("oom_other", [])
    ev["xid_after_launch"] = [{"code": x["code"], "pci": x["pci"], "line": x["last_line"]} for x in kern.get("xid", [])]


def without_kernel(ev) -> None:
    """The kernel-log fields of evidence gathered where the job's node's log cannot be read."""
    ev.update(kernel_readable=False, kernel_source=None, kernel_tried=None, kernel_oom_named=[],
              kernel_oom_other=[], xid_after_launch=[])
