"""Light GPU readings, taken again and again: utilisation and memory per GPU (and, when asked, the
compute processes or more fields of the full probe), for reap's idle window, the fleet view's
samples and a run's telemetry.

Through NVML when the box's pynvml works (no process per reading), else one nvidia-smi CSV query
per reading. The document is gpuops.onbox.host.gpu's, cut to the keys these readers need.
"""

import time

from . import gpu, sysroot
from .smi import KEYS, read_smi


class Reader(object):
    """Repeated light readings through NVML when pynvml works here, else nvidia-smi. The source is
    chosen on the first reading and kept, so the samples of one window compare."""

    def __init__(self) -> None:
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


def sample(reader, window_s, interval_s=1.0, names=False, apps=False, extra=()):
    """(first reading, {index: peak util or None}, samples) over `window_s` seconds; with `names`
    the first reading also holds each GPU's name (asked in the same query, not one more, as are
    the fields of `extra`), with `apps` its compute processes.

    A GPU whose utilisation could not be read in any sample gets None: it is not provably idle.
    """
    first = reader.read(apps=apps, names=names, extra=extra)
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
