"""Run telemetry: what the job's GPUs and processes do while it runs, sampled every few seconds by
its supervisor into a bounded file in the job directory, and the judgements a series allows that
one snapshot never does ("always sample over several seconds", U21).

GPU readings go through gpuops.onbox.host.gpu_light (NVML when the box's pynvml works, else one
nvidia-smi CSV query), so every NVML call still passes the one choke point. The job's CPU and
memory come from /proc through gpuops.onbox.host.procs (and so through the GPUOPS_ROOT seam).

A row, with short keys because the file holds thousands of them (telemetry.jsonl, a ringlog):
    t          epoch seconds of the reading
    cpu        CPU the job's processes used since the last row, in % of one core (400 = 4 cores)
    cpu_top    the busiest single process's share, same unit (a dataloader-less loop pegs one core)
    cores      cores the job may use (its CPU affinity, capped by the cgroup quota)
    rss        resident bytes summed over the job's processes (shared pages count in each)
    nproc      processes in the job's tree
    gpus       [{i, util, mem, mem_total, power, power_limit, sm, sm_max, throttle, temp}] for the
               job's GPUs: %, MiB, W, MHz, the clocks-event reason mask, C; None where unreadable
    src        "nvml" or "nvidia-smi"; gpu_error when the reading failed (the CPU part still counts)
"""

import os
import time

from . import cgroup, gpu, gpu_light, gpu_pins, procs, ringlog, sysroot
from typing import Sequence

FILE = "telemetry.jsonl"
MAX_BYTES, MAX_ROWS = 4 << 20, 20000   # about 7 h of 8 GPUs at 5 s; a day of 1 GPU
INTERVAL_S = 5.0
ROW_KEYS = (("index", "i"), ("util_pct", "util"), ("memory_used_mib", "mem"), ("memory_total_mib", "mem_total"),
            ("power_w", "power"), ("power_limit_w", "power_limit"), ("sm_clock_mhz", "sm"),
            ("sm_clock_max_mhz", "sm_max"), ("throttle_mask", "throttle"), ("temp_c", "temp"))
_EXTRA_KEYS = ("uuid", "power_w", "power_limit_w", "sm_clock_mhz", "sm_clock_max_mhz", "throttle_mask", "temp_c")
EXTRA = [f for f in gpu.CORE_FIELDS if f[1] in _EXTRA_KEYS]  # the full probe's own fields, real nvidia-smi names

# NVML's clocks-event (throttle) reason bits, the same in nvidia-smi's active mask. A power cap
# (0x4) is a GPU working at its limit, not a fault; these are the ones U23 is about.
THROTTLE_REASONS = ((0x8, "hw_slowdown"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
                    (0x80, "hw_power_brake"))
# Starvation's gotcha: U24, or U38 when the GPUs sit at about 0 % (the finding cites both: gpuops.jobs.runtelemetry).
STARVED_GOTCHA, IDLE_GOTCHA = "U24", "U38"
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def members(root_pid, pgid=None, adopted_by=None, exclude=()):
    """The job's pids: `root_pid`, its descendants, what is still in its process group, and with
    `adopted_by` (the supervisor, a child subreaper) every process it adopted but `exclude` (its own
    helpers). Descendants alone are not enough: torchrun starts each worker in a session of its own
    (torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py), so once
    torchrun dies its workers are in no group of the job's and under no process of it but the
    supervisor that adopted them."""
    found = set([root_pid]) if procs.stat(root_pid) else set()
    kids = {}
    for pid in procs.pids():
        st = procs.stat(pid)
        if not st or st["state"] in ("Z", "X"):
            continue
        kids.setdefault(st["ppid"], []).append(pid)
        if pgid and st["pgid"] == pgid:
            found.add(pid)
    found.update(procs.descendants(root_pid, kids))
    if adopted_by:
        found.update(p for p in procs.descendants(adopted_by, kids) if p != adopted_by)
    return sorted(found - set(exclude))


def rss_bytes(pid: int):
    text = sysroot.read("/proc/%d/statm" % pid) or ""
    parts = text.split()
    return int(parts[1]) * PAGE if len(parts) > 1 and parts[1].isdigit() else 0


def cores_for(pid: int):
    """Cores the job may run on: its affinity, capped by the cgroup's CPU quota."""
    try:
        cores = float(len(os.sched_getaffinity(pid)))
    except (AttributeError, OSError):
        cores = float(os.cpu_count() or 1)
    quota = ((cgroup.facts().get("cpu") or {}).get("quota_cores"))
    return min(cores, quota) if quota else cores


def pick_gpus(devices, spec):
    """The devices a job's CUDA_VISIBLE_DEVICES-style `spec` names (indices or UUIDs); all of them
    when it names none."""
    wanted = [w.strip() for w in str(spec or "").split(",") if w.strip()]
    if not wanted:
        return list(devices)
    return [d for d in devices if any(gpu_pins.names(w, d) for w in wanted)]


def gpu_rows(doc, spec=None) -> list:
    return [dict((short, d.get(key)) for key, short in ROW_KEYS) for d in pick_gpus(doc.get("devices") or [], spec)]


class Sampler(object):
    """Takes rows for one job: CPU shares need the previous reading, so it keeps the last ticks."""

    def __init__(self, root_pid, pgid=None, gpus=None, reader=None, cores=None, clock=time.time, adopted_by=None) -> None:
        self.root_pid, self.pgid, self.gpus, self.clock = root_pid, pgid, gpus, clock
        self.adopted_by = adopted_by  # the supervisor: what the job orphaned is still the job's
        self.reader, self.cores = reader, cores
        self._ticks, self._at = {}, None

    def _cpu(self, pids: Sequence[int], now):
        ticks, per = {}, []
        for pid in pids:
            st = procs.stat(pid)
            if st:
                key = (pid, st["start_ticks"])
                ticks[key] = st["cpu_ticks"]
                per.append(st["cpu_ticks"] - self._ticks.get(key, st["cpu_ticks"]))
        dt = now - self._at if self._at is not None else None
        self._ticks, self._at = ticks, now
        if not dt or dt <= 0:
            return None, None
        scale = 100.0 / procs.CLK_TCK / dt
        return round(sum(per) * scale, 1), round(max(per or [0]) * scale, 1)

    def take(self):
        now = self.clock()
        pids = members(self.root_pid, self.pgid, self.adopted_by)
        cpu, top = self._cpu(pids, now)
        if self.cores is None:
            self.cores = cores_for(self.root_pid)
        row = {"t": round(now, 2), "cpu": cpu, "cpu_top": top, "cores": self.cores, "nproc": len(pids),
               "rss": sum(rss_bytes(p) for p in pids)}
        if self.reader is None:
            self.reader = gpu_light.Reader()
        try:
            doc = self.reader.read(apps=False, extra=EXTRA)
        except Exception as e:  # a GPU reading must never cost the CPU half or the supervisor
            doc = {"source": None, "error": "%s: %s" % (type(e).__name__, e), "devices": []}
        row["src"] = doc.get("source")
        row["gpus"] = gpu_rows(doc, self.gpus)
        if doc.get("error"):
            row["gpu_error"] = str(doc["error"])[:300]
        return row


class Recorder(object):
    """The supervisor's side: `tick()` in its loop takes a row when one is due and appends it.
    Never raises: a full disk or a broken reading is kept in `error` for the caller to report."""

    def __init__(self, job_dir, sampler, interval_s=INTERVAL_S, max_bytes=MAX_BYTES, max_rows=MAX_ROWS) -> None:
        self.sampler, self.interval_s = sampler, float(interval_s)
        self.ring = ringlog.Ring(os.path.join(job_dir, FILE), max_bytes, max_rows)
        self.last_at, self.error = None, None

    def tick(self, now=None):
        now = time.time() if now is None else now
        if self.last_at is not None and now - self.last_at < self.interval_s:
            return None
        self.last_at = now
        try:
            row = self.sampler.take()
            self.ring.append(row)
        except Exception as e:  # noqa: the supervisor's loop outlives any one sample
            self.error = "%s: %s" % (type(e).__name__, e)
            return None
        self.error = None
        return row


def latest(job_dir):
    """The newest row, or None."""
    return ringlog.last(os.path.join(job_dir, FILE))


def series(job_dir, since=None) -> list:
    """Rows oldest first, those at or after `since` (epoch seconds) when given."""
    rows = ringlog.read(os.path.join(job_dir, FILE))
    return [r for r in rows if since is None or (r.get("t") or 0) >= since]


# ---------------------------------------------------------------- judgements over a series


def recent(rows, window_s) -> list:
    """The rows of the last `window_s` seconds of the series."""
    timed = [r for r in rows if isinstance(r.get("t"), (int, float))]
    if not timed:
        return []
    end = timed[-1]["t"]
    return [r for r in timed if r["t"] >= end - window_s]


def _enough(rows, min_rows, min_span_s):
    return len(rows) >= min_rows and rows[-1]["t"] - rows[0]["t"] >= min_span_s


def _per_gpu(rows) -> dict:
    """{gpu index: [its reading in each row]}, for GPUs read in every row of the window."""
    out = {}
    for row in rows:
        for g in row.get("gpus") or []:
            out.setdefault(g.get("i"), []).append(g)
    return dict((i, gs) for i, gs in out.items() if len(gs) == len(rows))


def busy_wait(rows, window_s=60.0, min_rows=3, min_span_s=20.0, util_min=95.0, power_share=0.4):
    """The busy-wait hang signature (seed 002, U21): utilisation pinned near 100 % while the power
    stays near idle, throughout the window. A rank spinning in a stuck collective keeps launching
    polling kernels (so `util` reads busy) but does no arithmetic (so the watts fall). Low power
    means at most `power_share` of the GPU's limit, or, without a limit, under 40 % of what the
    same GPU drew at full utilisation earlier in the run. None when the window is too short to
    tell or no GPU matches; else {signature, gotcha, gpus, all_gpus, since, evidence}."""
    window = recent(rows, window_s)
    if not _enough(window, min_rows, min_span_s):
        return None
    earlier = [r for r in rows if r.get("t", 0) < window[0]["t"]]
    busy_before = _per_gpu(earlier) if earlier else {}
    hits, evidence = [], {}
    readings = _per_gpu(window)
    for i, gs in sorted(readings.items(), key=lambda kv: str(kv[0])):
        utils, powers = [g.get("util") for g in gs], [g.get("power") for g in gs]
        if None in utils or None in powers or min(utils) < util_min:
            continue
        limit = gs[-1].get("power_limit")
        before = [g["power"] for g in busy_before.get(i, []) if (g.get("util") or 0) >= util_min and g.get("power")]
        ceiling = power_share * limit if limit else (0.4 * max(before) if before else None)
        if ceiling is None or max(powers) > ceiling:
            continue
        hits.append(i)
        evidence[str(i)] = {"util_min": min(utils), "power_max_w": max(powers), "power_limit_w": limit,
                            "power_busy_before_w": max(before) if before else None}
    if not hits:
        return None
    return {"signature": "busy-wait", "gotcha": "U21", "gpus": hits, "all_gpus": len(hits) == len(readings),
            "since": window[0]["t"], "rows": len(window), "evidence": evidence}


def throttled(rows) -> list:
    """Every GPU that throttled for heat or hardware at some point of the series (U23: the run is
    slower with no error anywhere): [{gpu, reasons, first_t, last_t, rows, of_rows, sm_min_mhz,
    sm_max_mhz, temp_max_c}], empty when none did."""
    found, read = {}, {}
    for row in rows:
        for g in row.get("gpus") or []:
            mask = g.get("throttle")
            if mask is None:
                continue
            i = g.get("i")
            read[i] = read.get(i, 0) + 1
            names = [name for bit, name in THROTTLE_REASONS if mask & bit]
            if not names:
                continue
            e = found.setdefault(i, {"gpu": i, "reasons": [], "first_t": row.get("t"), "rows": 0,
                                     "sm_min_mhz": None, "sm_max_mhz": g.get("sm_max"), "temp_max_c": None})
            e["reasons"] = sorted(set(e["reasons"]) | set(names))
            e["last_t"], e["rows"] = row.get("t"), e["rows"] + 1
            for key, value, pick in (("sm_min_mhz", g.get("sm"), min), ("temp_max_c", g.get("temp"), max)):
                if value is not None:
                    e[key] = value if e[key] is None else pick(e[key], value)
    for i, e in found.items():
        e["of_rows"] = read[i]
    return [found[i] for i in sorted(found, key=str)]


def starved(rows, window_s=60.0, min_rows=3, min_span_s=20.0, util_max=50.0, cpu_share=0.85, proc_pct=95.0,
            mem_min_mib=512.0):
    """Dataloader starvation (U24; U38 when the GPUs sit at ~0 %): the job holds GPU memory (a model
    is loaded) but its GPUs are mostly idle, while its CPUs are saturated: all the cores it may use,
    or one process pegging a core (a loop with num_workers=0). None when the window is too short,
    or the GPUs are busy, or the CPUs are not; else {signature, gotcha, since, evidence}."""
    window = recent(rows, window_s)
    if not _enough(window, min_rows, min_span_s):
        return None
    readings = _per_gpu(window)
    utils = [g.get("util") for gs in readings.values() for g in gs]
    mems = [g.get("mem") for gs in readings.values() for g in gs[-1:]]
    cpus = [r.get("cpu") for r in window if r.get("cpu") is not None]
    tops = [r.get("cpu_top") for r in window if r.get("cpu_top") is not None]
    if not utils or None in utils or not cpus or not any(m is not None and m >= mem_min_mib for m in mems):
        return None
    util_mean, cpu_mean = sum(utils) / len(utils), sum(cpus) / len(cpus)
    top_mean = sum(tops) / len(tops) if tops else 0.0
    cores = window[-1].get("cores") or 1
    saturated = cpu_mean >= cpu_share * cores * 100.0 or top_mean >= proc_pct
    if util_mean > util_max or not saturated:
        return None
    return {"signature": "dataloader-starved", "gotcha": IDLE_GOTCHA if util_mean < 5.0 else STARVED_GOTCHA,
            "since": window[0]["t"], "rows": len(window),
            "evidence": {"gpu_util_mean": round(util_mean, 1), "cpu_mean_pct": round(cpu_mean, 1),
                         "cpu_top_mean_pct": round(top_mean, 1), "cores": cores}}


def judged(job_dir):
    """What a job's whole series says, for diagnose and triage (the series stays on the box):
    {rows, first_t, last_t, busy_wait, throttled, starved}; None when nothing was sampled."""
    rows = series(job_dir)
    if not rows:
        return None
    return {"rows": len(rows), "first_t": rows[0].get("t"), "last_t": rows[-1].get("t"),
            "busy_wait": busy_wait(rows), "throttled": throttled(rows)[:16], "starved": starved(rows)}
