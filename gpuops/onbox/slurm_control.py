"""Acting on a Slurm job from the login node: stop (scancel), pause (checkpoint signal, then
`scontrol requeuehold`) and resume (`scontrol release`). Not an entry: job_stop and job_pause
hand a job here when its record says engine "slurm".

Stop is a dry run unless `yes`, and with a plan id acts only on the run it planned (the Slurm
job id and its restart count: a requeued run is another run). Pause requeues only once the job
showed its checkpoint marker; without one the job runs on untouched.
"""

import os
import time

from . import job_facts, jobrecord, plans, slurm
from .jobrecord import PAUSE, STOP, JobError

POLL_S = 0.3
SETTLE_S = 40.0  # scancel's TERM, Slurm's KillWait (30 s by default) and its KILL


def _scheduler(job_id):
    facts = job_facts.facts(job_id, detail=False)
    sched = facts.get("scheduler") or {}
    if sched.get("known") is None:
        raise JobError("unreachable", sched.get("error") or "the Slurm controller did not answer")
    return facts, sched


def _until(job_id, meta, wanted, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if slurm.phase(job_id, meta) in wanted:
            return True
        time.sleep(POLL_S)
    return slurm.phase(job_id, meta) in wanted


def _scontrol(*args):
    rc, _, err = slurm.run(["scontrol"] + list(args))
    if rc != 0:
        raise JobError("refused", "scontrol %s: %s" % (" ".join(args), slurm.last_line(err)))


def _scancel(*args):
    rc, _, err = slurm.run(["scancel"] + list(args))
    if rc != 0:
        raise JobError("refused", "scancel %s: %s" % (" ".join(args), slurm.last_line(err)))


def stop(opts, job_id, meta):
    facts, sched = _scheduler(job_id)
    job = sched.get("job") or {}
    phase = slurm.phase_of(sched)
    targets = []
    if phase != "ended":
        targets.append({"slurm_job_id": int(meta["slurm_job_id"]), "state": job.get("JobState"),
                        "nodes": job.get("NodeList") or None, "restarts": int(job.get("Restarts") or 0),
                        "reason": job.get("Reason")})
    grace = 10.0 if opts.get("grace") is None else float(opts["grace"])
    doc = {"engine": jobrecord.SLURM, "job_id": job_id, "targets": targets, "grace_s": grace,
           "signal": opts.get("signal")}
    planned = opts.get("plan")
    if planned is not None:
        expires = plans.expiry(planned)
        if expires is None:
            raise JobError("usage", "not a plan id: %r" % (planned,))
        if plans.plan_id("stop", job_id, [[t["slurm_job_id"], t["restarts"]] for t in targets], expires) != planned:
            doc.update(dry_run=True, plan_refused=True, all_gone=not targets, after=facts)
            return doc
    if not opts.get("yes") or not targets:
        doc.update(dry_run=not opts.get("yes"), all_gone=not targets, after=facts)
        return doc
    slurm_id = meta["slurm_job_id"]
    record = {"requested_at": time.time(), "signals": []}
    if opts.get("signal") and phase == "alive":
        _scancel("--batch", "--signal=" + opts["signal"], slurm_id)
        record["signals"].append({"signal": "SIG" + opts["signal"], "pids": [], "at": time.time()})
        jobrecord.write_json(jobrecord.path(job_id, STOP), record)
        _until(job_id, meta, ("ended",), grace)
    if slurm.phase(job_id, meta) != "ended":
        _scancel(slurm_id)
        record["signals"].append({"signal": "scancel", "pids": [], "at": time.time()})
    gone = _until(job_id, meta, ("ended",), SETTLE_S)
    record.update(all_gone=gone, finished_at=time.time())
    jobrecord.write_json(jobrecord.path(job_id, STOP), record)
    doc.update(dry_run=False, signals=record["signals"], all_gone=gone, after=job_facts.facts(job_id))
    return doc


def pause(opts, job_id, meta, wait_marker):
    """Checkpoint and requeue-hold a running job (hold a pending one): the job's facts after, and
    whether it is paused; `wait_marker(log offset)` waits for the checkpoint marker."""
    _, sched = _scheduler(job_id)
    phase = slurm.phase_of(sched)
    slurm_id = meta["slurm_job_id"]
    rec = {"requested_at": time.time(), "engine": jobrecord.SLURM}
    if phase == "ended":
        raise JobError("refused", "job %s has ended in Slurm (%s): nothing to pause; retry it instead"
                       % (job_id, sched.get("job", {}).get("JobState") if sched.get("known") else "forgotten"))
    if phase in ("paused",):
        return {"paused": True, "already": True, "marker": None}
    if phase == "starting":
        _scontrol("hold", slurm_id)  # nothing ran yet, so nothing to checkpoint
        rec.update(held_at=time.time(), stopped_at=time.time(), pending=True)
        jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
        return {"paused": _until(job_id, meta, ("paused",), 10.0), "marker": None}
    sig = (opts.get("signal") or meta.get("signal") or "USR1").upper().replace("SIG", "", 1)
    offset = os.path.getsize(jobrecord.path(job_id, jobrecord.LOG)) \
        if os.path.exists(jobrecord.path(job_id, jobrecord.LOG)) else 0
    rec.update(signal="SIG" + sig, from_offset=offset)
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    _scancel("--batch", "--signal=" + sig, slurm_id)
    marker = wait_marker(offset)
    if marker is None:
        rec.update(failed="no checkpoint marker", gave_up_at=time.time())
        jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
        return {"paused": False, "marker": None}
    rec.update(marker=marker, checkpointed_at=time.time())
    _scontrol("requeuehold", slurm_id)
    rec.update(held_at=time.time(), stopped_at=time.time())
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    return {"paused": _until(job_id, meta, ("paused",), 15.0), "marker": marker}


def resume(job_id, meta):
    """Release a paused job back to the queue (resume a suspended one); its requeue delay is
    lifted, so it starts as soon as it is scheduled."""
    _, sched = _scheduler(job_id)
    job = sched.get("job") or {}
    slurm_id = meta["slurm_job_id"]
    rec = jobrecord.read_json(jobrecord.path(job_id, PAUSE)) or {}
    if jobrecord.slurm_phases().get((job.get("JobState") or "").split(" ")[0]) == "paused":
        _scontrol("resume", slurm_id)
    elif sched.get("held"):
        _scontrol("release", slurm_id)
        if rec.get("checkpointed_at"):
            # Slurm keeps a requeued job back for two minutes (its begin time); a resume means now.
            _scontrol("update", "JobId=%s" % slurm_id, "StartTime=now")
    else:
        raise JobError("refused", "job %s is not paused (Slurm says %s, %s)"
                       % (job_id, job.get("JobState"), job.get("Reason")))
    rec["resumed_at"] = time.time()
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    return {"resumed": True}
