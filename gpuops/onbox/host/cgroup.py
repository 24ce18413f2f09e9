"""cgroup facts for the calling process: memory limit/usage, OOM-kill counter, CPU quota, pids.

Both hierarchies are real on rented boxes: v2 (unified) on current distros, v1 on older hosts
and in hybrid mode (v1 controllers plus an empty "0::/" line, as on this project's build
machine). The memory controller decides which one counts: a v1 line that lists `memory` wins.
Inside a container the kernel log may be unreadable or show the host's OOMs, so the cgroup
counter is the trustworthy OOM signal there. But one counter is not enough: systemd gives each
SSH session a fresh child cgroup whose counter reads 0 while the run that died lived in another
one, so `oom_counters` also reads every ancestor up to the namespace root and each recorded job's.
"""

import os

from . import jobrecord, procs, sysroot

MAX_JOBS = 20

V1_UNLIMITED = 1 << 60  # v1 reports "no limit" as a page-rounded LONG_MAX


def _memberships(pid="self"):
    """{controller: path} from /proc/PID/cgroup; the v2 entry is under key ''."""
    out = {}
    text = sysroot.read("/proc/%s/cgroup" % pid) or ""
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


def _dir(fstype, controller, path, fallback=True):
    """The directory holding the cgroup files of `path` for one controller; without `fallback`,
    None when that directory is gone (a job's cgroup is removed when its session ends)."""
    for kind, root, point, opts in _mounts():
        if kind != fstype or (controller and controller not in opts.split(",")):
            continue
        rel = path[len(root):] if root != "/" and path.startswith(root) else path
        candidate = point.rstrip("/") + "/" + rel.lstrip("/")
        if os.path.isdir(sysroot.path(candidate.rstrip("/") or "/")):
            return candidate.rstrip("/")
        return point if fallback else None
    base = "/sys/fs/cgroup" + ("/" + controller if controller and fstype == "cgroup" else "")
    candidate = (base + path).rstrip("/")
    return candidate if os.path.isdir(sysroot.path(candidate)) else (base if fallback else None)


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


def _tightest(dirs, name: str, unlimited=None):
    values = []
    for d in dirs:
        v = _num(sysroot.read(d + "/" + name))
        if v is not None and (unlimited is None or v < unlimited):
            values.append(v)
    return min(values) if values else None


def _v2(path) -> dict:
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
            "path": path,
            "namespace_root": _mount_root("cgroup2", ""),
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


def _v1(members) -> dict:
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
            "path": members.get("memory", "/"),
            "namespace_root": _mount_root("cgroup", "memory"),
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
        doc = _v1(members)
        doc["memory"]["oom_counters"] = oom_counters("cgroup", "memory", doc["memory"]["dir"])
    elif "" in members:
        doc = _v2(members[""])
        doc["memory"]["oom_counters"] = oom_counters("cgroup2", "", doc["memory"]["dir"])
    else:
        doc = {"version": "none"}
    return doc


def _mount_root(fstype, controller):
    """Where this namespace's cgroup tree sits in the host's ('/' when it cannot be told: the host
    itself, or a cgroup namespace that hides the prefix)."""
    for kind, root, _, opts in _mounts():
        if kind == fstype and (not controller or controller in opts.split(",")):
            return root
    return None


def _oom_count(d, fstype):
    """(oom_kill counter, file) of one cgroup directory, or (None, None) when it has none."""
    name = "memory.events" if fstype == "cgroup2" else "memory.oom_control"
    values = sysroot.keyvals(d + "/" + name)
    if "oom_kill" not in values:
        return None, None
    return values["oom_kill"], d + "/" + name


def memory_memberships():
    """This process's memory cgroup paths ({'': v2 path} and/or {'memory': v1 path}), for a job's
    meta: the job runs in its launcher's cgroup, which a systemd host removes with the SSH session,
    so after the job ends nothing else says where its OOM kills were counted."""
    return {k: v for k, v in _memberships().items() if k in ("", "memory")}


def job_cgroups(controller):
    """{job_id: cgroup path} for this boot's recorded jobs: the path their meta recorded at launch,
    else the one a still-running job's process is in now."""
    out = {}
    boot = procs.boot_id()
    for job_id in jobrecord.all_ids()[-MAX_JOBS:]:
        try:
            rec = jobrecord.load(job_id)
        except ValueError:
            continue
        meta = (rec or {}).get("meta") or {}
        if meta.get("boot_id") and meta["boot_id"] != boot:
            continue
        recorded = meta.get("cgroups")
        path = recorded.get(controller) if isinstance(recorded, dict) else None
        if not path and meta.get("pid") and procs.alive(meta["pid"], meta.get("start_ticks")):
            path = _memberships(int(meta["pid"])).get(controller)
        if isinstance(path, str) and path.startswith("/"):
            out[job_id] = path
    return out


def oom_counters(fstype, controller, own_dir):
    """[{scope, dir, file, oom_kills, job_id}] for the cgroups whose OOM kills concern a run here:
    this session's, each ancestor up to the namespace root, and each recorded job's."""
    stop = next((p for k, _, p, o in _mounts() if k == fstype and (not controller or controller in o.split(","))),
                "/sys/fs/cgroup" + ("/" + controller if fstype == "cgroup" else ""))
    chain = _ancestors(own_dir, stop)
    places = [("root" if d == stop else "session" if i == 0 else "ancestor", d, None) for i, d in enumerate(chain)]
    if chain[-1] != stop:
        places.append(("root", stop, None))
    places += [("job", _dir(fstype, controller, path, fallback=False), job_id)
               for job_id, path in sorted(job_cgroups(controller).items())]
    out, seen = [], set()
    for scope, d, job_id in places:
        count, name = _oom_count(d, fstype) if d else (None, None)
        if count is None or (d, job_id) in seen:
            continue
        seen.add((d, job_id))
        out.append({"scope": scope, "dir": d, "file": name, "oom_kills": count, "job_id": job_id})
    return out


def oom_kills():
    """The OOM-kill counter for this process's memory cgroup, or None when it is not exposed."""
    return (facts().get("memory") or {}).get("oom_kills")
