"""On-box evidence for `gpuops diagnose`: everything a verdict needs, in one round trip.

For a gpuops job: its records, the facts `status` derives its state from, the box's boot_id and
uptime now, the cgroup OOM counter now, free bytes and inodes on the job's paths, core dumps
since launch (gpuops.onbox.host.cores: the job's cwd, coredumpctl where present), the log's head (where
trackers such as W&B say whether they sync), and what its engine adds (gpuops.onbox.engines.registry: the supervisor's boot_id, OOM counter and pid at launch against
now, the kernel log's OOM-killer and Xid lines stamped after launch, the log's tail; a scheduler's
account of the job).
For a bare pid (`--pid P --since EPOCH`) the box's part, minus the records. Reads only.
"""

import json
import os
import sys
import time

from ..host import cgroup, cores, disk, evidence, jobrecord, procs, telemetry
from ..engines import registry
from . import job_facts
from typing import Optional


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def gather(job_ref=None, pid: Optional[int]=None, since=None):
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
        facts = job_facts.facts(job_id)
        ev.update(job_id=job_id, meta=meta or None, exit=rec["exit"], job=facts,
                  since=meta.get("launched_at") or since or now)
        registry.of(meta).diagnose_facts(ev, job_id, rec, facts)
        ev["telemetry"] = telemetry.judged(rec["dir"])
        ev["log_head"] = evidence.head(meta.get("log") or os.path.join(rec["dir"], jobrecord.LOG))
        paths = [rec["dir"]] + ([meta["workdir"]] if meta.get("workdir") else [])
        cwd = meta.get("workdir")
    else:
        since = since or now
        btime = procs.boot_time()
        st = procs.stat(pid)
        ev.update({"exit": None, "alive": procs.alive(pid), "pid": pid, "since": since,
                   "boot_changed": bool(btime) and since < btime, "boot_id_then": None,
                   "oom_kills_at_launch": None, "log_tail": None, "log_head": None})
        cwd = None
        if st:
            try:
                paths = [os.readlink("/proc/%d/cwd" % pid)]
                cwd = paths[0]
            except OSError:
                pass
        evidence.with_kernel(ev, since, {pid})
    ev["disks"] = [disk.measure("job", p) for p in paths]
    ev["cores"] = cores.facts(cwd, ev["since"])
    return ev


def main(argv) -> int:
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
