"""A run's record on the box: the attempts of one job under a run policy, kept by the supervisor
that runs them all (gpuops.onbox.run.runloop), and read by every job action that is given the run's id.

    <jobs_dir>/<run id>/        the first attempt's directory: the run's id is that job's id
        run.json       {run_id, policy, attempts: [job ids], current, attempt, max_attempts,
                        phase: running | backoff | ended, started_at, next_at, ended_at,
                        resumed_from, final: {class, why, job}, supervisor: {pid, start_ticks, boot_id},
                        activity: {phase, since, job, step}: the phase its attempt `job` is in, as
                        its watch judged it (gpuops.onbox.run.progress.PHASES)}
        events.jsonl   what the supervisor decided and saw (gpuops.onbox.run.runevents)
        run-stop.json  `gpuops stop` of the run, whichever attempt it named (see `stop`)
    Each attempt is a job of its own (meta.json, log, exit.json, telemetry.jsonl) whose meta.json
    names its run, run: {id, attempt}; an attempt's parent_job_id is the attempt before it.

The run has ended when its record says so, or when its supervisor is gone (a reboot, a kill): then
nothing will start another attempt, and the last attempt's state is the run's.
"""

import os

from ..host import jobrecord, procs
from . import runevents
from ..host.jobrecord import RUN, RUN_LOCK, RUN_STOP, STOP
from .boxpolicy import RESUME_ENV

PHASES = ("running", "backoff", "ended")
EVENTS_MAX = 50  # events a wait answer carries


def read(run_id):
    rec = jobrecord.read_json(jobrecord.path(run_id, RUN))
    return rec if isinstance(rec, dict) else None


def run_of(meta):
    """The id of the run a job's record names as its own, or None."""
    run = (meta or {}).get("run")
    return run.get("id") if isinstance(run, dict) and isinstance(run.get("id"), str) else None


class HandOver(object):
    """The lock a stop of the run and its supervisor's start of an attempt take in turn, so a stop
    either lands before the start (and no attempt starts) or finds the started attempt recorded as
    the current one (and signals it). A lock file that cannot be made (a full disk that refuses
    even an inode) is no lock: the stop record is still looked at before every start."""

    def __init__(self, run_id: str) -> None:
        self.lock = jobrecord.Locked(jobrecord.path(run_id, RUN_LOCK))
        self.held = False

    def __enter__(self) -> "HandOver":
        try:
            self.lock.__enter__()
            self.held = True
        except (OSError, IOError):
            pass
        return self

    def __exit__(self, *_) -> None:
        if self.held:
            self.lock.__exit__()
            self.held = False


def stop(run_id: str, record: dict) -> str:
    """Record that `gpuops stop` ends the run (before any signal), and return the attempt to
    signal: the current one once no hand-over is half done."""
    with HandOver(run_id):
        jobrecord.write_json(jobrecord.path(run_id, RUN_STOP), record)
        return jobrecord.current(run_id)


def stop_asked(run_id: str, attempt_dir: object = None) -> object:
    """The run's stop record, or a stop of the attempt in `attempt_dir` (one signalled under a plan,
    gpuops.onbox.engines.box_stop), or None."""
    rec = jobrecord.read_json(jobrecord.path(run_id, RUN_STOP))
    if rec is None and os.path.exists(jobrecord.path(run_id, RUN_STOP)):
        rec = {}  # being written, or unreadable: a stop all the same
    if rec is None and attempt_dir and os.path.exists(os.path.join(attempt_dir, STOP)):
        rec = jobrecord.read_json(os.path.join(attempt_dir, STOP)) or {}
    return rec


def going(meta: dict) -> object:
    """The id of the run a job's record names, while that run goes on; else None."""
    run_id = run_of(meta)
    rec = read(run_id) if run_id else None
    return run_id if rec is not None and not ended(rec) else None


def supervisor_alive(rec):
    sup = rec.get("supervisor") or {}
    if not sup.get("pid") or (sup.get("boot_id") and sup["boot_id"] != procs.boot_id()):
        return False
    return procs.alive(sup["pid"], sup.get("start_ticks"))


def ended(rec):
    return rec.get("phase") == "ended" or not supervisor_alive(rec)


def phase(rec, attempt_phase):
    """The run's phase for a wait (gpuops.onbox.jobs.job_wait): ended once the run has; "starting"
    while an attempt has ended and the next is on its way; else the current attempt's."""
    if ended(rec):
        return "ended"
    return "starting" if attempt_phase == "ended" else attempt_phase


def facts(meta):
    """What status shows of the run a job's record belongs to, or None for a job of no run: the
    run's place and phase, this attempt's own resume checkpoint, and whether anything still
    supervises the run (`unsupervised`: its supervisor died before the run ended)."""
    run_id = run_of(meta)
    rec = read(run_id) if run_id else None
    if rec is None:
        return None
    last = runevents.last(jobrecord.job_dir(run_id))
    alive = supervisor_alive(rec)
    # the current attempt is the newest with a start record (as a run's id resolves): one being
    # handed over to is not yet, so the attempt before it stays the run's (RETRYING) until then
    return {"id": run_id, "attempt": (meta.get("run") or {}).get("attempt"), "current": jobrecord.current(run_id),
            "attempts": rec.get("attempt"), "max_attempts": rec.get("max_attempts"), "phase": rec.get("phase"),
            "ended": rec.get("phase") == "ended" or not alive, "next_at": rec.get("next_at"),
            "started_at": rec.get("started_at"), "ended_at": rec.get("ended_at"),
            "resumed_from": resumed_from(meta), "final": rec.get("final"),
            "unsupervised": rec.get("phase") != "ended" and not alive,
            "attempt_ids": list(rec.get("attempts") or [])[-ATTEMPTS_SHOWN:],
            "last_event": brief(last) if last else None, "failed": failed_attempts(rec),
            "activity": activity(rec) if meta.get("job_id") == rec.get("current") else None}


def activity(rec):
    """The phase the run's current attempt is in (training, saving checkpoint ...), while it runs;
    None between attempts, after the run, or when its supervisor is gone."""
    act = rec.get("activity")
    if not isinstance(act, dict) or rec.get("phase") != "running" or act.get("job") != rec.get("current"):
        return None
    if not supervisor_alive(rec):
        return None
    return dict((k, act.get(k)) for k in ("phase", "since", "step"))


ATTEMPTS_SHOWN = 101  # a run has at most retrypolicy.MAX_RETRIES + 1 attempts


def resumed_from(meta):
    """The checkpoint this attempt resumed from: its own record's (older records: its environment's)."""
    if "resumed_from" in meta:
        return meta["resumed_from"]
    return (meta.get("env") or {}).get(RESUME_ENV)


FAILED_SHOWN = 5


def failed_attempts(rec):
    """The run's attempts that failed, newest last (at most FAILED_SHOWN): what diagnose of the run
    says of them, each as its supervisor judged it when it ended."""
    keep = ("attempt", "job", "class", "why", "retry", "step")
    out = [dict((k, d.get(k)) for k in keep) for d in rec.get("decisions") or [] if isinstance(d, dict)]
    return out[-FAILED_SHOWN:]


def brief(event) -> dict:
    """An event as a status row carries it: its kind, time and one line of why."""
    keep = ("seq", "kind", "at", "attempt", "job", "why", "class", "checkpoint", "backoff_s")
    return dict((k, event[k]) for k in keep if k in event)


def events(run_id, after_seq=0, most=EVENTS_MAX):
    """The run's events after `after_seq`, oldest first, at most `most`: the oldest of them, so a
    reader that asks again after the last seq it got reads every event, none skipped."""
    return runevents.read(jobrecord.job_dir(run_id), after_seq)[:most]


def newest_seq(run_id: str) -> int:
    """The seq of the run's newest event; 0 before any."""
    last = runevents.last(jobrecord.job_dir(run_id))
    return last.get("seq") or 0 if isinstance(last, dict) else 0


def is_run(job_id):
    return os.path.exists(jobrecord.path(job_id, RUN))
