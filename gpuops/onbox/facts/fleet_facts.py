"""On-box facts for the fleet view, in one exec: GPUs sampled over a short window, the gpuops jobs
running now and when the last one ended, disk and inode headroom of one directory, uptime.
Entry: main(argv).

Only facts leave the box; whether it is idle and what that cost is judged on the caller's side
(gpuops.ops.fleet), so the rule is pure and tested without a box. Every list is bounded: a box
with thousands of job directories or a driver listing odd devices still answers in bounded bytes.
"""

import argparse
import json
import os
import shutil
import socket
import sys
import time

from ..host import disk, gpu_light, gpu_pins, jobrecord, procs
from ..host.jobrecord import EXIT, LOG, META

# How many jobs, newest launch first, have their end time read. Every job without an exit record
# is still checked for life, however old (a two-week run must never make its box look idle); an
# older job that has one ended, in all but odd cases, before the newest ones did.
MAX_ENDS_READ = 2000
MAX_RUNNING_LISTED = 50
MAX_GPUS = 64
MAX_PROCESSES = 16  # per GPU


def _args(argv):
    p = argparse.ArgumentParser(prog="fleet_facts")
    p.add_argument("--window", type=float, default=2.0)
    p.add_argument("--interval", type=float, default=0.5)
    p.add_argument("--path", default="")
    p.add_argument("--jobs-dir", default="")
    p.add_argument("--processes", action="store_true")
    return p.parse_args(argv)


def gpus(window_s, interval_s, processes=False):
    """({present, source, error, samples, devices: [{index, name, memory_used_mib, memory_total_mib,
    util_peak_pct, processes}]}, the first reading's devices with their UUIDs); processes (with
    `processes`, else None): [{pid, name, user, used_mib}] of each GPU, as nvitop and gpustat show
    them. `present` is False when neither NVML nor nvidia-smi exists here: a box without GPUs, whose
    utilisation is then no reason to call it busy."""
    reader = gpu_light.Reader()
    if reader.nvml is None and shutil.which("nvidia-smi") is None:
        return {"present": False, "source": None, "error": None, "samples": 0, "devices": []}, []
    # The names ride along in the first sample's query: one nvidia-smi run fewer per box.
    first, peak, samples = gpu_light.sample(reader, window_s, interval_s, names=True, apps=processes,
                                            extra=(gpu_pins.UUID_FIELD,))
    on_bus = {}
    for p in first.get("processes") or []:
        on_bus.setdefault(p.get("bus_id"), []).append(p)
    devices = []
    for d in first["devices"][:MAX_GPUS]:
        devices.append({"index": d.get("index"), "name": d.get("name"),
                        "memory_used_mib": d.get("memory_used_mib"), "memory_total_mib": d.get("memory_total_mib"),
                        "util_peak_pct": peak.get(d.get("index")),
                        "processes": [_process(p) for p in on_bus.get(d.get("bus_id"), [])[:MAX_PROCESSES]]
                        if processes else None})
    return {"present": True, "source": first.get("source"), "error": first.get("error"), "samples": samples,
            "devices": devices}, first["devices"]


def _process(p) -> dict:
    """One GPU process: its pid, name (nvidia-smi's, else its command's first word), user, memory."""
    import pwd

    pid, name, user = p.get("pid"), p.get("name"), None
    if isinstance(pid, int):
        name = name or (procs.cmdline(pid, 200) or "").split(" ")[0] or None
        uid = procs.uid(pid)
        try:
            user = pwd.getpwuid(uid).pw_name if uid is not None else None
        except KeyError:
            user = str(uid)
    return {"pid": pid, "name": os.path.basename(name)[:64] if name else None, "user": user[:32] if user else None,
            "used_mib": p.get("used_mib")}


def _ended_at(job_id, meta, exit_doc):
    """When a job that is not running stopped: its exit record, else its log's last write (a job
    that vanished without one), else its launch; None when it died with an earlier boot."""
    if isinstance(exit_doc, dict) and isinstance(exit_doc.get("ended_at"), (int, float)):
        return float(exit_doc["ended_at"])
    if meta.get("boot_id") and meta.get("boot_id") != procs.boot_id():
        return None  # it ended at or before the boot, which the caller counts anyway
    try:
        return os.stat(jobrecord.path(job_id, LOG)).st_mtime
    except OSError:
        launched = meta.get("launched_at")
        return float(launched) if isinstance(launched, (int, float)) else None


def jobs(devices=()) -> dict:
    """{dir, running: [ids], running_gpus: [the --gpus each was pinned to, or None], running_count,
    last_end, last_job, ends_read, total}; a pin by UUID is written as the index of the GPU of
    `devices` it names, since the caller knows GPUs by index."""
    ids = jobrecord.all_ids()
    running, pinned, last_end, last_job, ends_read = [], [], None, None, 0
    for n, job_id in enumerate(reversed(ids)):
        exit_path = jobrecord.path(job_id, EXIT)
        if n >= MAX_ENDS_READ and os.path.exists(exit_path):
            continue
        exit_doc = jobrecord.read_json(exit_path)
        meta = jobrecord.read_json(jobrecord.path(job_id, META))
        if not isinstance(meta, dict):
            continue
        if exit_doc is None and meta.get("pid") and jobrecord.liveness(meta) == "alive":
            running.append(job_id)
            gpus = meta.get("gpus") if isinstance(meta.get("gpus"), str) else None
            pinned.append(gpu_pins.as_indices(gpus, devices) if gpus else None)
            continue
        ends_read += 1
        end = _ended_at(job_id, meta, exit_doc)
        if end is not None and (last_end is None or end > last_end):
            last_end, last_job = end, job_id
    return {"dir": jobrecord.jobs_dir(), "running": running[:MAX_RUNNING_LISTED],
            "running_gpus": [g[:200] if g else None for g in pinned[:MAX_RUNNING_LISTED]], "running_count": len(running),
            "last_end": last_end, "last_job": last_job, "ends_read": ends_read, "total": len(ids)}


def main(argv) -> int:
    opts = _args(argv)
    if opts.jobs_dir:
        os.environ["GPUOPS_JOBS_DIR"] = os.path.expanduser(opts.jobs_dir)
    window = max(0.0, min(opts.window, 60.0))
    interval = max(0.1, min(opts.interval, 10.0))
    role, path = ("data_dir", opts.path) if opts.path else ("home", "~")
    gpu, devices = gpus(window, interval, opts.processes)
    doc = {"now": time.time(), "hostname": socket.gethostname()[:255], "uptime_s": procs.uptime_s(),
           "gpu": gpu, "jobs": jobs(devices), "disk": disk.measure(role, path)}
    sys.stdout.write(json.dumps(doc))
    return 0
