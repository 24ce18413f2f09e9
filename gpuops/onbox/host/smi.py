"""nvidia-smi's CSV answers, read without NVML: the queries and the parsing that gpuops.onbox.host.gpu (the
probe) and gpuops.onbox.host.gpu_light (readings taken again and again) share. Stdlib only and no
pynvml, so an entry that runs under `python3 -S` (every job action; gpuops.onbox.NEEDS_SITE) may
read the GPUs here: the launch's check of --gpus (gpuops.onbox.host.gpu_pins) does.
"""

import csv
import re

from . import busid, runcmd, sysroot

APP_FIELDS = [("pid", "pid", int), ("process_name", "name", str), ("used_gpu_memory", "used_mib", float),
              ("gpu_bus_id", "bus_id", str)]
FIELDS = [
    ("index", "index", int),
    ("pci.bus_id", "bus_id", str),
    ("utilization.gpu", "util_pct", float),
    ("memory.used", "memory_used_mib", float),
    ("memory.total", "memory_total_mib", float),
]
# No CSV field gives the minor number ("minor_number" is refused by a real nvidia-smi): it comes from
# the driver's /proc entry of each GPU, as in the full probe.
KEYS = tuple(k for _, k, _ in FIELDS) + ("minor",)
TIMEOUT_S = 10
NAME_FIELD = ("name", "name", str)


def value(raw, kind):
    """One CSV cell; '[N/A]', '[Not Supported]', 'N/A' and the like become None."""
    raw = raw.strip()
    if not raw or raw.startswith("[") or raw in ("N/A", "Unknown Error"):
        return None
    try:
        if kind == "hex":
            return int(raw, 16)
        if kind == "yesno":
            return raw.lower() in ("yes", "1", "true", "active", "enabled")
        if kind is int:
            return int(float(raw))
        return kind(raw)
    except ValueError:
        return None


def parse_csv(text: str, fields):
    rows = []
    for cells in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(cells) != len(fields):
            continue  # a warning line or a truncated row: not data
        rows.append(dict((key, value(cell, kind)) for (_, key, kind), cell in zip(fields, cells)))
    return rows


def minor_of(bus_id):
    """The /dev/nvidia<minor> of a GPU, from the driver's /proc entry (the probe's CSV query has
    no such field)."""
    name = busid.proc_name(bus_id)
    if name is None:
        return None
    text = sysroot.read("/proc/driver/nvidia/gpus/%s/information" % name) or ""
    m = re.search(r"^Device Minor:\s*(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def read_smi(apps=True, names=False, extra=()):
    """Utilisation and memory per GPU from nvidia-smi; `names` adds each GPU's name to the same
    query, `extra` more (field, key, kind) triples of gpu.CORE_FIELDS, `apps` the compute-process
    list (one more nvidia-smi run)."""
    fields = FIELDS + ([NAME_FIELD] if names else []) + list(extra)
    query = ",".join(f for f, _, _ in fields)
    r = runcmd.run(["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader,nounits"], TIMEOUT_S)
    doc = {"source": "nvidia-smi", "error": None, "devices": [], "processes": []}
    if r["error"] or r["rc"] != 0:
        why = r["error"] or ((r["err"] or r["out"]).strip() or "exit %s" % r["rc"]).splitlines()[-1]
        doc["error"] = "nvidia-smi --query-gpu: %s" % why[:300]
        return doc
    doc["devices"] = parse_csv(r["out"], fields)
    for d in doc["devices"]:
        d["minor"] = minor_of(d.get("bus_id"))
    if not apps:
        return doc
    a = runcmd.run(["nvidia-smi", "--query-compute-apps=" + ",".join(f for f, _, _ in APP_FIELDS),
                    "--format=csv,noheader,nounits"], TIMEOUT_S)
    if a["error"] is None and a["rc"] == 0:
        doc["processes"] = parse_csv(a["out"], APP_FIELDS)
    else:
        doc["error"] = "nvidia-smi --query-compute-apps: %s" % (a["error"] or a["err"].strip()[:200])
    return doc
