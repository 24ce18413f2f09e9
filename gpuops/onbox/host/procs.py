"""Processes as /proc shows them: identity (pid + start time), ancestry, state, device holders.

A pid alone is not an identity: pids are reused, so every record and every kill re-checks the
start time (field 22 of /proc/PID/stat, in clock ticks since boot). Our own process chain
(probe -> python3 -> sh -> sshd) is excluded by ancestry, never by matching command names.
"""

import errno
import os

from . import sysroot
from typing import Optional

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stat(pid: int):
    """{pid, comm, state, ppid, pgid, sid, tty_nr, start_ticks, cpu_ticks} or None when the process
    is gone (tty_nr: its controlling terminal, 0 for none; cpu_ticks: user + system time of all its
    threads)."""
    text = sysroot.read("/proc/%d/stat" % int(pid))
    if not text or ")" not in text:
        return None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    try:
        return {
            "pid": int(pid),
            "comm": head.partition("(")[2],
            "state": fields[0],
            "ppid": int(fields[1]),
            "pgid": int(fields[2]),
            "sid": int(fields[3]),
            "tty_nr": int(fields[4]),
            "start_ticks": int(fields[19]),
            "cpu_ticks": int(fields[11]) + int(fields[12]),
        }
    except (IndexError, ValueError):
        return None


def job_tag(pid: int):
    """The GPUOPS_JOB_ID in a process's environment (every process a job starts carries it), or
    None (no tag, gone, or another user's)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read()
    except (OSError, IOError):
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"GPUOPS_JOB_ID="):
            return item[len(b"GPUOPS_JOB_ID="):].decode("utf-8", "replace")
    return None


def io_bytes(pid: int):
    """Bytes the process has read and written through any syscall (rchar + wchar: files, pipes,
    sockets), or None when /proc/PID/io is not readable (another user's process)."""
    values = sysroot.keyvals("/proc/%d/io" % int(pid))
    if "rchar:" not in values or "wchar:" not in values:
        return None
    return values["rchar:"] + values["wchar:"]


def boot_time():
    for line in (sysroot.read("/proc/stat") or "").splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    return None


def boot_id():
    return sysroot.read("/proc/sys/kernel/random/boot_id")


def uptime_s():
    text = sysroot.read("/proc/uptime")
    return float(text.split()[0]) if text else None


def age_s(st):
    up = uptime_s()
    if st is None or up is None:
        return None
    return max(0.0, up - st["start_ticks"] / float(CLK_TCK))


def uid(pid: int):
    for line in (sysroot.read("/proc/%d/status" % int(pid)) or "").splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


def cmdline(pid: int, limit: int = 300):
    try:
        with open(sysroot.path("/proc/%d/cmdline" % int(pid)), "rb") as f:
            raw = f.read(4096)
    except (OSError, IOError):
        return None
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")[:limit]


def alive(pid: int, start_ticks=None):
    """True when `pid` exists, is not a zombie, and (if given) started at `start_ticks`."""
    st = stat(pid)
    if st is None or st["state"] in ("Z", "X"):
        return False
    return start_ticks is None or st["start_ticks"] == int(start_ticks)


def live_threads(pid: int):
    """Thread ids of `pid` other than the leader that have not exited (a zombie leader's threads
    can live on and keep its device files open)."""
    out = []
    for tid in sysroot.listdir("/proc/%d/task" % pid):
        if tid.isdigit() and int(tid) != pid:
            text = sysroot.read("/proc/%d/task/%s/stat" % (pid, tid)) or ""
            state = text.rpartition(")")[2].split()[:1]
            if state and state[0] not in ("Z", "X"):
                out.append(int(tid))
    return out


def ancestry(pid: Optional[int]=None):
    """The set of pids from `pid` (default: this process) up to init."""
    chain = set()
    pid = os.getpid() if pid is None else pid
    while pid and pid not in chain:
        chain.add(pid)
        st = stat(pid)
        if st is None:
            break
        pid = st["ppid"]
    return chain


def pids():
    return sorted(int(n) for n in sysroot.listdir("/proc") if n.isdigit())


def children_map():
    """{ppid: [pid, ...]} for the whole table, read once."""
    out = {}
    for pid in pids():
        st = stat(pid)
        if st:
            out.setdefault(st["ppid"], []).append(pid)
    return out


def descendants(pid: int, kids=None):
    kids = children_map() if kids is None else kids
    found, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def device_holders(prefixes=("/dev/nvidia",), exclude=()):
    """[{pid, devices}] for processes holding an open fd on a matching device file.

    Fds are read from the real /proc; a link into the GPUOPS_ROOT overlay is mapped back to the
    device path it stands in for. Processes whose fds we may not read are counted, not guessed.
    """
    holders, unreadable = [], 0
    for pid in pids():
        if pid in exclude:
            continue
        fd_dir = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except (OSError, IOError) as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                unreadable += 1  # a process that exited mid-scan is simply gone, not hidden
            continue
        devices = set()
        for fd in fds:
            try:
                target = sysroot.unroot(os.readlink(fd_dir + "/" + fd))
            except (OSError, IOError):
                continue
            if target.startswith(tuple(prefixes)):
                devices.add(target)
        if devices:
            holders.append({"pid": pid, "devices": sorted(devices)})
    return holders, unreadable
