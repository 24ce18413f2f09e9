"""A run's record on the box: the attempts of one job under a run policy, kept by the supervisor
that runs them all (gpuops.onbox.runloop), and read by every job action that is given the run's id.

    <jobs_dir>/<run id>/        the first attempt's directory: the run's id is that job's id
        run.json       {run_id, policy, attempts: [job ids], current, attempt, max_attempts,
                        phase: running | backoff | ended, started_at, next_at, ended_at,
                        resumed_from, final: {class, why, job}, supervisor: {pid, start_ticks, boot_id},
                        activity: {phase, since, job, step}: the phase its attempt `job` is in, as
                        its watch judged it (gpuops.onbox.progress.PHASES)}
        events.jsonl   what the supervisor decided and saw (gpuops.onbox.runevents)
    Each attempt is a job of its own (meta.json, log, exit.json, telemetry.jsonl) whose meta.json
    names its run, run: {id, attempt}; an attempt's parent_job_id is the attempt before it.

The run has ended when its record says so, or when its supervisor is gone (a reboot, a kill): then
nothing will start another attempt, and the last attempt's state is the run's.
"""

import os

from . import jobrecord, procs, runevents
from .jobrecord import RUN

PHASES = ("running", "backoff", "ended")
EVENTS_MAX = 50  # events a wait answer carries


def read(run_id):
    rec = jobrecord.read_json(jobrecord.path(run_id, RUN))
    return rec if isinstance(rec, dict) else None


def write(run_id, rec):
    jobrecord.write_json(jobrecord.path(run_id, RUN), rec)


def run_of(meta):
    """The id of the run a job's record names as its own, or None."""
    run = (meta or {}).get("run")
    return run.get("id") if isinstance(run, dict) and isinstance(run.get("id"), str) else None


def supervisor_alive(rec):
    sup = rec.get("supervisor") or {}
    if not sup.get("pid") or (sup.get("boot_id") and sup["boot_id"] != procs.boot_id()):
        return False
    return procs.alive(sup["pid"], sup.get("start_ticks"))


def ended(rec):
    return rec.get("phase") == "ended" or not supervisor_alive(rec)


def phase(rec, attempt_phase):
    """The run's phase for a wait (gpuops.onbox.job_wait): ended once the run has; "starting"
    while an attempt has ended and the next is on its way; else the current attempt's."""
    if ended(rec):
        return "ended"
    return "starting" if attempt_phase == "ended" else attempt_phase


def facts(meta):
    """What status shows of the run a job's record belongs to, or None for a job of no run."""
    run_id = run_of(meta)
    rec = read(run_id) if run_id else None
    if rec is None:
        return None
    last = runevents.last(jobrecord.job_dir(run_id))
    return {"id": run_id, "attempt": (meta.get("run") or {}).get("attempt"), "current": rec.get("current"),
            "attempts": rec.get("attempt"), "max_attempts": rec.get("max_attempts"), "phase": rec.get("phase"),
            "ended": ended(rec), "next_at": rec.get("next_at"), "started_at": rec.get("started_at"),
            "resumed_from": rec.get("resumed_from"), "final": rec.get("final"),
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


FAILED_SHOWN = 5


def failed_attempts(rec):
    """The run's attempts that failed, newest last (at most FAILED_SHOWN): what diagnose of the run
    says of them, each as its supervisor judged it when it ended."""
    keep = ("attempt", "job", "class", "why", "retry", "step")
    out = [dict((k, d.get(k)) for k in keep) for d in rec.get("decisions") or [] if isinstance(d, dict)]
    return out[-FAILED_SHOWN:]


def brief(event):
    """An event as a status row carries it: its kind, time and one line of why."""
    keep = ("seq", "kind", "at", "attempt", "job", "why", "class", "checkpoint", "backoff_s")
    return dict((k, event[k]) for k in keep if k in event)


def events(run_id, after_seq=0, most=EVENTS_MAX):
    """The run's events after `after_seq`, oldest first, at most `most` (the newest)."""
    found = runevents.read(jobrecord.job_dir(run_id), after_seq)
    return found[-most:]


def is_run(job_id):
    return os.path.exists(jobrecord.path(job_id, RUN))
