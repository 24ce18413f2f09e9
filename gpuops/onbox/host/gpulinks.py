"""How the GPUs are attached: PCIe link per GPU, the peer-to-peer matrix, NVLink, NUMA placement,
persistence, MIG and fabric state. Read in the probe's one round trip, without root, side by side
with its other nvidia-smi queries (start now, finish after the /proc reads).

    {"devices": [{index, bus_id, gen_current, gen_max, gen_gpumax, gen_hostmax, width_current,
                  width_max, pstate, util_pct, persistence, mig_current, mig_pending, fabric_state,
                  fabric_status, numa_node, local_cpus}],
     "p2p_read": {"0-1": "OK"|"NS"|"CNS"|...}, "nvlink": {"0": {"active", "inactive", "gbps"}},
     "allowed_cpus": "0-15", "numa_nodes": int, "error": str, "notes": [str]}

Every field asked is one `nvidia-smi --help-query-gpu` lists on driver 580; a driver that rejects
one of the newer ones (gpucurrent, gpumax, hostmax, fabric.*) is asked for the older set.
nvidia-smi documents that the current generation and width "may be reduced when the GPU is not
in use", so pstate and utilisation travel with them: the checks judge a downshift against load.
The NUMA node and local CPUs come from sysfs (/sys/bus/pci/devices/<address>/), the CPUs this
process may run on from its affinity (what the cgroup's cpuset allows).
"""

import os
import re

from . import busid, runcmd, sysroot
from .smi import parse_csv

TIMEOUT_S = 15
MAX_GPUS = 64
# (csv field, key, kind)
NEW_FIELDS = [
    ("index", "index", int), ("pci.bus_id", "bus_id", str),
    ("pcie.link.gen.gpucurrent", "gen_current", int), ("pcie.link.gen.max", "gen_max", int),
    ("pcie.link.gen.gpumax", "gen_gpumax", int), ("pcie.link.gen.hostmax", "gen_hostmax", int),
    ("pcie.link.width.current", "width_current", int), ("pcie.link.width.max", "width_max", int),
    ("pstate", "pstate", str), ("utilization.gpu", "util_pct", float), ("persistence_mode", "persistence", str),
    ("mig.mode.current", "mig_current", str), ("mig.mode.pending", "mig_pending", str),
    ("fabric.state", "fabric_state", str), ("fabric.status", "fabric_status", str),
]
# What an older driver is asked instead: none of the newer fields, and the current generation by the
# name --help-query-gpu now calls deprecated.
_NEWER = ("pcie.link.gen.gpumax", "pcie.link.gen.hostmax", "fabric.state", "fabric.status")
OLD_FIELDS = [("pcie.link.gen.current", "gen_current", int) if f == "pcie.link.gen.gpucurrent" else (f, k, t)
              for f, k, t in NEW_FIELDS if f not in _NEWER]
KEYS = [k for _, k, _ in NEW_FIELDS] + ["numa_node", "local_cpus"]
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
P2P_WORDS = ("X", "OK", "CNS", "GNS", "TNS", "NS", "U")


def query(fields) -> list:
    return ["nvidia-smi", "--query-gpu=" + ",".join(f for f, _, _ in fields), "--format=csv,noheader,nounits"]


def start() -> dict:
    return {"csv": runcmd.start(query(NEW_FIELDS), TIMEOUT_S),
            "p2p": runcmd.start(["nvidia-smi", "topo", "-p2p", "r"], TIMEOUT_S),
            "nvlink": runcmd.start(["nvidia-smi", "nvlink", "-s"], TIMEOUT_S)}


def parse_p2p(text: str):
    """{"i-j": status} (i < j) from `nvidia-smi topo -p2p r`: a header of GPU names, then one row
    per GPU; the legend below the matrix is not data."""
    header, out = None, {}
    for line in text.splitlines()[:200]:
        words = _ESCAPE.sub("", line).split()  # driver 580 underlines the header even into a pipe
        if not words:
            continue
        if header is None:
            if all(re.match(r"GPU\d+$", w) for w in words):
                header = [int(w[3:]) for w in words]
            continue
        m = re.match(r"GPU(\d+)$", words[0])
        if not m or len(words) != len(header) + 1:
            break  # the legend
        row = int(m.group(1))
        for col, cell in zip(header, words[1:]):
            if row < col and cell in P2P_WORDS:
                out["%d-%d" % (row, col)] = cell
    return out


def parse_nvlink(text: str):
    """{"<gpu index>": {"active": n, "inactive": n, "gbps": per-link speed or None}} from
    `nvidia-smi nvlink -s`: a "GPU i: name (UUID: ...)" line, then a "Link n: ..." line per link,
    its speed ("26.562 GB/s") or "<inactive>"."""
    out, gpu = {}, None
    for line in text.splitlines()[:4000]:
        m = re.match(r"GPU (\d+):", line)
        if m:
            gpu = out.setdefault(m.group(1), {"active": 0, "inactive": 0, "gbps": None})
            continue
        m = re.match(r"\s*Link (\d+):\s*(.*)$", line)
        if gpu is None or not m:
            continue
        speed = re.match(r"([0-9.]+)\s*GB/s", m.group(2))
        if speed:
            gpu["active"] += 1
            gpu["gbps"] = gpu["gbps"] or float(speed.group(1))
        elif "inactive" in m.group(2).lower():
            gpu["inactive"] += 1
    return out


def cpulist(cpus):
    """'0-3,8' for {0, 1, 2, 3, 8}."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(_span(run))
        run = [c]
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run):
    return "%d-%d" % (run[0], run[-1]) if len(run) > 1 else str(run[0])


def _sysfs(bus_id):
    name = busid.proc_name(bus_id)
    if name is None:
        return None, None
    base = "/sys/bus/pci/devices/%s/" % name
    node = (sysroot.read(base + "numa_node") or "").strip()
    cpus = (sysroot.read(base + "local_cpulist") or "").strip()
    return (int(node) if re.match(r"-?\d+$", node) else None), (cpus[:200] or None)


def _allowed():
    try:
        return cpulist(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def finish(started):
    doc = {"devices": [], "p2p_read": {}, "nvlink": {}, "allowed_cpus": _allowed(), "error": None, "notes": [],
           "numa_nodes": len([n for n in sysroot.listdir("/sys/devices/system/node") if re.match(r"node\d+$", n)])}
    r = runcmd.finish(started["csv"])
    fields = NEW_FIELDS
    if r["rc"] not in (0, None) and "field" in (r["err"] + r["out"]).lower():
        doc["notes"].append("driver rejected the newer link fields; asked for the older set")
        fields = OLD_FIELDS
        r = runcmd.run(query(fields), TIMEOUT_S)
    if r["error"] or r["rc"] != 0:
        doc["error"] = "nvidia-smi link query: %s" % (r["error"] or (r["err"] or r["out"]).strip()[:200])
    for row in parse_csv(r["out"], fields)[:MAX_GPUS] if r["error"] is None else []:
        for key in KEYS:
            row.setdefault(key, None)
        row["numa_node"], row["local_cpus"] = _sysfs(row["bus_id"])
        doc["devices"].append(row)
    p = runcmd.finish(started["p2p"])
    if p["error"] is None and p["rc"] == 0:
        doc["p2p_read"] = parse_p2p(p["out"])
    else:
        doc["notes"].append("nvidia-smi topo -p2p r: %s" % (p["error"] or (p["err"] or p["out"]).strip()[:200]))
    n = runcmd.finish(started["nvlink"])
    if n["error"] is None and n["rc"] == 0:
        doc["nvlink"] = parse_nvlink(n["out"])
    else:
        doc["notes"].append("nvidia-smi nvlink -s: %s" % (n["error"] or (n["err"] or n["out"]).strip()[:200]))
    return doc
