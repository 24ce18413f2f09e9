"""The supervisor's job, stopped: TERM its processes, KILL what is left after the grace period,
confirm they are gone (gpuops.onbox.engines.box_engine's stop; a pause's release too). Also what tells
its processes apart from others after a pid was reused: the recorded start time and boot.

A plan binds to the job's leader and to the processes that had lasted LASTING_S when the dry run
looked: a child that comes and goes (the `sleep 1` a shell loop starts every second) is signalled
with its group but is no part of the plan, so the `next` a dry run prints still applies seconds
later. Applying it looks again at those same processes, as of the moment the dry run looked, and
refuses when one of them is gone or when a process born since has lasted LASTING_S too (one that
was young then is passed over either way: it may have become lasting meanwhile without being
new). That moment is on the box's own clock: each dry run notes it under the id of the plan it
shows (the caller mints the expiry first) in the job's PLANS record; a plan that record does not
hold (made by an older gpuops, or crowded out) is judged as of `plan_age_s` ago, measured where
the plan was made.
"""

import os
import time

from ..host import jobrecord, plans, procs, signals
from ..run import runrecord
from ..host.jobrecord import EXIT, STOP, JobError

KILL_WAIT_S = 5.0
LASTING_S = 3.0
PLANS = "stop-plans.json"  # in the job's record dir: {plan id: when its dry run looked}
PLANS_KEPT = 256  # plans not yet expired; an agent polling a dry run every second makes 600 in a TTL
# The supervisor reaps the job, lists survivors and samples before it writes exit.json: a status
# read in that window sees a dead process and no record, and waits for the record, not "VANISHED".
EXIT_SETTLE_S = 3.0
RUN_SETTLE_S = 10.0  # a run's supervisor classifies the attempt's log and notifies before it records the end


def wait_exit_record(jdir, meta, seconds) -> None:
    """Wait until the job's supervisor has written exit.json or is gone, at most `seconds`."""
    signals.wait_until(lambda: not wrapper_alive(meta) or os.path.exists(os.path.join(jdir, EXIT)), seconds)


def pid_reused(meta):
    st = procs.stat(meta["pid"]) if meta.get("pid") else None
    same_boot = not meta.get("boot_id") or meta.get("boot_id") == procs.boot_id()
    return bool(st and same_boot and meta.get("start_ticks") is not None
                and st["start_ticks"] != int(meta["start_ticks"]))


def wrapper_alive(meta):
    if not meta.get("wrapper_pid") or (meta.get("boot_id") and meta.get("boot_id") != procs.boot_id()):
        return False if meta.get("wrapper_pid") else None
    return procs.alive(meta["wrapper_pid"], meta.get("wrapper_start_ticks"))


def job_processes(job_id, meta):
    """{pid: start_ticks} of every live process of the job: its group, its descendants, and any
    process carrying GPUOPS_JOB_ID=<job_id> in its environment (children that left the group)."""
    mine = procs.ancestry()
    same_boot = not meta.get("boot_id") or meta.get("boot_id") == procs.boot_id()
    leader = meta.get("pid")
    group_ok = bool(same_boot and leader and not pid_reused(meta))
    found = {}
    table = {}
    for pid in procs.pids():
        st = procs.stat(pid)
        if st is None or st["state"] in ("Z", "X") or pid in mine or pid == meta.get("wrapper_pid"):
            continue
        table[pid] = st
        if (group_ok and st["pgid"] == meta.get("pgid")) or procs.job_tag(pid) == job_id:
            found[pid] = st["start_ticks"]
    if group_ok and procs.alive(leader, meta.get("start_ticks")):
        kids = {}
        for pid, st in table.items():
            kids.setdefault(st["ppid"], []).append(pid)
        for pid in procs.descendants(leader, kids):
            if pid in table:
                found[pid] = table[pid]["start_ticks"]
    return found


def signal_job(targets, meta, sig):
    """Signal the job's group (its leader re-checked: the group is the job's own session, so every
    member is the job's) and every other target that still is the process recorded. The pids
    signalled."""
    sent, in_group = [], set()
    pgid = meta.get("pgid")
    if pgid and not pid_reused(meta):
        members = [p for p, _ in targets if (procs.stat(p) or {}).get("pgid") == pgid]
        if members and signals.send_group(pgid, sig):
            in_group.update(members)
    for pid, ticks in targets:
        if pid in in_group or signals.send(pid, ticks, sig) == "sent":
            sent.append(pid)
    return sent


def _describe(pids_ticks, gpu, meta, made=None):
    """The targets as shown, each `planned` when a plan made at `made` (the box's uptime; None:
    now) binds it: the job's leader, a process that had lasted by then, or one born after it that
    has lasted since."""
    out = []
    up = procs.uptime_s()
    made = up if made is None else made
    for pid in sorted(pids_ticks):
        cmd = procs.cmdline(pid, 120)
        # a short-lived child can exit between the scan and this read: it is no target any more
        if cmd is None and not procs.alive(pid, pids_ticks[pid]):
            continue
        ticks = pids_ticks[pid]
        leader = pid == meta.get("pid") and ticks == meta.get("start_ticks")
        if up is None or ticks is None:
            planned = True
        else:
            born = ticks / float(procs.CLK_TCK)
            planned = leader or born <= made - LASTING_S or (born > made and up - born >= LASTING_S)
        out.append({"pid": pid, "start_ticks": ticks, "cmd": cmd, "gpu": pid in gpu, "planned": planned})
    return out


def _pairs(targets) -> list:
    return [[t["pid"], t["start_ticks"]] for t in targets if t["planned"]]


def _remember(jdir, job_id, targets, expires) -> None:
    """Note when this dry run looked (the box's uptime) under the id of the plan it shows (the
    caller mints its expiry before asking), so applying that plan judges the processes as of this
    moment, whatever the two clocks and the link's delay. An id shown again (an agent polling
    within one second) keeps its first moment; ids past their expiry are let go."""
    up = procs.uptime_s()
    if up is None or not isinstance(expires, int):
        return
    kept = jobrecord.read_json(os.path.join(jdir, PLANS))
    kept = kept if isinstance(kept, dict) else {}
    plan = plans.plan_id("stop", job_id, _pairs(targets), expires)
    if plan in kept:
        return
    now = time.time()
    live = sorted(((p, m) for p, m in kept.items() if (plans.expiry(p) or 0) >= now and isinstance(m, (int, float))),
                  key=lambda pm: plans.expiry(pm[0]))  # the newest kept when the record is full
    try:
        jobrecord.write_json(os.path.join(jdir, PLANS), dict(live[-(PLANS_KEPT - 1):] + [(plan, up)]))
    except (OSError, IOError):
        pass  # a read-only record: the plan is judged by its age instead


def _made(jdir, plan, plan_age_s):
    """The box's uptime when the dry run that showed `plan` looked; else `plan_age_s` before now."""
    kept = jobrecord.read_json(os.path.join(jdir, PLANS))
    made = kept.get(plan) if isinstance(kept, dict) else None
    if isinstance(made, (int, float)) and not isinstance(made, bool):
        return float(made)
    up = procs.uptime_s()
    return None if up is None else up - min(max(0.0, plan_age_s), float(plans.TTL_S))


def _wait_run_end(meta) -> None:
    """A run's attempt stopped: wait for its supervisor to record that the run ended (it never
    retries a stop), so the answer's state is the run's."""
    if runrecord.run_of(meta):
        signals.wait_until(lambda: runrecord.going(meta) is None, RUN_SETTLE_S)


def stop(opts, job_id, meta):
    """Dry run unless `yes`; with a `plan` id (gpuops.onbox.host.plans), only when the live set of
    processes is still the one planned. The answer, without the job's facts after it."""
    jdir = jobrecord.job_dir(job_id)
    if opts.get("signal"):
        raise JobError("usage", "--signal is for a scheduler's jobs; to checkpoint a supervised job before it "
                                "stops, use gpuops pause")
    targets = job_processes(job_id, meta)
    holders, _ = procs.device_holders(exclude=procs.ancestry())
    gpu = set(h["pid"] for h in holders if h["pid"] in targets)
    # 0 is a choice (SIGKILL at once), not "unset".
    grace = opts.get("grace")
    grace = 10.0 if grace is None else float(grace)
    doc = {"job_id": job_id, "targets": _describe(targets, gpu, meta), "grace_s": grace}
    planned = opts.get("plan")
    if planned is not None:
        expires = plans.expiry(planned)
        if expires is None:
            raise JobError("usage", "not a plan id: %r" % (planned,))
        made = _made(jdir, planned, float(opts.get("plan_age_s") or 0.0))
        if plans.plan_id("stop", job_id, _pairs(_describe(targets, gpu, meta, made)), expires) != planned:
            # the live set is not the one planned: signal nothing, show the set as it is now
            _remember(jdir, job_id, doc["targets"], opts.get("expires"))
            doc.update(dry_run=True, plan_refused=True, signalled=[], all_gone=not targets)
            return doc
    record = {"requested_at": time.time(), "signals": []}
    stop_path = os.path.join(jdir, STOP)
    if not opts.get("yes") or not targets:
        if not opts.get("yes") and targets:
            _remember(jdir, job_id, doc["targets"], opts.get("expires"))
        if opts.get("yes"):  # a run between attempts: its stop record (gpuops.onbox.jobs.job_stop) ends it
            _wait_run_end(meta)
        doc.update(dry_run=not opts.get("yes"), signalled=[], all_gone=not targets)
        return doc
    # Written before the first signal: a run's supervisor (gpuops.onbox.run.runwatch) reads it to tell
    # this stop, never retried, from a SIGTERM from outside (a reclaim, retried).
    jobrecord.write_json(stop_path, record)

    def send_round(items, sig):
        sent = signal_job(items, meta, sig)
        record["signals"].append({"signal": signals.name(sig), "pids": sent, "at": time.time()})
        jobrecord.write_json(stop_path, record)
        return sent

    rounds = signals.ladder(list(targets.items()), grace, KILL_WAIT_S, send_round, lambda t: procs.alive(*t),
                            more=lambda: list(job_processes(job_id, meta).items()))
    signalled = set(pid for _, items, _ in rounds for pid, _ in items)
    left = job_processes(job_id, meta)
    still_gpu = [h["pid"] for h in procs.device_holders(exclude=procs.ancestry())[0]
                 if h["pid"] in signalled or h["pid"] in left]
    record.update(all_gone=not left, remaining=sorted(left), finished_at=time.time())
    jobrecord.write_json(stop_path, record)
    wait_exit_record(jdir, meta, EXIT_SETTLE_S)
    _wait_run_end(meta)
    doc.update(dry_run=False, signals=record["signals"], all_gone=not left,
               remaining=_describe(left, set(still_gpu), meta), gpu_holders_left=still_gpu)
    return doc
