"""cgroup facts for the calling process: memory limit/usage, OOM-kill counter, CPU quota, pids.

Both hierarchies are real on rented boxes: v2 (unified) on current distros, v1 on older hosts
and in hybrid mode (v1 controllers plus an empty "0::/" line, as on this project's build
machine). The memory controller decides which one counts: a v1 line that lists `memory` wins.
Inside a container the kernel log may be unreadable or show the host's OOMs, so the cgroup
counter is the trustworthy OOM signal there.
"""

import os

from . import sysroot

V1_UNLIMITED = 1 << 60  # v1 reports "no limit" as a page-rounded LONG_MAX


def _memberships():
    """{controller: path} from /proc/self/cgroup; the v2 entry is under key ''."""
    out = {}
    text = sysroot.read("/proc/self/cgroup") or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def _mounts():
    """[(fstype, mount_root, mountpoint, super_options)] for cgroup mounts from mountinfo."""
    found = []
    for line in (sysroot.read("/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3 or rfields[0] not in ("cgroup", "cgroup2"):
            continue
        found.append((rfields[0], fields[3], fields[4], rfields[2]))
    return found


def _dir(fstype, controller, path):
    """The directory holding this process's cgroup files for one controller."""
    for kind, root, point, opts in _mounts():
        if kind != fstype or (controller and controller not in opts.split(",")):
            continue
        rel = path[len(root):] if root != "/" and path.startswith(root) else path
        candidate = point.rstrip("/") + "/" + rel.lstrip("/")
        if os.path.isdir(sysroot.path(candidate.rstrip("/") or "/")):
            return candidate.rstrip("/")
        return point
    base = "/sys/fs/cgroup" + ("/" + controller if controller and fstype == "cgroup" else "")
    candidate = (base + path).rstrip("/")
    return candidate if os.path.isdir(sysroot.path(candidate)) else base


def _num(text):
    if text is None or text == "max":
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _ancestors(d, stop):
    """d, its parent, … up to the mount point `stop` (limits can sit on a parent cgroup)."""
    out = [d]
    while d != stop and d.startswith(stop) and "/" in d.rstrip("/"):
        d = d.rsplit("/", 1)[0] or "/"
        out.append(d)
    return out


def _tightest(dirs, name, unlimited=None):
    values = []
    for d in dirs:
        v = _num(sysroot.read(d + "/" + name))
        if v is not None and (unlimited is None or v < unlimited):
            values.append(v)
    return min(values) if values else None


def _v2(path):
    d = _dir("cgroup2", "", path)
    stop = next((p for k, _, p, _ in _mounts() if k == "cgroup2"), "/sys/fs/cgroup")
    chain = _ancestors(d, stop)
    events = sysroot.keyvals(d + "/memory.events")
    stat = sysroot.keyvals(d + "/memory.stat")
    usage = _num(sysroot.read(d + "/memory.current"))
    cpu = (sysroot.read(d + "/cpu.max") or "").split()
    quota = None
    if len(cpu) == 2 and cpu[0] != "max":
        quota = round(int(cpu[0]) / float(cpu[1]), 2)
    return {
        "version": "v2",
        "memory": {
            "dir": d,
            "limit_bytes": _tightest(chain, "memory.max"),
            "usage_bytes": usage,
            "working_set_bytes": _working_set(usage, stat.get("inactive_file")),
            "oom_kills": events.get("oom_kill") if events else None,
            "oom_events": events.get("oom") if events else None,
            "counter_file": d + "/memory.events" if events else None,
        },
        "cpu": {"dir": d, "quota_cores": quota},
        "pids": {"limit": _tightest(chain, "pids.max"), "current": _num(sysroot.read(d + "/pids.current"))},
    }


def _v1(members):
    md = _dir("cgroup", "memory", members.get("memory", "/"))
    oom = sysroot.keyvals(md + "/memory.oom_control")
    stat = sysroot.keyvals(md + "/memory.stat")
    usage = _num(sysroot.read(md + "/memory.usage_in_bytes"))
    limit = _num(sysroot.read(md + "/memory.limit_in_bytes"))
    hier = stat.get("hierarchical_memory_limit")
    limits = [v for v in (limit, hier) if v is not None and v < V1_UNLIMITED]
    cd = _dir("cgroup", "cpu", members.get("cpu", "/"))
    q, period = _num(sysroot.read(cd + "/cpu.cfs_quota_us")), _num(sysroot.read(cd + "/cpu.cfs_period_us"))
    pd = _dir("cgroup", "pids", members.get("pids", "/"))
    return {
        "version": "v1",
        "memory": {
            "dir": md,
            "limit_bytes": min(limits) if limits else None,
            "usage_bytes": usage,
            "working_set_bytes": _working_set(usage, stat.get("total_inactive_file", stat.get("inactive_file"))),
            "oom_kills": oom.get("oom_kill"),
            "oom_events": oom.get("under_oom"),
            "counter_file": md + "/memory.oom_control" if "oom_kill" in oom else None,
            "failcnt": _num(sysroot.read(md + "/memory.failcnt")),
        },
        "cpu": {"dir": cd, "quota_cores": round(q / float(period), 2) if q and q > 0 and period else None},
        "pids": {"limit": _num(sysroot.read(pd + "/pids.max")), "current": _num(sysroot.read(pd + "/pids.current"))},
    }


def _working_set(usage, inactive_file):
    if usage is None:
        return None
    return max(0, usage - (inactive_file or 0))


def facts():
    """The cgroup document; {'version': 'none'} when no cgroup is visible."""
    members = _memberships()
    if "memory" in members:
        return _v1(members)
    if "" in members:
        return _v2(members[""])
    return {"version": "none"}


def oom_kills():
    """The OOM-kill counter for this process's memory cgroup, or None when it is not exposed."""
    return (facts().get("memory") or {}).get("oom_kills")
