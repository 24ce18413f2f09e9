"""On-box evidence for `gpuops diagnose`: everything a verdict needs, in one round trip.

For a gpuops job: its records (exit record, boot_id, OOM counter and pid start time at launch),
the facts `status` derives its state from (liveness, progress lines), the box's boot_id and
uptime now, the cgroup OOM counter now, kernel-log OOM-killer lines and Xid lines stamped after
launch, free bytes and inodes on the job's paths, core dumps since launch (gpuops.onbox.cores: the
job's cwd, coredumpctl where present), the log's tail, and its head (where trackers such as W&B
say whether they sync).
For a bare pid (`--pid P --since EPOCH`) the same, minus the records. Reads only.
"""

import json
import os
import re
import socket
import sys
import time

from . import cgroup, cores, disk, job_facts, jobrecord, kernlog, procs, slurm

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


def _tail(path, limit=TAIL_BYTES):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except (OSError, IOError):
        return None


def _head(path, limit=HEAD_BYTES):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except (OSError, IOError):
        return None


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _kernel(since, pids):
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


def gather(job_ref=None, pid=None, since=None):
    now = time.time()
    ev = {"boot_id_now": procs.boot_id(), "uptime_s": procs.uptime_s(), "now": now,
          "oom_kills_now": cgroup.oom_kills()}
    paths = []
    if job_ref:
        job_id = jobrecord.resolve(job_ref)
        rec = jobrecord.load(job_id)
        if rec is None:  # a launch that never wrote its start record: judged on what its directory holds
            jdir = jobrecord.job_dir(job_id)
            rec = {"dir": jdir, "meta": {}, "exit": jobrecord.read_json(os.path.join(jdir, jobrecord.EXIT))}
            since = since or _mtime(jdir)
        meta = rec["meta"]
        if jobrecord.engine(meta) == jobrecord.SLURM:
            return _scheduled(ev, job_id, rec)
        pid = meta.get("pid")
        since = meta.get("launched_at") or since or now
        ev.update({
            "job_id": job_id, "meta": meta or None, "exit": rec["exit"],
            "boot_id_then": meta.get("boot_id"),
            "oom_kills_at_launch": meta.get("oom_kills_at_launch"),
            "boot_changed": bool(meta.get("boot_id")) and meta.get("boot_id") != ev["boot_id_now"],
            "alive": rec["exit"] is None and jobrecord.liveness(meta) == "alive",
            "log_tail": _tail(meta.get("log") or os.path.join(rec["dir"], jobrecord.LOG)),
            "log_head": _head(meta.get("log") or os.path.join(rec["dir"], jobrecord.LOG)),
            "job": job_facts.facts(job_id),
        })
        paths = [rec["dir"]] + ([meta["workdir"]] if meta.get("workdir") else [])
        cwd = meta.get("workdir")
    else:
        since = since or now
        btime = procs.boot_time()
        st = procs.stat(pid)
        ev.update({"exit": None, "alive": procs.alive(pid),
                   "boot_changed": bool(btime) and since < btime, "boot_id_then": None,
                   "oom_kills_at_launch": None, "log_tail": None, "log_head": None})
        cwd = None
        if st:
            try:
                paths = [os.readlink("/proc/%d/cwd" % pid)]
                cwd = paths[0]
            except OSError:
                pass
    ev["pid"] = pid
    ev["since"] = since
    _with_kernel(ev, since, {pid} if pid else set())
    ev["disks"] = [disk.measure("job", p) for p in paths]
    ev["cores"] = cores.facts(cwd, since)
    return ev


def _with_kernel(ev, since, pids):
    kern = _kernel(since, pids)
    ev["kernel_readable"] = kern["readable"]
    ev["kernel_source"] = kern.get("source")
    ev["kernel_tried"] = kern.get("tried")
    ev["kernel_oom_named"] = kern.get("oom_named", [])
    ev["kernel_oom_other"] = kern.get("oom_other", [])
    ev["xid_after_launch"] = [{"code": x["code"], "pci": x["pci"], "line": x["last_line"]} for x in kern.get("xid", [])]


def _scheduled(ev, job_id, rec):
    """A Slurm job's evidence: its record and the scheduler's facts (sacct's steps too, for
    MaxRSS against ReqMem), the log's tail, and the kernel log where the job ran when that node
    is this one (a login node that is not the compute node cannot read the node's log)."""
    meta = rec["meta"]
    facts = job_facts.facts(job_id)
    since = meta.get("launched_at") or ev["now"]
    job = ((facts.get("scheduler") or {}).get("job")) or {}
    rows, completion = slurm.accounting(meta["slurm_job_id"], steps=True) if meta.get("slurm_job_id") else ([], False)
    nodes = [n for n in (job.get("BatchHost"), job.get("NodeList")) if n and n not in ("(null)", "None")]
    here = socket.gethostname().split(".")[0]
    ev.update({"job_id": job_id, "meta": meta, "exit": rec["exit"], "job": facts, "pid": None, "since": since,
               "boot_id_then": None, "boot_changed": False, "oom_kills_at_launch": None, "oom_kills_now": None,
               "alive": slurm.phase_of(facts.get("scheduler") or {}) in ("starting", "alive"),
               "log_tail": _tail(os.path.join(rec["dir"], jobrecord.LOG)),
               "accounting": rows, "accounting_source": "sacct -c" if completion else "sacct",
               "node": nodes[0] if nodes else None, "node_is_here": bool(nodes) and nodes[0].split(",")[0] == here})
    if ev["node_is_here"]:
        _with_kernel(ev, since, set())
    else:
        ev.update(kernel_readable=False, kernel_source=None, kernel_tried=None, kernel_oom_named=[],
                  kernel_oom_other=[], xid_after_launch=[])
    ev["disks"] = [disk.measure("job", p) for p in [rec["dir"]] + ([meta["workdir"]] if meta.get("workdir") else [])]
    return ev


def main(argv):
    opts = {"job": None, "pid": None, "since": None, "jobs-dir": None}
    it = iter(argv)
    for flag in it:
        opts[flag.lstrip("-")] = next(it, None)
    if opts["jobs-dir"]:
        os.environ["GPUOPS_JOBS_DIR"] = os.path.expanduser(opts["jobs-dir"])
    raw = sys.stdin.buffer.read()
    try:
        jobrecord.CALL.update(json.loads(raw.decode("utf-8")) if raw.strip() else {})
    except ValueError:
        pass
    try:
        ev = gather(opts["job"], int(opts["pid"]) if opts["pid"] else None,
                    float(opts["since"]) if opts["since"] else None)
    except jobrecord.JobError as e:
        ev = {"error": {"kind": e.kind, "message": str(e)}}
    sys.stdout.write(json.dumps(ev))
    return 0
