"""GPU facts: through NVML when the box's python3 can import pynvml, else through nvidia-smi.

Both paths produce the same document so the checks need not care which one ran:

    {source: "nvml"|"nvidia-smi"|null, driver, cuda_max, error, devices: [...], processes: [...]}

    device: index, uuid, name, bus_id, minor, compute_cap, memory_total_mib, memory_used_mib,
            util_pct, temp_c, slowdown_temp_c, sm_clock_mhz, sm_clock_max_mhz, power_w,
            power_limit_w, throttle_mask, ecc_dbe_volatile, retired_pages_dbe,
            retired_pages_pending, remap_failure, remap_pending, unavailable {what: why}
    process: pid, name, used_mib, bus_id

NVML: every call goes through one choke point (`_Nvml.call`) that turns a function missing from
this pynvml/driver pair, or any NVMLError, into None plus a note, so an old driver, an
unsupported field or one GPU that fell off the bus degrades that value or that GPU, never the
probe. nvidia-smi: machine-readable CSV queries only, each under a timeout; a driver that rejects
an optional field is asked again for the core set. The slowdown temperature and the driver's CUDA
version have no CSV field, so they come from a bounded parse of `nvidia-smi -q -d TEMPERATURE`.

Checked against a real driver (580.159.04 on an H200; benchmarks/results/gpu-proof-*.md): every CSV
field asked here is one `nvidia-smi --help-query-gpu` lists, memory in use excludes the driver's
reserved memory on both paths, and a driver that reports temperatures as T.Limit offsets still
gives the slowdown point.
"""

import os
import re

from . import busid, runcmd, sysroot
from .smi import APP_FIELDS, minor_of, parse_csv

SMI_TIMEOUT_S = 15

# (csv field, document key, kind); the first block is understood by every driver we support.
CORE_FIELDS = [
    ("index", "index", int),
    ("uuid", "uuid", str),
    ("name", "name", str),
    ("pci.bus_id", "bus_id", str),
    ("driver_version", "driver", str),
    ("memory.total", "memory_total_mib", float),
    ("memory.used", "memory_used_mib", float),
    ("utilization.gpu", "util_pct", float),
    ("temperature.gpu", "temp_c", float),
    ("clocks.sm", "sm_clock_mhz", float),
    ("clocks.max.sm", "sm_clock_max_mhz", float),
    ("power.draw", "power_w", float),
    ("power.limit", "power_limit_w", float),
    ("clocks_throttle_reasons.active", "throttle_mask", "hex"),
    ("ecc.errors.uncorrected.volatile.total", "ecc_dbe_volatile", int),
]
OPTIONAL_FIELDS = [
    ("compute_cap", "compute_cap", str),
    ("retired_pages.double_bit.count", "retired_pages_dbe", int),
    ("retired_pages.pending", "retired_pages_pending", "yesno"),
    ("remapped_rows.failure", "remap_failure", "yesno"),
    ("remapped_rows.pending", "remap_pending", "yesno"),
]

DEVICE_KEYS = [k for _, k, _ in CORE_FIELDS + OPTIONAL_FIELDS if k != "driver"] + ["minor", "slowdown_temp_c"]


def _field_rejected(result) -> bool:
    return result["rc"] not in (0, None) and "field" in (result["err"] + result["out"]).lower()


_TEMP_LINE = re.compile(r"(GPU Current Temp|GPU Slowdown Temp|GPU T\.Limit Temp|GPU Slowdown T\.Limit Temp)"
                        r"\s*:\s*(-?\d+)\s*C$")


def slowdown_point(temps):
    """The slowdown temperature in C from one GPU's temperature lines, or None.

    Older drivers print it ("GPU Slowdown Temp : 89 C"). Drivers that report T.Limit (580 on Hopper)
    print instead how far the GPU is below its T.Limit and where slowdown sits against that limit
    ("GPU Current Temp : 38 C", "GPU T.Limit Temp : 49 C", "GPU Slowdown T.Limit Temp : -2 C"), so the
    point is 38 + 49 - (-2) = 89 C, which is what NVML's slowdown threshold says on the same GPU.
    """
    if "GPU Slowdown Temp" in temps:
        return temps["GPU Slowdown Temp"]
    parts = [temps.get(k) for k in ("GPU Current Temp", "GPU T.Limit Temp", "GPU Slowdown T.Limit Temp")]
    if any(v is None for v in parts):
        return None
    return parts[0] + parts[1] - parts[2]


def parse_temperature_report(text: str):
    """(cuda_version, {bus key: slowdown_c}) from `nvidia-smi -q -d TEMPERATURE`."""
    cuda, slow, bus, temps = None, {}, None, {}

    def close() -> None:
        point = slowdown_point(temps) if bus else None
        if point is not None:
            slow[bus] = point

    for line in text.splitlines()[:2000]:
        stripped = line.strip()
        m = re.match(r"CUDA Version\s*:\s*([0-9.]+)", stripped)
        if m:
            cuda = m.group(1)
            continue
        m = re.match(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$", stripped)
        if m:
            close()
            bus, temps = busid.key(m.group(1)), {}
            continue
        m = _TEMP_LINE.match(stripped)
        if m:
            temps[m.group(1)] = float(m.group(2))
    close()
    return cuda, slow


def driver_gpus():
    """[{bus_id, minor, node}] for every GPU the driver has here: /proc/driver/nvidia/gpus/<bus id>/,
    and whether its /dev/nvidia<minor> exists. A container gets only its own GPUs' entries and
    nodes, so this is the list nvidia-smi should match; a GPU on it that nvidia-smi no longer lists
    is lost, not another tenant's."""
    out = []
    for name in sysroot.listdir("/proc/driver/nvidia/gpus"):
        if busid.key(name) is None:
            continue
        minor = minor_of(name)
        node = os.path.exists(sysroot.path("/dev/nvidia%d" % minor)) if minor is not None else None
        out.append({"bus_id": name, "minor": minor, "node": node})
    return out


def start_smi() -> dict:
    """Start the nvidia-smi queries side by side; returns what `finish_smi` needs."""
    gpu_query = ",".join(f for f, _, _ in CORE_FIELDS + OPTIONAL_FIELDS)
    return {
        "gpus": runcmd.start(["nvidia-smi", "--query-gpu=" + gpu_query, "--format=csv,noheader,nounits"], SMI_TIMEOUT_S),
        "apps": runcmd.start(["nvidia-smi", "--query-compute-apps=" + ",".join(f for f, _, _ in APP_FIELDS),
                              "--format=csv,noheader,nounits"], SMI_TIMEOUT_S),
        "temps": runcmd.start(["nvidia-smi", "-q", "-d", "TEMPERATURE"], SMI_TIMEOUT_S),
    }


def finish_smi(started):
    doc = {"source": "nvidia-smi", "driver": None, "cuda_max": None, "error": None, "devices": [],
           "processes": [], "notes": []}
    r = runcmd.finish(started["gpus"])
    fields = CORE_FIELDS + OPTIONAL_FIELDS
    if _field_rejected(r):
        doc["notes"].append("driver rejected an optional field; asked for the core set only")
        fields = CORE_FIELDS
        r = runcmd.run(["nvidia-smi", "--query-gpu=" + ",".join(f for f, _, _ in fields),
                        "--format=csv,noheader,nounits"], SMI_TIMEOUT_S)
    rows = parse_csv(r["out"], fields) if r["error"] is None else []
    if r["error"] or (r["rc"] != 0 and not rows):
        why = r["error"] or (r["err"].strip() or r["out"].strip() or "exit %s" % r["rc"]).splitlines()[-1]
        doc["error"] = "nvidia-smi --query-gpu: %s" % why[:300]
        if r["error"] == "not found on PATH":
            doc["source"] = None
    elif r["rc"] != 0:
        # A GPU that is lost is reported in stdout between the rows of the GPUs still answering.
        said = r["err"].strip() or " ".join(l.strip() for l in r["out"].splitlines() if l.strip() and "," not in l)
        doc["notes"].append("nvidia-smi exited %s: %s" % (r["rc"], said[:200]))
    cuda, slowdown = None, {}
    t = runcmd.finish(started["temps"])
    if t["error"] is None and t["rc"] == 0:
        cuda, slowdown = parse_temperature_report(t["out"])
    for row in rows:
        doc["driver"] = doc["driver"] or row.pop("driver", None)
        row.pop("driver", None)
        row["minor"] = minor_of(row.get("bus_id"))
        row["slowdown_temp_c"] = slowdown.get(busid.key(row.get("bus_id")))
        for key in DEVICE_KEYS:
            row.setdefault(key, None)
        row["unavailable"] = {}
        doc["devices"].append(row)
    doc["cuda_max"] = cuda
    a = runcmd.finish(started["apps"])
    if a["error"] is None and a["rc"] == 0:
        doc["processes"] = parse_csv(a["out"], APP_FIELDS)
    elif doc["error"] is None:
        doc["notes"].append("nvidia-smi --query-compute-apps: %s" % (a["error"] or a["err"].strip()[:200]))
    return doc


class _Nvml(object):
    """The choke point: every NVML call goes through `call`, which never raises."""

    def __init__(self, nv) -> None:
        self.nv = nv

    def call(self, notes, name: str, *args):
        fn = getattr(self.nv, name, None)
        if fn is None:
            notes[name] = "not in this pynvml"
            return None
        try:
            return fn(*args)
        except Exception as e:  # NVMLError and its subclasses, ctypes trouble in an odd build
            notes[name] = str(e) or type(e).__name__
            return None

    def const(self, name: str, default):
        return getattr(self.nv, name, default)


def _text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def _nvml_device(n, h, index):
    notes = {}
    d = {"index": index, "unavailable": notes}
    d["name"] = _text(n.call(notes, "nvmlDeviceGetName", h))
    d["uuid"] = _text(n.call(notes, "nvmlDeviceGetUUID", h))
    pci = n.call(notes, "nvmlDeviceGetPciInfo", h)
    d["bus_id"] = _text(getattr(pci, "busId", None)) if pci is not None else None
    d["minor"] = n.call(notes, "nvmlDeviceGetMinorNumber", h)
    cap = n.call(notes, "nvmlDeviceGetCudaComputeCapability", h)
    d["compute_cap"] = "%d.%d" % tuple(cap) if cap else None
    # Version 2 counts the driver's reserved memory apart from what is used, as nvidia-smi does; the
    # first version counts it as used (616 MiB on an idle H200), which no process can free.
    mem = n.call({}, "nvmlDeviceGetMemoryInfo", h, n.const("nvmlMemory_v2", None)) if n.const(
        "nvmlMemory_v2", None) is not None else None
    if mem is None:
        mem = n.call(notes, "nvmlDeviceGetMemoryInfo", h)
    d["memory_total_mib"] = mem.total / 1048576.0 if mem is not None else None
    d["memory_used_mib"] = mem.used / 1048576.0 if mem is not None else None
    util = n.call(notes, "nvmlDeviceGetUtilizationRates", h)
    d["util_pct"] = float(util.gpu) if util is not None else None
    d["temp_c"] = n.call(notes, "nvmlDeviceGetTemperature", h, n.const("NVML_TEMPERATURE_GPU", 0))
    d["slowdown_temp_c"] = n.call(notes, "nvmlDeviceGetTemperatureThreshold", h,
                                  n.const("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1))
    clock = n.const("NVML_CLOCK_SM", 1)
    d["sm_clock_mhz"] = n.call(notes, "nvmlDeviceGetClockInfo", h, clock)
    d["sm_clock_max_mhz"] = n.call(notes, "nvmlDeviceGetMaxClockInfo", h, clock)
    power = n.call(notes, "nvmlDeviceGetPowerUsage", h)
    limit = n.call(notes, "nvmlDeviceGetEnforcedPowerLimit", h)
    d["power_w"] = power / 1000.0 if power is not None else None
    d["power_limit_w"] = limit / 1000.0 if limit is not None else None
    # The event-reasons name replaced the throttle-reasons one; older pynvml has only the latter.
    reasons = n.call({}, "nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None:
        reasons = n.call(notes, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    d["throttle_mask"] = reasons
    d["ecc_dbe_volatile"] = n.call(notes, "nvmlDeviceGetTotalEccErrors", h,
                                   n.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), n.const("NVML_VOLATILE_ECC", 0))
    pages = n.call(notes, "nvmlDeviceGetRetiredPages", h, n.const("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1))
    d["retired_pages_dbe"] = len(pages) if pages is not None else None
    pending = n.call(notes, "nvmlDeviceGetRetiredPagesPendingStatus", h)
    d["retired_pages_pending"] = bool(pending) if pending is not None else None
    remap = n.call(notes, "nvmlDeviceGetRemappedRows", h)
    d["remap_pending"] = bool(remap[2]) if remap else None
    d["remap_failure"] = bool(remap[3]) if remap else None
    procs = n.call(notes, "nvmlDeviceGetComputeRunningProcesses", h) or []
    apps = []
    for p in procs:
        used = getattr(p, "usedGpuMemory", None)
        apps.append({"pid": getattr(p, "pid", None), "name": None, "bus_id": d["bus_id"],
                     "used_mib": used / 1048576.0 if used is not None else None})
    return d, apps


def from_nvml(nv):
    """The GPU document from a pynvml-like module, or None when NVML cannot be initialised."""
    n = _Nvml(nv)
    notes = {}
    n.call(notes, "nvmlInit")
    if notes:
        return None, notes.get("nvmlInit")
    try:
        doc = {"source": "nvml", "error": None, "devices": [], "processes": [], "notes": []}
        doc["driver"] = _text(n.call(notes, "nvmlSystemGetDriverVersion"))
        cuda = n.call(notes, "nvmlSystemGetCudaDriverVersion")
        doc["cuda_max"] = "%d.%d" % (cuda // 1000, (cuda % 1000) // 10) if cuda else None
        count = n.call(notes, "nvmlDeviceGetCount")
        if count is None:
            doc["error"] = "nvmlDeviceGetCount: %s" % notes.get("nvmlDeviceGetCount")
        for i in range(count or 0):
            hnotes = {}
            h = n.call(hnotes, "nvmlDeviceGetHandleByIndex", i)
            if h is None:
                dev = dict((k, None) for k in DEVICE_KEYS)
                dev.update({"index": i, "unavailable": hnotes})
                doc["devices"].append(dev)
                continue
            dev, apps = _nvml_device(n, h, i)
            doc["devices"].append(dev)
            doc["processes"].extend(apps)
        doc["notes"] = ["%s: %s" % kv for kv in sorted(notes.items())]
        return doc, None
    finally:
        n.call({}, "nvmlShutdown")


def begin() -> dict:
    """Ask NVML now, or start the nvidia-smi queries and let them run while the probe reads /proc.

    Under the GPUOPS_ROOT seam the GPU is whatever nvidia-smi on PATH says (tests put a fake one
    first), so NVML is not asked: on a machine with a real GPU it would answer for the real one.
    """
    if sysroot.overlay_active():
        return {"smi": start_smi(), "nvml": "not asked: GPUOPS_ROOT overlay is active"}
    try:
        import pynvml
    except Exception as e:  # absent, or broken on this box: nvidia-smi may still work
        return {"smi": start_smi(), "nvml": "pynvml not importable: %s" % (type(e).__name__,)}
    doc, nvml_error = from_nvml(pynvml)
    if doc is not None:
        return {"doc": doc}
    return {"smi": start_smi(), "nvml": nvml_error}


def end(state):
    """The GPU document from what `begin` started."""
    if "doc" in state:
        return state["doc"]
    doc = finish_smi(state["smi"])
    doc["nvml"] = state["nvml"]
    return doc
