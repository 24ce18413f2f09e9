"""Link and topology verdicts: is each GPU's PCIe link as wide and fast as the GPU and its slot allow,
can the GPUs reach each other (P2P, NVLink), are they near the CPUs this container may use, and is
the fabric up where the GPUs need one. Facts from gpuops.onbox.host.gpulinks.

A link's generation drops when the GPU idles (nvidia-smi: "may be reduced when the GPU is not in
use"), so a lower generation on an idle GPU is a note, and `preflight --qualify` reads it again
under load. A narrower link is not power saving: NVIDIA GPUs keep their lanes when idle, so fewer
lanes than the link's maximum is a riser or a half-populated slot, and fails whatever the load.
"""

from ..findings import Finding

# GB/s per lane and direction after line coding: gen 1-2 8b/10b, gen 3-5 128b/130b, gen 6 FLIT
# (PCI-SIG: 2.5, 5, 8, 16, 32, 64 GT/s).
GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# P-states at or below this number with work on the GPU: the link is trained for load.
LOADED_PSTATE = 2
# -q has no PCIE display section to ask for alone (driver 580 refuses `-d PCIE`): grep its link block.
RERENT_LINK = ("nvidia-smi -q | grep -A9 'GPU Link Info'   # a narrowed or slowed link is the slot, riser or board: "
               "a tenant cannot re-seat it; re-rent")
P2P_MEANING = {"NS": "not supported", "CNS": "chipset not supported", "GNS": "GPU not supported",
               "TNS": "topology not supported", "U": "unknown"}


def pcie_gbps(gen, width: int):
    """Per-direction PCIe bandwidth in GB/s of a gen x width link, or None."""
    if not gen or not width or gen not in GBPS_PER_LANE:
        return None
    return round(GBPS_PER_LANE[gen] * width, 1)


def _links(facts):
    return (facts.get("links") or {}).get("devices") or []


def _idle(d) -> bool:
    p = d.get("pstate") or ""
    loaded = p[1:].isdigit() and int(p[1:]) <= LOADED_PSTATE and (d.get("util_pct") or 0) > 0
    return not loaded


def _label(d):
    return f"GPU {d.get('index')}" + (f" ({d['bus_id']})" if d.get("bus_id") else "")


def best_gen(d):
    """The generation this GPU in this slot can reach: the driver's max for the pair, else the lower
    of the GPU's and the host port's."""
    known = [g for g in (d.get("gen_gpumax"), d.get("gen_hostmax")) if g]
    return d.get("gen_max") or (min(known) if known else None)


def pcie(facts, t):
    out, judged = [], 0
    for d in _links(facts):
        gen, width, wmax, top = d.get("gen_current"), d.get("width_current"), d.get("width_max"), best_gen(d)
        if not gen or not width or not top or not wmax:
            continue
        judged += 1
        now, possible = pcie_gbps(gen, width), pcie_gbps(top, wmax)
        evidence = {"gpu": d.get("index"), "bus_id": d.get("bus_id"), "gen": gen, "gen_max": top, "gen_gpumax": d.get("gen_gpumax"),
                    "gen_hostmax": d.get("gen_hostmax"), "width": width, "width_max": wmax,
                    "pstate": d.get("pstate"), "util_pct": d.get("util_pct"), "gbps_now": now, "gbps_possible": possible}
        idle = _idle(d)
        if width < wmax or (gen < top and not idle):
            evidence["under_load"] = not idle
            out.append(Finding("gpu.pcie", "fail", f"GPU {d.get('index')} on a x{width} gen {gen} link of x{wmax} "
                               f"gen {top}: copies {now:g} of {possible:g} GB/s", evidence, RERENT_LINK))
            continue
        gpumax = d.get("gen_gpumax")
        if gpumax and top < gpumax:
            out.append(Finding("gpu.pcie", "warn",
                               f"{_label(d)} is a gen {gpumax} GPU in a gen {top} slot: host<->GPU copies at most "
                               f"{possible:g} of {pcie_gbps(gpumax, wmax):g} GB/s",
                               evidence, "gpuops preflight --qualify   # measures what the slot costs; the slot is "
                                         "the host's: if it matters, re-rent"))
        elif gen < top:
            out.append(Finding("gpu.pcie", "info",
                               f"{_label(d)} link at gen {gen} of {top} while idle ({d.get('pstate') or 'P?'}): "
                               "links downshift when idle",
                               evidence, "gpuops preflight --qualify   # reads the link again under load"))
    if judged and not any(f.severity != "info" for f in out):
        out.append(Finding("gpu.pcie", "ok", f"PCIe links at full width on {judged} GPU(s)", {"gpus": judged}))
    return out


def p2p(facts, t):
    matrix = (facts.get("links") or {}).get("p2p_read") or {}
    if not matrix:
        return []
    bad = {pair: s for pair, s in matrix.items() if s != "OK"}
    if not bad:
        return [Finding("gpu.p2p", "ok", f"peer-to-peer reads work between all {len(matrix)} GPU pair(s)",
                        {"pairs": len(matrix)})]
    shown = ", ".join(f"{p.replace('-', '<->')} {s}" for p, s in sorted(bad.items())[:8])
    words = sorted({P2P_MEANING.get(s, s) for s in bad.values()})
    return [Finding("gpu.p2p", "warn",
                    f"no P2P on {len(bad)} of {len(matrix)} GPU pairs ({', '.join(sorted(set(bad.values())))}): "
                    "NCCL uses host memory",
                    {"pairs": shown, "meaning": ", ".join(words), "matrix": "nvidia-smi topo -p2p r"},
                    "nvidia-smi topo -p2p r   # the driver or board disables P2P; NCCL falls back to host memory "
                    "(NCCL_P2P_DISABLE shows the cost): for multi-GPU jobs, re-rent")]


def parse_cpulist(text):
    """{0, 1, 2, 3, 8} for '0-3,8'; an empty set for None or junk."""
    out = set()
    for part in (text or "").split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.update(range(int(lo), int(hi or lo) + 1))
        if len(out) > 1 << 16:
            break
    return out


def numa(facts, t):
    links = facts.get("links") or {}
    allowed = parse_cpulist(links.get("allowed_cpus"))
    if (links.get("numa_nodes") or 0) < 2 or not allowed:
        return []
    out, judged = [], 0
    for d in _links(facts):
        local = parse_cpulist(d.get("local_cpus"))
        if d.get("numa_node") is None or d["numa_node"] < 0 or not local:
            continue
        judged += 1
        if not local & allowed:
            out.append(Finding("gpu.numa", "warn",
                               f"{_label(d)} is on NUMA node {d['numa_node']}, none of whose CPUs this container "
                               "may use: every host<->GPU copy crosses the socket link",
                               {"gpu": d.get("index"), "numa_node": d["numa_node"], "gpu_cpus": d.get("local_cpus"),
                                "allowed_cpus": links.get("allowed_cpus")},
                               "nvidia-smi topo -m   # the CPUs near each GPU; ask the provider for a cpuset on the "
                               "GPU's node, or re-rent"))
    if judged and not out:
        out.append(Finding("gpu.numa", "ok", f"{judged} GPU(s) near CPUs this container may use", {"gpus": judged}))
    return out


def nvlink(facts, t):
    links = (facts.get("links") or {}).get("nvlink") or {}
    if not any(v.get("active") for v in links.values()):
        return []  # no NVLink in use here: a PCIe box, or one GPU of a board passed through alone
    out = []
    for gpu, v in sorted(links.items()):
        down, total = v.get("inactive") or 0, (v.get("active") or 0) + (v.get("inactive") or 0)
        if down:
            out.append(Finding("gpu.nvlink", "fail", f"GPU {gpu} has {down} of {total} NVLink(s) down: its peer "
                               "traffic runs at a fraction of the board's", {"gpu": int(gpu), "inactive": down,
                                                                             "links": total},
                               "nvidia-smi nvlink -s   # a link down is the board's: re-rent"))
    if not out:
        out.append(Finding("gpu.nvlink", "ok", f"NVLink up on {len(links)} GPU(s)", {"gpus": len(links)}))
    return out


def _word(text):
    return (text or "").lower().replace(" ", "").replace("_", "")


def fabric(facts, t):
    out, judged = [], 0
    for d in _links(facts):
        state = _word(d.get("fabric_state"))
        if state in ("", "n/a", "notsupported"):
            continue
        judged += 1
        evidence = {"gpu": d.get("index"), "fabric_state": d.get("fabric_state"), "fabric_status": d.get("fabric_status")}
        if state in ("notstarted", "inprogress"):
            out.append(Finding("gpu.fabric", "fail", f"{_label(d)} is not registered with the NVSwitch fabric "
                               f"({d.get('fabric_state')}): CUDA fails with 'system not yet initialized' (802)",
                               evidence, "systemctl status nvidia-fabricmanager   # on the host, as root: the "
                                         "provider must run Fabric Manager (same version as the driver), or re-rent"))
        elif state == "completed" and _word(d.get("fabric_status")) not in ("", "n/a", "success"):
            out.append(Finding("gpu.fabric", "fail", f"{_label(d)} fabric registration failed: "
                               f"{d.get('fabric_status')}", evidence,
                               "nvidia-smi -q | grep -A3 Fabric   # the provider's Fabric Manager; re-rent"))
    if judged and not out:
        out.append(Finding("gpu.fabric", "ok", f"{judged} GPU(s) registered with the NVSwitch fabric", {"gpus": judged}))
    return out


def modes(facts, t):
    out = []
    devices = _links(facts)
    mig = [d for d in devices if _word(d.get("mig_current")) == "enabled"]
    if mig:
        out.append(Finding("gpu.mig", "warn", f"MIG is on for {', '.join(_label(d) for d in mig)}: CUDA sees MIG "
                           "slices, not the whole GPU", {"gpus": ",".join(str(d.get("index")) for d in mig)},
                           "nvidia-smi -L   # lists the MIG devices; turning MIG off needs root and a GPU reset: ask "
                           "the provider, or re-rent"))
    pending = [d for d in devices if d.get("mig_pending") and _word(d.get("mig_pending")) != _word(d.get("mig_current"))]
    if pending:
        out.append(Finding("gpu.mig", "info", "a MIG mode change waits for a GPU reset",
                           {"gpus": ",".join(str(d.get("index")) for d in pending)}))
    off = [d for d in devices if _word(d.get("persistence")) == "disabled"]
    if off:
        out.append(Finding("gpu.persistence", "info", f"persistence mode off on {len(off)} GPU(s): each first CUDA "
                           "call waits for the driver to load the GPU's state", {"gpus": len(off)},
                           "nvidia-smi -pm 1   # needs root on the host; harmless to leave"))
    return out


CHECKS = (pcie, p2p, numa, nvlink, fabric, modes)
