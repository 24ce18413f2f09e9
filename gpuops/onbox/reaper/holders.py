"""Who holds the NVIDIA device files, and the facts reap's rules judge each process by.

Found the way fuser finds them: every /proc/PID/fd link that points at /dev/nvidia* (for a zombie
leader whose threads live on, /proc/PID/task/TID/fd, because the leader's own fd table is gone).
NVML's per-process memory is attached only to a holder it verifiably belongs to: the driver
reports host PIDs even in a container, so a PID it names counts only when that PID, in our own
/proc, holds the device node of the GPU it is named on and is still the process scanned.
"""

import os
import pwd
import re

from ..host import busid, procs, sysroot

# Units that only host login sessions (sshd without pam_systemd keeps its sessions in its unit).
_SESSION_UNITS = re.compile(r"^(ssh|sshd|user@\d+)\.service$")
_GPU_NODE = re.compile(r"^/dev/nvidia(\d+)$")
_PF_KTHREAD = 0x00200000  # task flag (field 9 of /proc/PID/stat): a kernel thread


def process_table():
    """{pid: stat} for every process, read once."""
    table = {}
    for pid in procs.pids():
        st = procs.stat(pid)
        if st:
            table[pid] = st
    return table


def _user(uid):
    if uid is None:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def service_unit(pid: int):
    """The systemd service a process runs under, when it runs under one that is not a login session."""
    for line in (sysroot.read("/proc/%d/cgroup" % pid) or "").splitlines():
        path = line.split(":", 2)[-1]
        units = [part for part in path.split("/") if part.endswith(".service")]
        if units and not _SESSION_UNITS.match(units[-1]):
            return units[-1]
    return None


def _task_devices(pid: int):
    """Device links held by the live threads of a zombie leader (its own fd table is gone)."""
    found = set()
    for tid in procs.live_threads(pid):
        fd_dir = "/proc/%d/task/%d/fd" % (pid, tid)
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = sysroot.unroot(os.readlink(fd_dir + "/" + fd))
            except OSError:
                continue
            if target.startswith("/dev/nvidia"):
                found.add(target)
    return sorted(found)


def kernel_thread(pid: int):
    """By the task flag, not by parent pid: inside a container pid 2 is an ordinary process."""
    fields = (sysroot.read("/proc/%d/stat" % pid) or "").rpartition(")")[2].split()
    try:
        return bool(int(fields[6]) & _PF_KTHREAD)
    except (IndexError, ValueError):
        return False


def describe(pid: int, st):
    """The facts the rules look at, for any process (holder or not)."""
    cmd = procs.cmdline(pid) or ""
    uid = procs.uid(pid)
    age = procs.age_s(st)
    return {
        "pid": pid, "start_ticks": st["start_ticks"], "ppid": st["ppid"], "pgid": st["pgid"],
        "sid": st["sid"], "tty_nr": st["tty_nr"], "state": st["state"], "comm": st["comm"],
        "argv0": os.path.basename(cmd.split(" ", 1)[0]) if cmd else "",
        "command": cmd or "[%s]" % st["comm"], "uid": uid, "user": _user(uid),
        "age_s": round(age, 1) if age is not None else None, "unit": service_unit(pid),
        "kthread": kernel_thread(pid),
        "devices": [], "minors": [], "gpus": [], "gpu_mem_mib": {}, "threads": None,
    }


def scan_holders(table, minor_to_index):
    """(holders, unreadable): facts for every process holding an NVIDIA device file."""
    found, unreadable = procs.device_holders(prefixes=("/dev/nvidia",))
    devices = dict((h["pid"], h["devices"]) for h in found)
    for pid, st in table.items():
        if st["state"] == "Z" and pid not in devices:
            held = _task_devices(pid)
            if held:
                devices[pid] = held
    holders = []
    for pid in sorted(devices):
        st = table.get(pid) or procs.stat(pid)
        if st is None:
            continue  # exited while we looked
        f = describe(pid, st)
        f["devices"] = devices[pid]
        f["minors"] = sorted(int(m.group(1)) for m in (_GPU_NODE.match(d) for d in devices[pid]) if m)
        f["gpus"] = sorted(set(minor_to_index.get(m, m) for m in f["minors"]))
        if st["state"] == "Z":
            f["threads"] = len(procs.live_threads(pid))
        holders.append(f)
    return holders, unreadable


def nested_pid_namespace():
    """True inside a child PID namespace (a container), where NVML's PIDs are the host's."""
    for line in (sysroot.read("/proc/self/status") or "").splitlines():
        if line.startswith("NSpid:"):
            return len(line.split()) > 2
    return False


def attach_memory(holders, reading, nested):
    """Put NVML's per-process memory on the holders it verifiably belongs to; return the rest."""
    by_bus = dict((busid.key(d.get("bus_id")), d) for d in reading["devices"])
    by_pid = dict((h["pid"], h) for h in holders)
    unverified = []
    for app in reading["processes"]:
        pid, dev = app.get("pid"), by_bus.get(busid.key(app.get("bus_id")))
        h = by_pid.get(pid)
        why = None
        if nested:
            why = "this box runs in a nested PID namespace, where NVML reports host PIDs"
        elif dev is None:
            why = "GPU %s is not in the device list" % app.get("bus_id")
        elif h is None:
            why = "no process with this PID holds an NVIDIA device here"
        elif dev.get("minor") is not None and dev["minor"] not in h["minors"]:
            why = "PID %d does not hold /dev/nvidia%d here" % (pid, dev["minor"])
        elif not procs.alive(pid, h["start_ticks"]) and h["state"] != "Z":
            why = "PID %d is no longer the process that was scanned" % pid
        if why:
            unverified.append({"pid": pid, "bus_id": app.get("bus_id"), "used_mib": app.get("used_mib"), "why": why})
            continue
        h["gpu_mem_mib"][str(dev["index"])] = app.get("used_mib")
        if dev["index"] not in h["gpus"]:
            h["gpus"] = sorted(h["gpus"] + [dev["index"]])
    return unverified
