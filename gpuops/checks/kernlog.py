"""Kernel-log verdicts: NVIDIA Xid errors since boot, and whether the log could be read at all.

What a code means is gpuops.xid's: a fatal code fails the box (a tenant can neither reset the GPU
nor repair it), an application code or any other code warns. A GPU that fell off the bus is
usually gone from nvidia-smi afterwards; when the driver still lists it here (its /proc entry and
device node), it is ours and lost (gpu.lost fails), not a neighbour's on a shared host.
"""

from .. import xid as X
from ..findings import Finding
from ..onbox.host import busid
from .gpu import RERENT, device_for_bus, label

LOST_FIX = ("nvidia-smi -q -i {pci}   # 'GPU is lost': only a host reboot brings it back, and a card that fell off "
            "the bus once usually does again: stop this instance and rent another box")
NOT_HERE_FIX = ("nvidia-smi -L   # count the GPUs you rented: if one is missing, it fell off the bus (re-rent); "
                "otherwise this is another tenant's GPU on a shared host")


def xid(facts, t):
    log = facts.get("kernlog") or {}
    if not log.get("readable"):
        return []
    devices = ((facts.get("gpu") or {}).get("devices")) or []
    events = list(log.get("xid") or [])
    coded = {(e["code"], e["pci"]) for e in events}
    # "fallen off the bus" without its Xid line is still Xid 79.
    events += [dict(e, code=79) for e in log.get("fallen_off_bus") or [] if (79, e["pci"]) not in coded]
    out = []
    for e in sorted(events, key=lambda e: (not X.is_fatal(e["code"]), e["code"], e["pci"])):
        code = X.lookup(e["code"])
        d = device_for_bus(devices, e["pci"])
        evidence = {"xid": e["code"], "name": code.name, "pci": e["pci"], "gpu": d.get("index") if d else None,
                    "count": e.get("count"), "line": (e.get("last_line") or "")[:200]}
        if d is None and driver_has(facts, e["pci"]):
            # The driver still has it here (entry and device node), so it is ours: nvidia-smi lost it.
            if e["code"] == 79 or code.fatal:
                out.append(Finding("gpu.lost", "fail", f"GPU {e['pci']} is lost: Xid {e['code']} ({code.meaning}) "
                                   "and nvidia-smi no longer lists it, though the driver still has it here",
                                   evidence, LOST_FIX.format(pci=e["pci"]), X.GOTCHA))
            else:
                out.append(Finding("gpu.xid", "warn", f"Xid {e['code']} since boot on {e['pci']}, a GPU the driver "
                                   "has here but nvidia-smi does not list", evidence, LOST_FIX.format(pci=e["pci"]),
                                   X.GOTCHA))
            continue
        if d is None:
            # A shared host's kernel log shows every tenant's GPUs; one we cannot see may not be ours.
            out.append(Finding("gpu.xid", "info" if code.kind == X.APPLICATION else "warn",
                               f"Xid {e['code']} since boot on {e['pci']}, a GPU not visible here",
                               evidence, NOT_HERE_FIX, X.GOTCHA))
            continue
        where = label(d)
        if code.fatal:
            out.append(Finding("gpu.xid", "fail", f"Xid {e['code']} on {where} since boot: {code.meaning}",
                               evidence, RERENT, X.GOTCHA))
        elif code.kind == X.APPLICATION:
            out.append(Finding("gpu.xid", "warn", f"Xid {e['code']} on {where} since boot: application-level fault "
                               f"({code.meaning})", evidence, "dmesg | grep -i xid   # " + code.todo, X.GOTCHA))
        else:
            out.append(Finding("gpu.xid", "warn", f"Xid {e['code']} on {where} since boot: {code.meaning}", evidence,
                               "dmesg | grep -i xid   # " + code.todo if not code.action else code.todo, X.GOTCHA))
    if not out:
        out.append(Finding("gpu.xid", "ok", "no NVIDIA Xid errors in the kernel log since boot",
                           {"source": log.get("source"), "lines": log.get("lines_scanned")}))
    return out


def driver_has(facts, pci) -> bool:
    """The driver lists this GPU here and, when its minor is known, its device node exists."""
    key = busid.key(pci)
    for g in ((facts.get("gpu") or {}).get("driver_gpus")) or []:
        if key is not None and busid.key(g.get("bus_id")) == key:
            return g.get("node") is not False
    return False


def readable(facts, t):
    log = facts.get("kernlog")
    if log is None or log.get("readable"):
        return []
    tried = "; ".join(f"{x['source']}: {x['why']}" for x in log.get("tried") or [])
    return [Finding("kernlog.unreadable", "info",
                    "kernel log unreadable here: Xid and OOM-killer history NOT checked (not the same as clean)",
                    {"tried": tried[:300]},
                    "sudo dmesg | grep -iE 'xid|killed process'   # needs root; inside a container the cgroup "
                    "OOM counter (mem.oom-kills) is the evidence that remains")]


CHECKS = (xid, readable)
