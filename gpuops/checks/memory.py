"""Host-memory verdicts: was anything here OOM-killed, and how much room is left under the limit.

On a shared box `free` describes the whole host; the cgroup's limit and working set describe this
container, so they win when present (U41). OOM kills are judged on every counter that concerns a
run here (the session's cgroup is often a fresh one) and on the kernel log's victims, each of
which counts as ours unless its cgroup proves it was a neighbour's.
"""

import time

from ..findings import Finding
from ..units import GIB, gib

OOM_FIX = ("grep oom_kill {file}   # then size DataLoader num_workers against the memory limit, not the CPU "
           "count: each forked worker copies the dataset's in-RAM objects (share one memmap instead)")


def _clock(at):
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)) if at else "an unknown time"


def _where(victim, mem):
    """('ours'|'outside'|'unproven', why): whose cgroup the victim was in, as far as it can be proven.

    The kernel prints the host's cgroup path. Only a box that can see where its own tree sits in the
    host's (a container without a cgroup namespace) can prove a victim was somebody else's; on the
    host itself, or behind a cgroup namespace, every victim since boot may have been a run of ours.
    """
    memcg = victim.get("task_memcg") or victim.get("oom_memcg")
    root = (mem.get("namespace_root") or "/").rstrip("/")
    if not memcg:
        return "unproven", "the kernel line names no cgroup"
    if not root:
        return "unproven", f"cgroup {memcg}; this box cannot tell its own cgroup tree from the host's"
    if memcg == root or memcg.startswith(root + "/"):
        return "ours", f"cgroup {memcg}, inside this container's {root}"
    return "outside", f"cgroup {memcg}, outside this container's {root}: another tenant on a shared host"


def _victim_text(v, why) -> str:
    return f"{v['comm']} (pid {v['pid']}) at {_clock(v.get('at'))}, {why}"


def oom_kills(facts, t):
    mem = ((facts.get("cgroup") or {}).get("memory")) or {}
    counter = mem.get("oom_kills")
    log = facts.get("kernlog") or {}
    victims = log.get("oom_kills") or []
    counters = [c for c in mem.get("oom_counters") or [] if c.get("oom_kills") is not None]
    evidence = {"cgroup_oom_kills": counter, "counter_file": mem.get("counter_file"),
                "kernel_log_victims": log.get("oom_kill_count") if log.get("readable") else "unreadable"}
    if counters:
        evidence["counters"] = ", ".join(f"{c['scope']}{' ' + c['job_id'] if c.get('job_id') else ''} "
                                         f"{c['oom_kills']} ({c['file']})" for c in counters)
    if victims:
        evidence["last_victim"] = f"{victims[-1]['comm']} (pid {victims[-1]['pid']}, {victims[-1]['kind']})"
    judged = [(v,) + _where(v, mem) for v in victims]
    mine = [(v, why) for v, where, why in judged if where != "outside"]
    if judged:
        evidence["victims"] = "; ".join(f"{_victim_text(v, why)} [{where}]" for v, where, why in judged[-5:])
    hit = [c for c in counters if c["oom_kills"] > t["oom_kills_max"]]
    if counter is not None and counter > t["oom_kills_max"] and not hit:
        hit = [{"scope": "session", "oom_kills": counter, "file": mem.get("counter_file"), "job_id": None}]
    fix = OOM_FIX.format(file=(hit[0]["file"] if hit else None) or mem.get("counter_file")
                         or "/sys/fs/cgroup/memory.events")
    if mine:
        v, why = mine[-1]
        more = f" (+{len(mine) - 1} more)" if len(mine) > 1 else ""
        title = f"the kernel OOM-killed {_victim_text(v, why)}{more}: a run here may have died with a bare 'Killed'"
        if v.get("kind") == "cgroup" or hit:  # a memory limit (a cgroup's) did it, not the host running out
            return [Finding("mem.oom-kills", "warn", title, evidence, fix, "U41")]
        return [Finding("mem.oom-kills", "warn", title, evidence, fix, "U9")]
    if hit:
        c = hit[0]
        scope = f"job {c['job_id']}'s cgroup" if c.get("job_id") else f"the {c['scope']} cgroup"
        return [Finding("mem.oom-kills", "warn", f"{scope} has OOM-killed {c['oom_kills']} process(es): a run "
                        "here died with a bare 'Killed'", evidence, fix, "U41")]
    if judged:
        return [Finding("mem.oom-kills", "ok", f"{len(judged)} OOM kill(s) since boot, all provably outside this "
                        f"container (last: {_victim_text(judged[-1][0], judged[-1][2])})", evidence)]
    if not counters and counter is None and not log.get("readable"):
        return []
    return [Finding("mem.oom-kills", "ok", "no OOM kills in this box's cgroups or its kernel log since boot"
                    if log.get("readable") else "no OOM kills in this box's cgroups", evidence)]


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
