"""Where a job fits: a pure function of the fleet's rows (gpuops.ops.fleet) and the request.

A GPU is free when no sample of the window saw it used, it holds no more than BUSY_MIB of memory
(someone else's context), and no running gpuops job is pinned to it; a running gpuops job that
was started without --gpus may use any GPU of its box, so that box has none free. A box fits when
it has at least the asked number of free GPUs of the asked model (a case-insensitive part of the
name nvidia-smi gives) with at least the asked memory each. Of the boxes that fit, the least loaded
is chosen (the smallest share of busy GPUs, then the fewest gpuops jobs, then the fleet's order),
and its lowest-numbered free matching GPUs are pinned. Every other box gets its reason.

A box whose last `preflight --qualify` on this workstation returned it is passed over with that reason.

When nothing fits, the answer says so plainly, seed 000 style: "asked for 4x H100; fleet has 8x
A100 free, 2x H100 busy".
"""

from .errors import UsageError

BUSY_MIB = 1024
MIB_PER_GIB = 1024


def request(gpus, gpu_type=None, min_vram_gib=None) -> dict:
    """The validated request: {gpus, gpu_type, min_vram_gib}."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 64:
        raise UsageError(f"with --fleet, --gpus is how many GPUs the job needs (1 to 64), not {gpus!r}")
    if gpu_type is not None and not str(gpu_type).strip():
        raise UsageError("--gpu-type names a GPU model, e.g. H100 or A100")
    if min_vram_gib is not None and not 0 < min_vram_gib <= 4096:
        raise UsageError(f"--min-vram-gib takes GiB from 0 to 4096, not {min_vram_gib!r}")
    return {"gpus": gpus, "gpu_type": str(gpu_type).strip() if gpu_type else None, "min_vram_gib": min_vram_gib}


def model(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100 80GB HBM3': the words people use."""
    name = (name or "unknown GPU").strip()
    for prefix in ("NVIDIA ", "Tesla "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def _pins(row):
    """({GPU index or uuid pinned by a running job}, [ids of running jobs pinned to nothing])."""
    pinned, loose = set(), []
    for job, gpus in zip(row.get("running_jobs") or [], row.get("running_gpus") or []):
        if gpus:
            pinned.update(g.strip() for g in gpus.split(","))
        else:
            loose.append(job)
    if (row.get("jobs_running") or 0) > len(row.get("running_jobs") or []):
        loose.append("unlisted")  # more jobs run than the box listed: assume the worst
    return pinned, loose


def gpu_states(row) -> list:
    """[{index, model, memory_total_mib, busy: why or None}] of one answering box."""
    pinned, loose = _pins(row)
    out = []
    for d in row.get("devices") or []:
        why = None
        if d["util_peak_pct"] is None:
            why = "utilisation unreadable"
        elif d["util_peak_pct"] > 0:
            why = f"at {d['util_peak_pct']:.0f}%"
        elif (d["memory_used_mib"] or 0) > BUSY_MIB:
            why = f"{d['memory_used_mib'] / MIB_PER_GIB:.1f} GiB in use"
        elif str(d["index"]) in pinned:
            why = "pinned by a running gpuops job"
        elif loose:
            why = f"gpuops job {loose[0]} runs without --gpus (it may use any GPU)"
        out.append({"index": d["index"], "model": model(d["name"]), "memory_total_mib": d["memory_total_mib"],
                    "busy": why})
    return out


def _matches(gpu, req):
    if req["gpu_type"] and req["gpu_type"].lower() not in gpu["model"].lower():
        return False
    need = req["min_vram_gib"]
    return not need or (gpu["memory_total_mib"] or 0) >= need * MIB_PER_GIB


def _asked(req) -> str:
    text = f"{req['gpus']}x {req['gpu_type'] or 'GPU'}"
    if req["min_vram_gib"]:
        text += f" with at least {req['min_vram_gib']:g} GiB"
    return text


def _count(gpus) -> str:
    counts = {}
    for g in gpus:
        counts[g["model"]] = counts.get(g["model"], 0) + 1
    return ", ".join(f"{n}x {m}" for m, n in counts.items())


def _why_not(gpus, req):
    """Why a box that answered cannot take the request (None when it can)."""
    if not gpus:
        return "no GPUs"
    kind = [g for g in gpus if _matches(g, req)]
    free = [g for g in kind if not g["busy"]]
    if len(free) >= req["gpus"]:
        return None
    if not kind:
        return f"has {_count(gpus)}; asked for {_asked(req)}"
    busy = "; ".join(f"GPU {g['index']} {g['busy']}" for g in kind if g["busy"])
    return f"{len(free)} of {len(kind)} matching GPU(s) free" + (f" ({busy})" if busy else "")


def returned(row):
    """Why a box its last `preflight --qualify` returned is passed over (None when it was not):
    it measured below its datasheet, and placing a job there pays for that."""
    q = row.get("qualify") or {}
    if q.get("verdict") != "return":
        return None
    failed = ", ".join(q.get("failed") or []) or "figures below the datasheet"
    return f"returned by preflight --qualify ({failed}); qualify it again once the provider fixed it"


def place(rows, req) -> dict:
    """{host, gpus: [indices], summary, boxes: [{host, verdict: chosen|fits|passed, why}]}; host is
    None when nothing fits."""
    judged, fitting = [], []
    for order, row in enumerate(rows):
        if not row["ok"]:
            judged.append({"host": row["host"], "verdict": "passed",
                           "why": f"not answering ({row['error']['kind']}): {row['error']['message']}"})
            continue
        gpus = gpu_states(row)
        why = _why_not(gpus, req) or returned(row)
        entry = {"host": row["host"], "verdict": "passed" if why else "fits", "why": why, "gpu_states": gpus}
        judged.append(entry)
        if not why:
            busy = sum(1 for g in gpus if g["busy"])
            fitting.append(((busy / len(gpus), row.get("jobs_running") or 0, order), entry, gpus))
    if not fitting:
        return {"host": None, "gpus": [], "boxes": judged, "summary": nothing_fits(rows, judged, req)}
    fitting.sort(key=lambda f: f[0])
    load, chosen, gpus = fitting[0]
    picked = sorted((g for g in gpus if not g["busy"] and _matches(g, req)), key=lambda g: g["index"])[:req["gpus"]]
    chosen.update(verdict="chosen", why=f"least loaded: {_load(load, gpus)}")
    for other_load, entry, other in fitting[1:]:
        entry["why"] = (f"fits too, but more loaded ({_load(other_load, other)})" if other_load[:2] > load[:2]
                        else f"fits too; {chosen['host']} comes first in the fleet")
    indices = [g["index"] for g in picked]
    summary = (f"placed on {chosen['host']}: GPU{'s' if len(indices) > 1 else ''} "
               f"{','.join(map(str, indices))} ({_count(picked)}), the least loaded of {len(fitting)} that fit")
    return {"host": chosen["host"], "gpus": indices, "boxes": judged, "summary": summary}


def _load(key, gpus) -> str:
    busy, jobs = round(key[0] * len(gpus)), key[1]
    return f"{busy} of {len(gpus)} GPUs busy, {jobs} gpuops job(s)"


def nothing_fits(rows, judged, req) -> str:
    """'asked for 4x H100; fleet has 8x A100 free, 2x H100 busy; 1 box not answering'."""
    free, busy = [], []
    for entry in judged:
        for g in entry.get("gpu_states") or []:
            (busy if g["busy"] else free).append(g)
    parts = [f"{_count(free)} free" if free else "", f"{_count(busy)} busy" if busy else ""]
    have = ", ".join(p for p in parts if p) or "no GPUs"
    down = sum(1 for r in rows if not r["ok"])
    text = f"asked for {_asked(req)}; fleet has {have}"
    if down:
        text += f"; {down} box{'es' if down > 1 else ''} not answering"
    return text
