"""Host-memory verdicts: was anything here OOM-killed, and how much room is left under the limit.

On a shared box `free` describes the whole host; the cgroup's limit, working set and OOM-kill
counter describe this container, so they win when present (U41).
"""

from ..findings import Finding
from ..units import GIB, gib

OOM_FIX = ("grep oom_kill {file}   # then size DataLoader num_workers against the memory limit, not the CPU "
           "count: each forked worker copies the dataset's in-RAM objects (share one memmap instead)")


def oom_kills(facts, t):
    mem = ((facts.get("cgroup") or {}).get("memory")) or {}
    counter = mem.get("oom_kills")
    log = facts.get("kernlog") or {}
    victims = log.get("oom_kills") or []
    evidence = {"cgroup_oom_kills": counter, "counter_file": mem.get("counter_file"),
                "kernel_log_victims": log.get("oom_kill_count") if log.get("readable") else "unreadable"}
    if victims:
        evidence["last_victim"] = f"{victims[-1]['comm']} (pid {victims[-1]['pid']}, {victims[-1]['kind']})"
    fix = OOM_FIX.format(file=mem.get("counter_file") or "/sys/fs/cgroup/memory.events")
    if counter is not None and counter > t["oom_kills_max"]:
        return [Finding("mem.oom-kills", "warn",
                        f"this cgroup has OOM-killed {counter} process(es): a run here died with a bare 'Killed'",
                        evidence, fix, "U41")]
    if counter is None:
        if victims:  # no cgroup counter to go by: the kernel log is the only evidence
            return [Finding("mem.oom-kills", "warn",
                            f"the kernel OOM-killed {len(victims)} process(es) since boot", evidence, fix, "U9")]
        if not log.get("readable"):
            return []
        return [Finding("mem.oom-kills", "ok", "no OOM kills in the kernel log since boot", evidence)]
    # The counter is this cgroup's own; kernel-log victims then belong to other cgroups (neighbours).
    return [Finding("mem.oom-kills", "ok", "no OOM kills in this cgroup", evidence)]


def headroom(facts, t):
    cg = ((facts.get("cgroup") or {}).get("memory")) or {}
    host = facts.get("memory") or {}
    candidates = []
    if cg.get("limit_bytes") and cg.get("working_set_bytes") is not None:
        candidates.append(("cgroup", cg["limit_bytes"], cg["limit_bytes"] - cg["working_set_bytes"]))
    if host.get("host_total_bytes") and host.get("host_available_bytes") is not None:
        candidates.append(("host", host["host_total_bytes"], host["host_available_bytes"]))
    if not candidates:
        return []
    scope, limit, free = min(candidates, key=lambda c: c[2])  # the tighter of the two bites first
    evidence = {"scope": scope, "limit_gib": gib(limit), "free_gib": gib(max(free, 0)),
                "free_pct": round(100.0 * free / limit, 1)}
    if free < t["mem_min_headroom_gib"] * GIB or 100.0 * free / limit < t["mem_min_headroom_pct"]:
        return [Finding("mem.headroom", "warn",
                        f"only {gib(max(free, 0))} GiB of {gib(limit)} GiB memory free ({scope})", evidence,
                        "ps aux --sort=-rss | head   # find what holds it before launching; lower num_workers "
                        "or batch size if the run itself needs more", "U9")]
    return [Finding("mem.headroom", "ok", f"{gib(free)} GiB of {gib(limit)} GiB memory free ({scope})", evidence)]


CHECKS = (oom_kills, headroom)
