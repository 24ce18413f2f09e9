"""On-box evidence for `gpuops diagnose`: everything a verdict needs, in one round trip.

For a gpuops job: its records (exit record, boot_id, OOM counter and pid start time at launch),
the facts `status` derives its state from (liveness, progress lines), the box's boot_id and
uptime now, the cgroup OOM counter now, kernel-log OOM-killer lines and Xid lines stamped after
launch, free bytes and inodes on the job's paths, and the log's tail.
For a bare pid (`--pid P --since EPOCH`) the same, minus the records. Reads only.
"""

import json
import os
import re
import sys
import time

from . import cgroup, disk, job_facts, jobrecord, kernlog, procs

TAIL_BYTES = 64 * 1024
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
        meta = rec["meta"]
        pid = meta.get("pid")
        since = meta.get("launched_at") or since or now
        ev.update({
            "job_id": job_id, "meta": meta, "exit": rec["exit"],
            "boot_id_then": meta.get("boot_id"),
            "oom_kills_at_launch": meta.get("oom_kills_at_launch"),
            "boot_changed": bool(meta.get("boot_id")) and meta.get("boot_id") != ev["boot_id_now"],
            "alive": rec["exit"] is None and jobrecord.liveness(meta) == "alive",
            "log_tail": _tail(meta.get("log") or os.path.join(rec["dir"], jobrecord.LOG)),
            "job": job_facts.facts(job_id),
        })
        paths = [rec["dir"]] + ([meta["workdir"]] if meta.get("workdir") else [])
    else:
        since = since or now
        btime = procs.boot_time()
        st = procs.stat(pid)
        ev.update({"exit": None, "alive": procs.alive(pid),
                   "boot_changed": bool(btime) and since < btime, "boot_id_then": None,
                   "oom_kills_at_launch": None, "log_tail": None})
        if st:
            try:
                paths = [os.readlink("/proc/%d/cwd" % pid)]
            except OSError:
                pass
    ev["pid"] = pid
    ev["since"] = since
    kern = _kernel(since, {pid} if pid else set())
    ev["kernel_readable"] = kern["readable"]
    ev["kernel_source"] = kern.get("source")
    ev["kernel_tried"] = kern.get("tried")
    ev["kernel_oom_named"] = kern.get("oom_named", [])
    ev["kernel_oom_other"] = kern.get("oom_other", [])
    ev["xid_after_launch"] = [{"code": x["code"], "pci": x["pci"], "line": x["last_line"]} for x in kern.get("xid", [])]
    ev["disks"] = [disk.measure("job", p) for p in paths]
    return ev


def main(argv):
    opts = {"job": None, "pid": None, "since": None, "jobs-dir": None}
    it = iter(argv)
    for flag in it:
        opts[flag.lstrip("-")] = next(it, None)
    if opts["jobs-dir"]:
        os.environ["GPUOPS_JOBS_DIR"] = os.path.expanduser(opts["jobs-dir"])
    try:
        ev = gather(opts["job"], int(opts["pid"]) if opts["pid"] else None,
                    float(opts["since"]) if opts["since"] else None)
    except jobrecord.JobError as e:
        ev = {"error": {"kind": e.kind, "message": str(e)}}
    sys.stdout.write(json.dumps(ev))
    return 0
