"""Reap VRAM zombies: find who really holds the NVIDIA devices, judge each holder, act only when safe.

    python3 reap.py [--gpu N] [--min-age S] [--idle-window S] [--term-wait S] [--yes [--plan ID]]

Holders are found from /proc, the way fuser finds them (gpuops.onbox.reaper.holders); NVML/nvidia-smi is
only a second opinion there, and nothing is ever signalled because NVML named it.

Each holder gets one class and its reason (gpuops.onbox.reaper.reap_rules). Dry run unless --yes.
Acting: SIGTERM to the process group when every member of the group may be signalled (else to the
pid alone), wait, SIGKILL the survivors (gpuops.onbox.host.signals re-reads every start time before a
signal, so a pid reused in the meantime is never hit). A holder still in state D at the end needs
a GPU reset or a reboot: it is reported, not retried.
"""

import argparse
import json
import os
import signal
import sys

from . import activity
from ..host import gpu_light, jobrecord, plans, procs, signals
from .holders import attach_memory, describe, nested_pid_namespace, process_table, scan_holders
from .reap_rules import REAPABLE, classify, job_of, last_activity, protected_reason

# ----------------------------------------------------------------------------- jobs

def load_jobs(boot_id, btime):
    """The gpuops jobs of this boot: running (no exit record, process alive) or ended (exit record)."""
    jobs = []
    for job_id in jobrecord.all_ids():
        try:
            rec = jobrecord.load(job_id)
        except ValueError:
            continue
        if rec is None:
            continue
        meta, ended = rec["meta"], rec["exit"]
        if meta.get("boot_id") and boot_id and meta["boot_id"] != boot_id:
            continue  # a previous boot: its pids and groups mean nothing now
        running = ended is None and jobrecord.liveness(meta) == "alive"
        if not running and ended is None:
            continue  # gone without an exit record: its leftovers are judged as orphans
        ended_ticks = None
        if ended and ended.get("ended_at") and btime:
            ended_ticks = int((float(ended["ended_at"]) - btime + 2) * procs.CLK_TCK)
        survivors = set((s.get("pid"), s.get("start_ticks")) for s in (ended or {}).get("survivors") or [])
        jobs.append({
            "id": job_id, "pid": meta.get("pid"), "pgid": meta.get("pgid"), "sid": meta.get("sid"),
            "start_ticks": meta.get("start_ticks"), "running": running, "exit": ended, "ended_ticks": ended_ticks,
            "wrapper_pid": meta.get("wrapper_pid"), "wrapper_start_ticks": meta.get("wrapper_start_ticks"),
            "survivors": survivors,
        })
    return jobs


# ----------------------------------------------------------------------------- plan

def _group_check(pgid, ctx, holder_class, selected):
    """(members, None) when the whole group may be signalled, else (None, why not)."""
    if pgid <= 1:
        return None, "no usable process group"
    if pgid == ctx["pgid"]:
        return None, "the reaper's own process group"
    members = []
    for pid, st in sorted(ctx["table"].items()):
        if st["pgid"] != pgid:
            continue
        if pid in holder_class:
            cls = holder_class[pid]
            if cls not in REAPABLE or pid not in selected:
                return None, "group %d has holder %d (%s)" % (pgid, pid, cls if pid in selected else "not selected")
        else:
            f = describe(pid, st)
            why = protected_reason(f, ctx)
            if why:
                return None, "group %d has protected %d (%s)" % (pgid, pid, why)
            job = job_of(f, ctx["jobs"], ctx["table"])
            if job and job["running"]:
                return None, "group %d has %d of running job %s" % (pgid, pid, job["id"])
        members.append([pid, st["start_ticks"]])
    return members, None


def _unit(f, ctx, holder_class, selected):
    members, why = _group_check(f["pgid"], ctx, holder_class, selected)
    unit = {"pid": f["pid"], "start_ticks": f["start_ticks"], "pgid": f["pgid"], "comm": f["comm"]}
    if members is not None:
        unit.update(scope="group", members=members)
    else:
        unit.update(scope="pid", members=[], why_pid=why)
    return unit


def _unit_text(unit) -> str:
    if unit["scope"] == "group":
        return "process group %d" % unit["pgid"]
    return "pid %d alone (%s)" % (unit["pid"], unit["why_pid"])


def plan(holders, ctx, selected, term_wait):
    """Signal units for the selected reapable holders; each holder gets its `action` text."""
    holder_class = dict((h["pid"], h["class"]) for h in holders)
    by_pid = dict((h["pid"], h) for h in holders)
    units = {}
    for h in holders:
        h["action"] = None
        if h["pid"] not in selected or h["class"] not in REAPABLE:
            continue
        targets = [h]
        note = ""
        if h["class"] == "defunct":
            parent_st = ctx["table"].get(h["ppid"])
            if parent_st:
                p = describe(h["ppid"], parent_st)
                if p["pid"] in by_pid:  # a holder itself: its own verdict stands
                    pcls, pwhy = by_pid[p["pid"]]["class"], by_pid[p["pid"]]["reason"]
                    if p["pid"] not in selected:
                        pcls, pwhy = "not selected", "it holds none of the selected GPU's devices"
                else:  # judged on the GPUs its unreaped child still holds, and on its own activity
                    p["gpus"] = h["gpus"]
                    p["activity"] = activity.measure(p["pid"], ctx["before"], ctx["table"])
                    pcls, pwhy, _ = classify(p, ctx)
                if pcls in REAPABLE and pcls != "defunct":
                    targets.append(p)
                    note = "; parent %d is %s, so it goes too" % (p["pid"], pcls)
                else:
                    note = "; parent %d left alone (%s: %s)" % (p["pid"], pcls, pwhy)
        texts = []
        for t in targets:
            unit = units.get(t["pid"]) or _unit(t, ctx, holder_class, selected)
            units[t["pid"]] = unit
            if _unit_text(unit) not in texts:
                texts.append(_unit_text(unit))
        h["action"] = "SIGTERM, SIGKILL after %gs: %s%s" % (term_wait, " + ".join(texts), note)
    return list(units.values())


# ----------------------------------------------------------------------------- act

def _send(unit, sig, record, first, groups_done) -> None:
    """Signal one unit after re-reading its identity; the group only if nobody new joined it."""
    what = signals.name(sig)
    if unit["scope"] == "group" and unit["pgid"] in groups_done:
        record["signals"].append("%s to group %d (sent once for the group)" % (what, unit["pgid"]))
        return
    state = signals.identity(unit["pid"], unit["start_ticks"])
    if state != "there":
        if first:
            record["outcome"] = "pid-reused" if state == "reused" else "gone"
            why = "the pid now names another process" if state == "reused" else "it had already exited"
        else:
            record["outcome"] = "reaped"
            why = "it exited after SIGTERM"
        record["signals"].append("%s not sent: %s" % (what, why))
        return
    planned = set((p, s) for p, s in unit["members"]) if unit["scope"] == "group" else None
    if planned is not None and signals.send_group(unit["pgid"], sig, allowed=planned):
        groups_done.add(unit["pgid"])
        record["signals"].append("%s to group %d" % (what, unit["pgid"]))
        return
    sent = signals.send(unit["pid"], unit["start_ticks"], sig)
    if sent == "sent":
        record["signals"].append("%s to pid %d" % (what, unit["pid"]))
    elif sent == "not-permitted":
        record["outcome"] = "not-permitted"
        record["signals"].append("%s: not permitted" % what)
    else:
        record["signals"].append("%s: no such process" % what)


def act(units, term_wait, kill_wait) -> list:
    """Signal every unit (SIGTERM, then SIGKILL for survivors); one record per unit, in order."""
    records = dict((u["pid"], {"pid": u["pid"], "start_ticks": u["start_ticks"], "scope": u["scope"],
                               "signals": [], "outcome": None}) for u in units)

    def send_round(items, sig) -> None:
        groups_done = set()
        for u in items:
            _send(u, sig, records[u["pid"]], sig == signal.SIGTERM, groups_done)

    def still_there(u):
        return records[u["pid"]]["outcome"] is None and signals.identity(u["pid"], u["start_ticks"]) == "there"

    signals.ladder(units, term_wait, kill_wait, send_round, still_there)
    for u in units:
        rec = records[u["pid"]]
        if rec["outcome"] is not None:
            continue
        if signals.identity(u["pid"], u["start_ticks"]) != "there":
            rec["outcome"] = "reaped"
            continue
        st = procs.stat(u["pid"]) or {}
        if st.get("state") == "D":
            rec["outcome"] = "stuck"
            rec["why"] = "in uninterruptible sleep (D) inside the driver: needs a GPU reset or a reboot"
        else:
            rec["outcome"] = "remains"
            rec["why"] = "still there after SIGKILL (state %s)" % st.get("state")
    return [records[u["pid"]] for u in units]


# ----------------------------------------------------------------------------- main

def _args(argv):
    p = argparse.ArgumentParser(prog="reap")
    p.add_argument("--gpu", type=int, default=None)
    p.add_argument("--min-age", type=float, default=600.0)
    p.add_argument("--idle-window", type=float, default=10.0)
    p.add_argument("--term-wait", type=float, default=10.0)
    p.add_argument("--kill-wait", type=float, default=5.0)
    p.add_argument("--release-wait", type=float, default=10.0)
    p.add_argument("--yes", action="store_true")
    p.add_argument("--plan", default=None)  # with --yes: only if the planned set is still the live one
    return p.parse_args(argv)


def context(table, jobs, util, min_age, idle_window, before) -> dict:
    me = procs.stat(os.getpid()) or {"sid": None, "pgid": None}
    return {"uid": os.geteuid(), "ancestry": procs.ancestry(), "sid": me["sid"], "pgid": me["pgid"], "table": table,
            "jobs": jobs, "util": util, "min_age": min_age, "idle_window": idle_window, "before": before}


def survey(opts, reader, window=None):
    """(document, signal units): every holder classified and, when reapable, planned. Signals nothing."""
    # Each process's own CPU and I/O are read before and after the GPU's window, over the same span.
    before = activity.snapshot(process_table())
    if window is None:  # with no holder to judge, sampling the GPUs would only keep a person waiting
        window = opts.idle_window if scan_holders(process_table(), {})[0] else 0
    first, util, samples = gpu_light.sample(reader, window)
    minor_to_index = dict((d["minor"], d["index"]) for d in first["devices"] if d.get("minor") is not None)
    table = process_table()
    holders, unreadable = scan_holders(table, minor_to_index)
    if holders and window < opts.idle_window:  # one came after the first look: judge it over the window
        return survey(opts, reader, opts.idle_window)
    # Read after the scan, so a PID it names is checked against a start time read before it.
    current = reader.read()
    nested = nested_pid_namespace()
    unverified = attach_memory(holders, current, nested)
    ctx = context(table, load_jobs(procs.boot_id(), procs.boot_time()), util, opts.min_age, opts.idle_window, before)
    for h in holders:
        h["activity"] = activity.measure(h["pid"], before, table)
        h["class"], h["reason"], h["job"] = classify(h, ctx)
        h["last_activity"] = last_activity(h, ctx)
        if h["state"] == "D":
            h["reason"] += " (state D: inside the driver, signals may not land)"
        h["outcome"] = None
    selected = set(h["pid"] for h in holders if opts.gpu is None or opts.gpu in h["gpus"])
    units = plan(holders, ctx, selected, opts.term_wait)
    doc = {
        "reap_version": 1,
        "uid": os.geteuid(),
        "applied": False,
        "gpu": opts.gpu,
        "min_age_s": opts.min_age,
        "idle_window_s": window,
        "samples": samples,
        "gpu_source": current.get("source") if current["devices"] else first.get("source"),
        "gpu_error": current.get("error") or first.get("error"),
        "nested_pid_namespace": nested,
        "gpus": _gpu_rows(current["devices"] or first["devices"], util, holders),
        "holders": [h for h in holders if h["pid"] in selected],
        "not_selected": len(holders) - len(selected),
        "unreadable": unreadable,
        "nvml_unverified": unverified,
        "jobs_dir": jobrecord.jobs_dir(),
        "actions": [],
    }
    return doc, units


def apply(doc, units, opts, reader):
    """Signal the planned units, then record each holder's outcome and what memory came free."""
    records = act(units, opts.term_wait, opts.kill_wait)
    by_pid = dict((r["pid"], r) for r in records)
    for h in doc["holders"]:
        h["outcome"] = (by_pid.get(h["pid"]) or {}).get("outcome")
    after = gpu_light.settle_memory(reader, opts.release_wait)
    for row in doc["gpus"]:
        now = after.get(row["index"])
        if now is not None and row["memory_used_mib"] is not None:
            row["memory_after_mib"] = now
            row["freed_mib"] = row["memory_used_mib"] - now
    doc["applied"] = True
    doc["actions"] = records
    return doc


def _gpu_rows(devices, util, holders):
    rows = []
    for d in devices:
        i = d["index"]
        rows.append({"index": i, "minor": d.get("minor"), "bus_id": d.get("bus_id"), "util_peak_pct": util.get(i),
                     "memory_used_mib": d.get("memory_used_mib"), "memory_total_mib": d.get("memory_total_mib"),
                     "attributed_mib": sum(h["gpu_mem_mib"].get(str(i)) or 0 for h in holders),
                     "holders": [h["pid"] for h in holders if i in h["gpus"]],
                     "memory_after_mib": None, "freed_mib": None})
    return rows


def main(argv) -> int:
    opts = _args(argv)
    reader = gpu_light.Reader()
    doc, units = survey(opts, reader)
    chosen = units + [h for h in doc["holders"] if h.get("action")]
    doc["plan_targets"] = sorted(set((x["pid"], x["start_ticks"]) for x in chosen))
    if opts.plan is not None and plans.plan_id("reap", opts.gpu, doc["plan_targets"],
                                               plans.expiry(opts.plan) or 0) != opts.plan:
        doc["plan_refused"], opts.yes = True, False  # the live set is not the planned one: signal nothing
    if opts.yes and units:
        apply(doc, units, opts, reader)
    doc["applied"] = bool(opts.yes)
    sys.stdout.write(json.dumps(doc))
    return 0
