"""Light GPU readings, taken again and again: utilisation and memory per GPU (and, when asked, the
compute processes or more fields of the full probe), for reap's idle window, the fleet view's
samples and a run's telemetry.

Through NVML when the box's pynvml works (no process per reading), else one nvidia-smi CSV query
per reading. The document is gpuops.onbox.gpu's, cut to the keys these readers need.
"""

import time

from . import gpu, runcmd, sysroot

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
    doc["devices"] = gpu.parse_csv(r["out"], fields)
    for d in doc["devices"]:
        d["minor"] = gpu.minor_of(d.get("bus_id"))
    if not apps:
        return doc
    a = runcmd.run(["nvidia-smi", "--query-compute-apps=" + ",".join(f for f, _, _ in gpu.APP_FIELDS),
                    "--format=csv,noheader,nounits"], TIMEOUT_S)
    if a["error"] is None and a["rc"] == 0:
        doc["processes"] = gpu.parse_csv(a["out"], gpu.APP_FIELDS)
    else:
        doc["error"] = "nvidia-smi --query-compute-apps: %s" % (a["error"] or a["err"].strip()[:200])
    return doc


class Reader(object):
    """Repeated light readings through NVML when pynvml works here, else nvidia-smi. The source is
    chosen on the first reading and kept, so the samples of one window compare."""

    def __init__(self):
        self.nvml = None
        if sysroot.overlay_active():
            return  # fixture device nodes: the GPU answers come from the nvidia-smi on PATH
        try:
            import pynvml
            doc, _ = gpu.from_nvml(pynvml)
            if doc is not None and not doc.get("error"):
                self.nvml = pynvml
        except Exception:  # absent or broken here: nvidia-smi may still answer
            self.nvml = None

    def read(self, apps=True, names=False, extra=()):
        """{source, error, devices: [{index, minor, bus_id, util_pct, memory_*_mib (, name, the
        keys of `extra`)}], processes}."""
        if self.nvml is not None:
            doc, err = gpu.from_nvml(self.nvml)
            if doc is None:
                return {"source": "nvml", "error": err, "devices": [], "processes": []}
            keys = KEYS + (("name",) if names else ()) + tuple(k for _, k, _ in extra)
            doc["devices"] = [dict((k, d.get(k)) for k in keys) for d in doc["devices"]]
            return doc
        return read_smi(apps, names, extra)


def sample(reader, window_s, interval_s=1.0, names=False, apps=False):
    """(first reading, {index: peak util or None}, samples) over `window_s` seconds; with `names`
    the first reading also holds each GPU's name (asked in the same query, not one more), with
    `apps` its compute processes.

    A GPU whose utilisation could not be read in any sample gets None: it is not provably idle.
    """
    first = reader.read(apps=apps, names=names)
    peak = dict((d["index"], d.get("util_pct")) for d in first["devices"])
    samples = 1
    deadline = time.time() + max(0.0, window_s)
    while time.time() < deadline:
        time.sleep(max(0.0, min(interval_s, deadline - time.time())))
        again = reader.read(apps=False)
        samples += 1
        seen = dict((d["index"], d.get("util_pct")) for d in again["devices"])
        for index in list(peak):
            now, before = seen.get(index), peak[index]
            peak[index] = None if now is None or before is None else max(now, before)
    return first, peak, samples


def settle_memory(reader, timeout_s, poll_s=0.5):
    """Per-GPU used memory once it stops falling (the driver frees a context after its last fd
    closes)."""
    deadline = time.time() + timeout_s
    last = None
    while True:
        now = dict((d["index"], d.get("memory_used_mib")) for d in reader.read(apps=False)["devices"])
        if now == last or time.time() >= deadline:
            return now
        last = now
        time.sleep(poll_s)
