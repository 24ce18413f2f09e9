"""Fleet inventory: every box asked at once (one exec each), its answer checked, one row per box.

The boxes do the looking (gpuops.onbox.facts.fleet_facts); what is judged here is pure: whether a box is
idle, since when and what that cost (`idleness`), and the row people and agents see (`row`). One
box that cannot be asked, or answers something that is not gpuops's, is a row with its error; the
others are still shown, and the exit code is the worst row's (gpuops.errors).
"""

import re
from collections import Counter

from .. import errors, fleetstate, profiles, qualifystore, shapes
from ..boundary import bounded, shaped
from ..envelope import CODE_KEY, envelope, exit_code
from ..engines.answers import job_id
from ..engines.platform import records_dir
from ..remote import knownkeys

# A fleet of up to 64 boxes is asked in one wave (a box's answer is mostly its sampling window,
from ..remote.fanout import each_host
from ..remote.targets import target_for
# spent waiting on the box), yet bounded: each worker holds one local ssh process.
WORKERS = 64
DEFAULT_WINDOW_S = 2.0
SAMPLES = 5  # readings over the window (the first included), as reap's idle test takes them
_SLACK_S = 30  # for the handshake, python's start and the job scan, past the window

NUMBER = (int, float)
NONE = type(None)
_GPU = {"present": bool, "source": (str, NONE), "error": (str, NONE), "samples": int, "devices": list}
_DEVICE = {"index": (int, NONE), "name": (str, NONE), "memory_used_mib": NUMBER + (NONE,),
           "memory_total_mib": NUMBER + (NONE,), "util_peak_pct": NUMBER + (NONE,), "processes": (list, NONE)}
_PROCESS = {"pid": (int, NONE), "name": (str, NONE), "user": (str, NONE), "used_mib": NUMBER + (NONE,)}
_JOBS = {"dir": str, "running": list, "running_gpus": list, "running_count": int, "last_end": NUMBER + (NONE,),
         "last_job": (str, NONE), "ends_read": int, "total": int}
_DISK = {"role": str, "path": str, "total_bytes": (int, NONE), "free_bytes": (int, NONE),
         "total_inodes": (int, NONE), "free_inodes": (int, NONE), "error": (str, NONE), "measured_at": (str, NONE)}
# What an honest box can say: 64 GPUs of at most 16 TiB each, a century of uptime, a million jobs.
MAX_GPUS, MAX_MIB, MAX_UPTIME_S, MAX_JOBS, MAX_TEXT = 64, 1 << 24, 100 * 365 * 86400, 1 << 20, 512
MAX_PROCESSES = 16  # per GPU (gpuops.onbox.facts.fleet_facts)


def _bounded(value, low, high, host: str, what):
    return bounded(value, low, high, host, what, "fleet answer")


def checked(facts, host: str):
    """The fleet answer once its shape and ranges are what gpuops' on-box code writes."""
    shapes.checked("fleet_facts", facts, host)
    gpu = shaped(facts["gpu"], _GPU, host, "fleet GPU answer")
    jobs = shaped(facts["jobs"], _JOBS, host, "fleet jobs answer")
    disk = shaped(facts["disk"], _DISK, host, "fleet disk answer")
    _bounded(facts["now"], 0, 1e11, host, "now")
    _bounded(facts["uptime_s"], 0, MAX_UPTIME_S, host, "uptime_s")
    _bounded(len(gpu["devices"]), 0, MAX_GPUS, host, "the number of GPUs")
    _bounded(gpu["samples"], 0, 10000, host, "samples")
    for d in gpu["devices"]:
        shaped(d, _DEVICE, host, "fleet GPU row")
        _bounded(d["index"], 0, 1023, host, "a GPU index")
        _bounded(d["util_peak_pct"], 0, 100, host, "util_peak_pct")
        for key in ("memory_used_mib", "memory_total_mib"):
            _bounded(d[key], 0, MAX_MIB, host, key)
        _bounded(len(d["name"] or ""), 0, MAX_TEXT, host, "a GPU name's length")
        _bounded(len(d["processes"] or ()), 0, MAX_PROCESSES, host, "a GPU's processes")
        for p in d["processes"] or ():
            shaped(p, _PROCESS, host, "fleet GPU process")
            _bounded(p["pid"], 0, 1 << 22, host, "a process id")
            _bounded(p["used_mib"], 0, MAX_MIB, host, "a process's used_mib")
            _bounded(len(p["name"] or "") + len(p["user"] or ""), 0, MAX_TEXT, host, "a process's name")
    _bounded(len(jobs["running"]), 0, jobs["running_count"], host, "the running jobs listed")
    _bounded(jobs["running_count"], 0, MAX_JOBS, host, "running_count")
    for value in jobs["running"] + ([jobs["last_job"]] if jobs["last_job"] else []):
        job_id(value, host)
    _bounded(len(jobs["running_gpus"]), len(jobs["running"]), len(jobs["running"]), host, "the running jobs' GPUs")
    for pinned in jobs["running_gpus"]:
        if not (pinned is None or (isinstance(pinned, str) and len(pinned) <= MAX_TEXT)):
            raise errors.BadAnswer(f"{host}: the box's fleet answer is not gpuops's: a job's GPUs are {pinned!r:.80}")
    _bounded(jobs["last_end"], 0, 1e11, host, "last_end")
    for key in ("total_bytes", "free_bytes", "total_inodes", "free_inodes"):
        _bounded(disk[key], 0, 1 << 62, host, key)
    for text, what in ((facts["hostname"], "hostname"), (gpu["error"], "GPU error"), (gpu["source"], "GPU source"),
                       (disk["path"], "disk path"), (disk["error"], "disk error"),
                       (disk["measured_at"], "disk's measured_at"), (jobs["dir"], "jobs dir")):
        _bounded(len(text or ""), 0, MAX_TEXT, host, f"the {what}'s length")
    return facts


def idleness(facts, usd_per_hour=None):
    """{state: busy|idle|unknown, why, since, idle_s, idle_usd} from a box's checked facts.

    Idle means no GPU utilisation in any sample and no gpuops job running; it began at the later
    of the last job's end and the boot. A GPU whose utilisation could not be read is not provably
    idle, so the box is 'unknown' unless something else already makes it busy."""
    out = {"state": "busy", "why": None, "since": None, "idle_s": None, "idle_usd": None}
    running = facts["jobs"]["running_count"]
    gpu = facts["gpu"]
    used = [d for d in gpu["devices"] if (d["util_peak_pct"] or 0) > 0]
    if running:
        out["why"] = f"{running} gpuops job(s) running"
        return out
    if used:
        out["why"] = "GPU " + ", ".join(f"{d['index']} at {d['util_peak_pct']:.0f}%" for d in used)
        return out
    unread = gpu["present"] and (gpu["error"] or any(d["util_peak_pct"] is None for d in gpu["devices"]))
    if unread:
        out.update(state="unknown", why=f"GPU utilisation unreadable: {gpu['error'] or 'no reading from a GPU'}")
        return out
    boot = facts["now"] - facts["uptime_s"] if facts["uptime_s"] is not None else None
    candidates = [t for t in (boot, facts["jobs"]["last_end"]) if t is not None]
    if not candidates:
        out.update(state="unknown", why="neither the boot time nor a job's end is known")
        return out
    since = max(candidates)
    idle_s = max(0.0, facts["now"] - since)
    out.update(state="idle", since=since, idle_s=idle_s,
               why="since the last gpuops job ended" if since != boot else "since boot (no gpuops job ended after it)")
    if usd_per_hour is not None:
        out["idle_usd"] = round(idle_s / 3600.0 * usd_per_hour, 2)
    return out


def _models(devices):
    """[{model, count}] in the order the GPUs are listed."""
    counts = {}
    for d in devices:
        name = d["name"] or "unknown GPU"
        counts[name] = counts.get(name, 0) + 1
    return [{"model": m, "count": c} for m, c in counts.items()]


def _sum(values):
    return None if any(v is None for v in values) else sum(values)


def row(box, facts=None, error=None):
    """One box as the fleet view shows it; `error` (a dict kind/message) when it could not be asked."""
    out = {"host": box.alias, "ok": error is None, "error": error, "profile": box.profile or None,
           "usd_per_hour": box.usd_per_hour, "labels": dict(box.labels),
           "qualify": qualifystore.verdict(box.alias)}  # its last `preflight --qualify`, kept here
    if error is not None:
        return out
    gpu, disk = facts["gpu"], facts["disk"]
    devices = gpu["devices"]
    used = _sum([d["memory_used_mib"] for d in devices])
    total = _sum([d["memory_total_mib"] for d in devices])
    utils = [d["util_peak_pct"] for d in devices]
    out.update({
        "hostname": facts["hostname"], "box_now": facts["now"], "uptime_s": facts["uptime_s"],
        "gpus": _models(devices), "gpu_count": len(devices), "gpu_present": gpu["present"], "gpu_error": gpu["error"],
        "vram_used_mib": used, "vram_total_mib": total,
        "vram_free_mib": None if used is None or total is None else max(0, total - used),
        "util_peak_pct": None if None in utils or not utils else max(utils), "util_samples": gpu["samples"],
        "devices": [{k: d.get(k) for k in _DEVICE} for d in devices],
        "jobs_running": facts["jobs"]["running_count"], "running_jobs": facts["jobs"]["running"],
        "running_gpus": facts["jobs"]["running_gpus"],
        "last_job": facts["jobs"]["last_job"], "last_job_end": facts["jobs"]["last_end"],
        "disk": {k: disk.get(k) for k in _DISK},
        "idle": idleness(facts, box.usd_per_hour),
    })
    return out


def build(rows):
    """The fleet envelope: data.hosts (one row per box, in the order asked) and the totals. A box a
    keeper called lost (gpuops.fleetstate) carries `lost`: {lost_at, why, run}."""
    lost = fleetstate.lost_boxes()
    for r in rows:
        r["lost"] = lost.get(r["host"]) if isinstance(lost.get(r["host"]), dict) else None
    answered = [r for r in rows if r["ok"]]
    idle = [r for r in answered if r["idle"]["state"] == "idle"]
    spent = [r["idle"]["idle_usd"] for r in idle if r["idle"]["idle_usd"] is not None]
    burning = [r["usd_per_hour"] for r in idle if r["usd_per_hour"] is not None]
    totals = {"boxes": len(rows), "answered": len(answered), "idle": len(idle),
              "busy": sum(1 for r in answered if r["idle"]["state"] == "busy"),
              "unknown": sum(1 for r in answered if r["idle"]["state"] == "unknown"),
              "idle_usd": round(sum(spent), 2), "idle_usd_per_hour": round(sum(burning), 2)}
    parts = [f"{totals['busy']} busy", f"{totals['idle']} idle"]
    if spent or burning:
        parts[-1] += f" (${totals['idle_usd']:.2f} spent idle, ${totals['idle_usd_per_hour']:.2f}/h now)"
    if totals["unknown"]:
        parts.append(f"{totals['unknown']} unknown")
    failed = [r for r in rows if not r["ok"]]
    if failed:
        parts.append(f"{len(failed)} not answering ({', '.join(r['host'] for r in failed)})")
    gone = [r["host"] for r in rows if r["lost"]]
    if gone:
        parts.append(f"{len(gone)} lost by a kept run ({', '.join(gone)})")
    summary = f"{len(rows)} box{'es' if len(rows) != 1 else ''}: " + ", ".join(parts)
    doc = envelope("fleet", ok=not failed, summary=summary, data={"hosts": rows, "totals": totals})
    code = exit_code({"hosts": [{"ok": r["ok"], "error": r["error"]} for r in rows]})
    if code != errors.OK:
        doc[CODE_KEY] = code
    return doc


def box_args(box):
    """The on-box entry's directory arguments from the box's profile: its data dir when the profile
    names one concretely (`~` and $HOME are expanded on the box; else the box's home is measured)
    and its job records' directory when it moves them."""
    if not box.profile:
        return []
    prof = profiles.load(box.profile)
    data = prof.paths.data_dir
    if data == "$HOME" or data.startswith("$HOME/"):
        data = "~" + data[5:]
    jobs, _ = records_dir(prof)
    args = ["--path", data] if data and not re.search(r"[$<*]", data) else []
    return args + (["--jobs-dir", jobs] if jobs else [])


def inventory(boxes, window_s=DEFAULT_WINDOW_S, identity=None, workers=WORKERS, processes=False):
    """Ask every box in `boxes` (fleetfile.Box) at once; the fleet envelope. `processes`: each
    GPU's compute processes too (fleet --watch shows them)."""
    if not boxes:
        raise errors.UsageError("no hosts to ask")
    twice = sorted(a for a, n in Counter(b.alias for b in boxes).items() if n > 1)
    if twice:
        raise errors.UsageError(f"{', '.join(twice)} named more than once: each box is asked once")
    extra = {b.alias: box_args(b) for b in boxes}  # a broken profile is a usage error, before any SSH
    interval = window_s / (SAMPLES - 1) if window_s > 0 else 0.5
    by_alias = {b.alias: b for b in boxes}

    def ask(alias):
        target = target_for(alias, identity)
        try:
            args = ["--window", window_s, "--interval", interval] + extra[alias] + (["--processes"] if processes else [])
            facts = checked(target.run_onbox("fleet_facts", args, timeout_s=window_s + _SLACK_S), alias)
            return facts, knownkeys.of_target(target)
        finally:
            target.close()

    answers = dict(each_host(list(by_alias), ask, max_workers=workers))
    shared = knownkeys.shared({a: v[1] for a, v in answers.items() if isinstance(v, tuple)})
    rows = []
    for alias, value in answers.items():
        if alias in shared:
            value = errors.HostKeyShared(
                f"{alias} answers with the host key of {shared[alias]}: one box under two names, or a clone of the "
                "same image (same SSH host keys); left out so its GPUs are not counted twice")
        if isinstance(value, errors.GpuopsError):
            rows.append(row(by_alias[alias], error=value.as_dict()))
        elif isinstance(value, Exception):  # a bug met on one box is that box's row, never the fleet's end
            rows.append(row(by_alias[alias], error={"kind": "internal", "message": f"{type(value).__name__}: {value}"}))
        else:
            rows.append(row(by_alias[alias], value[0]))
    return build(rows)
