"""Kernel-log verdicts: NVIDIA Xid errors since boot, and whether the log could be read at all."""

from ..findings import Finding
from .gpu import RERENT, device_for_bus, label

# Hardware or driver faults: the GPU needs a reset, the node a reboot, or the card is dying.
# On a rental none of that is the tenant's to do, so each of these fails preflight (U22).
FATAL = {46, 48, 54, 61, 62, 64, 74, 79, 95, 110, 119, 120, 136, 140, 143, 155, 157, 158, 167, 168, 169, 171, 172}
# Raised by an application's own fault (illegal address, killed context): the GPU stays healthy.
APPLICATION = {13, 31, 32, 43, 45, 68, 69, 109}

APP_FIX = ("dmesg | grep -i xid   # an application fault (bad kernel, illegal memory access, killed process): "
           "fix or re-run the job; if the same Xid recurs across different jobs on this GPU, re-rent")
OTHER_FIX = "dmesg | grep -i xid   # look the code up in NVIDIA's Xid catalog; re-rent if it repeats"


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
    for e in sorted(events, key=lambda e: (e["code"] not in FATAL, e["code"], e["pci"])):
        d = device_for_bus(devices, e["pci"])
        evidence = {"xid": e["code"], "pci": e["pci"], "gpu": d.get("index") if d else None, "count": e.get("count"),
                    "line": (e.get("last_line") or "")[:200]}
        if d is None:
            # A shared host's kernel log shows every tenant's GPUs; one we cannot see may not be ours.
            out.append(Finding("gpu.xid", "info" if e["code"] in APPLICATION else "warn",
                               f"Xid {e['code']} since boot on {e['pci']}, a GPU not visible here",
                               evidence, NOT_HERE_FIX, "U22"))
            continue
        where = label(d)
        if e["code"] in FATAL:
            out.append(Finding("gpu.xid", "fail", f"Xid {e['code']} on {where} since boot: hardware/driver fault",
                               evidence, RERENT, "U22"))
        elif e["code"] in APPLICATION:
            out.append(Finding("gpu.xid", "warn", f"Xid {e['code']} on {where} since boot: application-level fault",
                               evidence, APP_FIX, "U22"))
        else:
            out.append(Finding("gpu.xid", "warn", f"Xid {e['code']} on {where} since boot", evidence, OTHER_FIX, "U22"))
    if not out:
        out.append(Finding("gpu.xid", "ok", "no NVIDIA Xid errors in the kernel log since boot",
                           {"source": log.get("source"), "lines": log.get("lines_scanned")}))
    return out


def readable(facts, t):
    log = facts.get("kernlog")
    if log is None or log.get("readable"):
        return []
    tried = "; ".join(f"{x['source']}: {x['why']}" for x in log.get("tried") or [])
    return [Finding("kernlog.unreadable", "info",
                    "kernel log unreadable here: Xid and OOM-killer history NOT checked (not the same as clean)",
                    {"tried": tried[:300]},
                    "sudo dmesg | grep -iE 'xid|killed process'   # needs root; inside a container the cgroup "
                    "OOM counter (mem.oom-kills) is the evidence that remains", "U22")]


CHECKS = (xid, readable)
