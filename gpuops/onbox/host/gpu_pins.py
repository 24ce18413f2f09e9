"""Whether a launch may have the GPUs its --gpus names, judged on the box in the launch's own round
trip: the box's GPU list (nvidia-smi, through gpuops.onbox.host.smi), the pins of the gpuops jobs alive
in the same jobs directory, and the memory each GPU holds now.

CUDA shows a process only the devices listed before the first entry of CUDA_VISIBLE_DEVICES it
cannot find (the CUDA programming guide's environment variables), so `--gpus 7` on a box of two
GPUs used to run the job on the CPU without a word: an entry the box lacks refuses the launch. A
GPU another live gpuops job is pinned to is refused unless the launch says --share-gpu, since what
either job will allocate later cannot be known now (GEN7); one whose memory is mostly in use
already is a warning (U10). The box launch (gpuops.onbox.engines.box_launch) asks under the jobs-dir lock,
so two launches cannot both take a free GPU.

Findings are dicts in gpuops.findings.Finding's shape; a failing one refuses the launch. The
workstation reads the syntax from here too (gpuops.jobs.spec), so the readers of the box are
imported where they are used, not by that.
"""

import os
import re
import shutil

MAX_GPUS = 64  # per box, as the fleet view bounds it
MOSTLY_HELD = 0.5  # of a GPU's memory in use before the job starts: a warning
_INDEX = re.compile(r"^[0-9]{1,3}$")
# A whole UUID as `nvidia-smi -L` prints it, or its start: CUDA takes any prefix that names one GPU.
_UUID = re.compile(r"^GPU-[0-9A-Fa-f][0-9A-Fa-f-]{0,35}$")
UUID_FIELD = ("uuid", "uuid", str)
SYNTAX = "wants comma-separated GPU indices (0 to %d) or GPU UUIDs (GPU-..., as nvidia-smi -L prints them)" % (
    MAX_GPUS - 1)


def parse(text: str):
    """['0', 'GPU-8f3a'] from '0, GPU-8f3a'; ValueError with what --gpus would say otherwise."""
    items = [v.strip() for v in str(text).split(",")]
    if len(items) > MAX_GPUS:
        raise ValueError("names %d GPUs; a box has at most %d" % (len(items), MAX_GPUS))
    out, seen = [], set()
    for v in items:
        if v.upper().startswith("MIG-"):
            raise ValueError("takes whole GPUs; a MIG device goes in --env CUDA_VISIBLE_DEVICES=%s" % v[:80])
        if _INDEX.match(v) and int(v) < MAX_GPUS:
            v = str(int(v))
        elif not _UUID.match(v):
            raise ValueError("%s, got %r" % (SYNTAX, str(text)[:80]))
        if v.lower() in seen:
            raise ValueError("names GPU %s twice" % v)
        seen.add(v.lower())
        out.append(v)
    return out


def names(entry, device):
    """Whether CUDA would take CUDA_VISIBLE_DEVICES entry `entry` for `device` (its index, or a
    start of its UUID)."""
    if entry.isdigit():
        return device.get("index") == int(entry)
    return entry.upper().startswith("GPU-") and str(device.get("uuid") or "").lower().startswith(entry.lower())


def find(entry, devices):
    """(the device `entry` names, None) or (None, why not)."""
    hits = [d for d in devices if names(entry, d)]
    if len(hits) == 1:
        return hits[0], None
    if hits:
        return None, "%s names %d GPUs (%s): give more of its UUID" % (entry, len(hits), _listed(hits))
    return None, "the box has no GPU %s" % entry


def _listed(devices):
    return ", ".join("%s %s" % (d.get("index"), d.get("uuid") or "?") for d in devices)


def as_indices(pins, devices):
    """A running job's --gpus with each entry the box can resolve written as its index ('GPU-8f3a,1'
    -> '0,1'), so that a reader that knows indices only (the fleet placement) sees UUID pins too."""
    out = []
    for entry in str(pins).split(","):
        found, _ = find(entry.strip(), devices)
        out.append(str(found["index"]) if found is not None else entry.strip())
    return ",".join(out)


def _finding(fid, severity, title, evidence, fix=None, gotcha=None) -> dict:
    return {"id": fid, "severity": severity, "title": title, "evidence": evidence, "fix": fix, "gotcha": gotcha}


def judge(asked, share, reading, running):
    """(indices of the GPUs `asked` names, findings) from the box's GPU `reading` ({present, error,
    devices}) and the `running` gpuops jobs ([(job id, its --gpus or None)]). Pure."""
    shown = ",".join(asked)
    devices = reading["devices"]
    if not reading["present"]:
        return [], [_finding("launch.gpus-absent", "fail", "--gpus %s: the box has no NVIDIA GPU (no nvidia-smi), "
                             "so the job would run on the CPU" % shown, {"asked": shown},
                             "leave out --gpus for a CPU job, or launch on a GPU box")]
    if not devices:
        return [], [_finding("launch.gpus-unchecked", "warn", "--gpus %s was not checked: the box's GPU list could "
                             "not be read (%s)" % (shown, reading["error"] or "no GPU listed"),
                             {"asked": shown, "error": reading["error"]},
                             "`gpuops preflight` shows why the box's GPU list could not be read")]
    out, picked = [], []
    for entry in asked:
        found, why = find(entry, devices)
        if found is None:
            out.append(_finding("launch.gpus-absent", "fail", why + "; it has " + _listed(devices),
                                {"asked": shown, "box_gpus": [d.get("index") for d in devices]},
                                "give one of its indices or UUIDs"))
        elif found in picked:
            out.append(_finding("launch.gpus-absent", "fail", "--gpus %s names GPU %s twice" % (shown, found["index"]),
                                {"asked": shown}, "name each GPU once"))
        else:
            picked.append(found)
    if out:
        return [], out
    mine = set(d["index"] for d in picked)
    for job_id, pins in running:
        if pins is None:
            out.append(_finding("launch.gpu-unpinned-job", "warn", "gpuops job %s runs without --gpus: it may be "
                                "using GPU %s too" % (job_id, ",".join(str(i) for i in sorted(mine))),
                                {"job": job_id}, gotcha="GEN7"))
            continue
        theirs = set(d["index"] for d in (find(e, devices)[0] for e in pins.split(",")) if d is not None)
        both = ",".join(str(i) for i in sorted(mine & theirs))
        if not both:
            continue
        if share:
            out.append(_finding("launch.gpu-shared", "warn", "GPU %s is shared with running gpuops job %s "
                                "(--share-gpu): the two runs split its memory and time" % (both, job_id),
                                {"job": job_id, "gpus": both}, gotcha="GEN7"))
        else:
            out.append(_finding("launch.gpu-pinned", "fail", "GPU %s is pinned by running gpuops job %s, and what "
                                "either run will allocate cannot be known at launch" % (both, job_id),
                                {"job": job_id, "gpus": both}, "pick another GPU, or add --share-gpu to run beside it",
                                gotcha="GEN7"))
    for d in picked:
        used, total = d.get("memory_used_mib"), d.get("memory_total_mib")
        if used is not None and total and used > MOSTLY_HELD * total:
            out.append(_finding("launch.gpu-memory", "warn", "GPU %s has %.1f of %.1f GiB in use before the job "
                                "starts: it may run out of GPU memory" % (d["index"], used / 1024.0, total / 1024.0),
                                {"gpu": d["index"], "memory_used_mib": used, "memory_total_mib": total},
                                "see what holds GPU %s with `gpuops reap` (it frees an idle holder), or launch on "
                                "another GPU" % d["index"],
                                gotcha="U10"))
    return [d["index"] for d in picked], out


def running_pins():
    """[(job id, its --gpus or None)] of the gpuops jobs alive now in this jobs directory."""
    from . import jobrecord
    from .jobrecord import EXIT, META

    out = []
    for job_id in jobrecord.all_ids():
        if os.path.exists(jobrecord.path(job_id, EXIT)):
            continue
        meta = jobrecord.read_json(jobrecord.path(job_id, META))
        if isinstance(meta, dict) and meta.get("pid") and jobrecord.liveness(meta) == "alive":
            out.append((job_id, meta["gpus"] if isinstance(meta.get("gpus"), str) and meta["gpus"] else None))
    return out


def read_gpus() -> dict:
    """{present, error, devices: [{index, uuid, name, memory_*_mib ...}]}: one nvidia-smi query.

    Not NVML: a job action runs under `python3 -S`, where pynvml is not importable (gpuops.onbox.
    NEEDS_SITE). A real nvidia-smi answers a CSV query in 0.02-0.04 s on an H200 (the GPU proof's
    timing, tests/fixtures/fakegpu/fake_nvidia_smi.py), under the jobs-dir lock."""
    from . import smi

    if shutil.which("nvidia-smi") is None:
        return {"present": False, "error": None, "devices": []}
    doc = smi.read_smi(apps=False, names=True, extra=(UUID_FIELD,))
    return {"present": True, "error": doc["error"], "devices": doc["devices"]}


def admit(spec) -> dict:
    """{gpus: [indices], findings: [warnings]} for a launch `spec` whose --gpus the box can give;
    JobError otherwise (usage: not a GPU list; refused: the box lacks one, or another job holds it)."""
    from .jobrecord import JobError

    try:
        asked = parse(spec["gpus"])
    except ValueError as e:
        raise JobError("usage", "--gpus %s" % e)
    indices, findings = judge(asked, bool(spec.get("share_gpu")), read_gpus(), running_pins())
    failed = [f["title"] + (": " + f["fix"] if f["fix"] else "") for f in findings if f["severity"] == "fail"]
    if failed:
        raise JobError("refused", "; ".join(failed) + "; nothing was started")
    return {"gpus": indices, "findings": findings}
