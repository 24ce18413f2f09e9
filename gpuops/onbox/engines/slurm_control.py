"""Acting on a Slurm job from the login node: stop (scancel), pause's steps (the checkpoint
signal to the batch shell, `scontrol requeuehold`) and resume (`scontrol release`). Not an entry:
gpuops.onbox.engines.slurm_engine hands a job here when its record says engine "slurm".

Stop is a dry run unless `yes`, and with a plan id acts only on the run it planned (the Slurm
job id and its restart count: a requeued run is another run).
"""

import time

from ..host import jobrecord, plans
from . import slurm
from ..host.jobrecord import PAUSE, STOP, JobError

POLL_S = 0.3
SETTLE_S = 40.0  # scancel's TERM, Slurm's KillWait (30 s by default) and its KILL


def observed(job_id, meta, detail=True):
    """The scheduler's facts of a job; a controller that does not answer says nothing of it."""
    try:
        return slurm.observe(job_id, meta, detail=detail)
    except JobError as e:
        if e.kind != "unreachable":
            raise
        return {"known": None, "error": str(e)}


def _scheduler(job_id, meta):
    sched = observed(job_id, meta, detail=False)
    if sched.get("known") is None:
        raise JobError("unreachable", sched.get("error") or "the Slurm controller did not answer")
    return sched


def _until(job_id, meta, wanted, seconds) -> bool:
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
    sched = _scheduler(job_id, meta)
    job = sched.get("job") or {}
    phase = slurm.phase_of(sched)
    targets = []
    if phase != "ended":
        targets.append({"slurm_job_id": int(meta["slurm_job_id"]), "state": job.get("JobState"),
                        "nodes": job.get("NodeList") or None, "restarts": int(job.get("Restarts") or 0),
                        "reason": job.get("Reason")})
    grace = 10.0 if opts.get("grace") is None else float(opts["grace"])
    doc = {"job_id": job_id, "targets": targets, "grace_s": grace,
           "signal": opts.get("signal")}
    planned = opts.get("plan")
    if planned is not None:
        expires = plans.expiry(planned)
        if expires is None:
            raise JobError("usage", "not a plan id: %r" % (planned,))
        if plans.plan_id("stop", job_id, [[t["slurm_job_id"], t["restarts"]] for t in targets], expires) != planned:
            doc.update(dry_run=True, plan_refused=True, all_gone=not targets)
            return doc
    if not opts.get("yes") or not targets:
        doc.update(dry_run=not opts.get("yes"), all_gone=not targets)
        return doc
    slurm_id = meta["slurm_job_id"]
    # on record before the first signal: the job's watcher (gpuops.onbox.engines.slurm_watch) reads it, and
    # never requeues a job whose stop it saw (Slurm requeues a cancelled job too)
    record = {"requested_at": time.time(), "signals": []}
    jobrecord.write_json(jobrecord.path(job_id, STOP), record)
    if opts.get("signal") and phase == "alive":
        _scancel("--batch", "--signal=" + opts["signal"], slurm_id)
        record["signals"].append({"signal": "SIG" + opts["signal"], "pids": [], "at": time.time()})
        jobrecord.write_json(jobrecord.path(job_id, STOP), record)
        _until(job_id, meta, ("ended",), grace)
    if slurm.phase(job_id, meta) != "ended":
        _scancel(slurm_id)
        record["signals"].append({"signal": "scancel", "pids": [], "at": time.time()})
    gone = _until(job_id, meta, ("ended",), SETTLE_S)
    if not gone and slurm.phase(job_id, meta) == "starting":  # pending again: a requeue came after the cancel
        _scancel(slurm_id)
        record["signals"].append({"signal": "scancel", "pids": [], "at": time.time()})
        gone = _until(job_id, meta, ("ended",), SETTLE_S)
    record.update(all_gone=gone, finished_at=time.time())
    jobrecord.write_json(jobrecord.path(job_id, STOP), record)
    doc.update(dry_run=False, signals=record["signals"], all_gone=gone)
    return doc


def before_pause(job_id, meta):
    """What a pause finds: None for a running job (signal it), else the pause's answer: already
    paused, or held at once (a pending job has nothing to checkpoint). An ended job is refused."""
    sched = _scheduler(job_id, meta)
    phase = slurm.phase_of(sched)
    if phase == "ended":
        raise JobError("refused", "job %s has ended in Slurm (%s): nothing to pause; retry it instead"
                       % (job_id, sched["job"].get("JobState") if sched.get("known") else "forgotten"))
    if phase == "paused":
        return {"paused": True, "already": True, "marker": None}
    if phase == "starting":
        _scontrol("hold", meta["slurm_job_id"])
        now = time.time()
        jobrecord.write_json(jobrecord.path(job_id, PAUSE), {"requested_at": now, "engine": slurm.NAME,
                                                             "held_at": now, "stopped_at": now, "pending": True})
        return {"paused": _until(job_id, meta, ("paused",), 10.0), "marker": None}
    return None


def signal_batch(meta, sig) -> None:
    """The checkpoint signal to the job's batch shell, which hands it to the command (slurm_script)."""
    _scancel("--batch", "--signal=" + sig, meta["slurm_job_id"])


def requeue_hold(job_id, meta):
    """Give the resources back and keep the job: requeued, held until resumed. True once held."""
    node = (observed(job_id, meta, detail=False).get("job") or {}).get("BatchHost")  # for resume: _let_go
    _scontrol("requeuehold", meta["slurm_job_id"])
    rec = jobrecord.read_json(jobrecord.path(job_id, PAUSE)) or {}
    rec.update(held_at=time.time(), stopped_at=time.time(), node=node)
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    return _until(job_id, meta, ("paused",), 15.0)


LET_GO_S, SETTLED_S = 30.0, 1.0


def _let_go(node) -> None:
    """Wait (at most LET_GO_S) until `node` has no job completing, then SETTLED_S more; a node
    Slurm does not name is not waited for."""
    if not node or node == "(null)":
        return
    deadline = time.time() + LET_GO_S
    while time.time() < deadline:
        rc, out, _ = slurm.run(["sinfo", "-h", "-n", node, "-o", "%T"])
        if rc != 0 or not any(word.startswith("completing") for word in out.split()):
            break
        time.sleep(POLL_S)
    time.sleep(SETTLED_S)


def resume(job_id, meta) -> dict:
    """Release a paused job back to the queue (resume a suspended one); its requeue delay is
    lifted, so it starts as soon as it is scheduled."""
    sched = _scheduler(job_id, meta)
    job = sched.get("job") or {}
    slurm_id = meta["slurm_job_id"]
    rec = jobrecord.read_json(jobrecord.path(job_id, PAUSE)) or {}
    if jobrecord.phases(slurm.NAME).get((job.get("JobState") or "").split(" ")[0]) == "paused":
        _scontrol("resume", slurm_id)
    elif sched.get("held"):
        _scontrol("release", slurm_id)
        if rec.get("checkpointed_at"):
            # Slurm keeps a requeued job back for two minutes (its begin time); a resume means now,
            # once slurmd has let go of the last run: a start sooner meets it still ending that
            # run ("Job N already killed, do not launch batch job") and the job FAILED.
            _let_go(job.get("BatchHost") or rec.get("node"))
            _scontrol("update", "JobId=%s" % slurm_id, "StartTime=now")
    else:
        raise JobError("refused", "job %s is not paused (Slurm says %s, %s)"
                       % (job_id, job.get("JobState"), job.get("Reason")))
    rec["resumed_at"] = time.time()
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    return {"resumed": True}
