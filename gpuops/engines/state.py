"""A job's state, derived from its records and what the box saw just now; never guessed.

The states and what they mean are gpuops.states; the rule that picks one is the job's
engine's (gpuops.engines: the supervisor's exit record and liveness, Slurm's JobState ...). What
every engine shares is here: no start record yet and young -> STARTING (old -> VANISHED); a
RUNNING job is STALLED by the progress policy (gpuops.onbox.triage.steps); a paused job resumed as a
child says so.

Times are the box's clock (`now` comes from the box), so a skewed laptop clock cannot make a
job look stalled.
"""

from .. import engines
from ..onbox.triage import steps
from ..onbox.run.progress import SAVING
from ..jobs import curves
from ..jobs.rows import add_hint, code_hint, dated_progress, progress, since, step_time  # noqa: F401 (callers read them here)
from ..states import RETRYING, RUNNING, STALLED, STARTING, TERMINAL, UNREACHABLE, VANISHED

LAUNCH_GRACE_S = 60.0


def derive(facts, stall_factor=steps.STALL_STEPS, stall_min_s=steps.STALL_MIN_S):
    """One status row (dict) from the on-box facts of one job."""
    meta = facts.get("meta")
    now = facts.get("now")
    row = {"job_id": facts.get("job_id"), "state": None, "reason": None, "exit_code": None, "signal": None,
           "hint": None}
    if meta is None:
        young = facts.get("dir_age_s") is None or facts["dir_age_s"] < LAUNCH_GRACE_S
        row["state"] = STARTING if young else VANISHED
        if not young:
            row["reason"] = "the launch never wrote its start record (meta.json)"
        return row
    engine = engines.of(meta)
    row.update(
        engine=engine.name,
        name=meta.get("name"),
        labels=meta.get("labels") or {},
        pid=meta.get("pid"),
        key=meta.get("key"),
        parent_job_id=meta.get("parent_job_id"),
        command=meta.get("command"),
        launched_at=meta.get("launched_at"),
        age_s=since(now, meta.get("launched_at")),
        log_size=facts.get("log_size"),
    )
    row["progress"] = progress(facts, now)
    engine.decide(row, facts, meta)
    if row["state"] == RUNNING:
        _stall(row, stall_factor, stall_min_s)
    if facts.get("telemetry"):
        row["telemetry"] = facts["telemetry"]
    _curves(row, facts.get("trackers"))
    _run(row, facts.get("run"), now)
    return _resumed(row, facts)


UNSUPERVISED = ("unsupervised: retries, stall kill, time limit and retention are off (the run's gpuops "
                "supervisor died before the run ended)")


def _run(row, run, now):
    """A run's attempt: the row says which of how many, and the run's last event. The run's current
    attempt that ended while its run goes on is RETRYING (the run has not ended, so neither has a
    wait on it); an earlier attempt keeps the state it ended in, retried as the current one."""
    if not run:
        return
    current = run.get("current") or row["job_id"]
    row["run"] = {"id": run.get("id"), "attempt": run.get("attempt"), "of": run.get("max_attempts"),
                  "phase": run.get("phase"), "ended": bool(run.get("ended")), "last_event": run.get("last_event"),
                  "resumed_from": run.get("resumed_from"), "final": run.get("final"), "current": current,
                  "activity": run.get("activity"),
                  "current_attempt": run.get("attempts"), "attempts": run.get("attempt_ids") or [],
                  "unsupervised": bool(run.get("unsupervised")),
                  "duration_s": since(run.get("ended_at"), run.get("started_at"))}
    if row["state"] == STALLED and (run.get("activity") or {}).get("phase") == SAVING:
        # its supervisor sees the checkpoint directory change: a long save, not a hang
        row.update(state=RUNNING, reason="no progress line, but a checkpoint is being written (its supervisor "
                                         "sees the checkpoint directory change)")
    if run.get("unsupervised"):
        add_hint(row, UNSUPERVISED)
    if current != row["job_id"]:
        add_hint(row, f"retried: attempt {run.get('attempts')}/{run.get('max_attempts')} of run {run.get('id')} is "
                      f"{current}")
    elif row["state"] in TERMINAL and not run.get("ended"):
        ended = row["state"] + (f" ({row['signal']})" if row.get("signal") else
                                f" (exit {row['exit_code']})" if row.get("exit_code") else "")
        wait = since(run.get("next_at"), now) if run.get("phase") == "backoff" else None
        row["attempt_state"] = row["state"]
        row.update(state=RETRYING, reason=f"attempt {run.get('attempt')}/{run.get('max_attempts')} ended {ended}; " + (
            f"the next starts in {wait:.0f}s" if wait is not None else "its supervisor decides whether to retry"))


def _curves(row, record):
    """What the supervisor saw in the job's first minutes about where its curves go (U35, U39)."""
    found = curves.findings(record)
    if found:
        row["trackers"] = [{"id": f.id, "severity": f.severity, "gotcha": f.gotcha, "title": f.title} for f in found]
    note = curves.hint(record)
    if note:
        add_hint(row, note)


def _resumed(row, facts):
    child = (facts.get("pause") or {}).get("resumed_as")
    if child:
        add_hint(row, "paused, then resumed as %s" % child)
    return row


def _stall(row, factor, floor):
    p = row["progress"]
    if p["silent_s"] is None:
        return
    threshold = steps.stall_after(p["step_time_s"], factor, floor)
    p["stall_after_s"] = threshold
    if p["silent_s"] > threshold:
        row["state"] = STALLED
        basis = "step time %.2fs" % p["step_time_s"] if p["step_time_s"] else "step time unknown"
        row["reason"] = "no progress line for %.0fs (%s, threshold %.0fs)" % (p["silent_s"], basis, threshold)


def unreachable(job_id, error_message, last_seen=None):
    row = {"job_id": job_id, "state": UNREACHABLE, "reason": error_message, "exit_code": None, "signal": None,
           "hint": "the host did not answer; this says nothing about the job. Retry later."}
    if last_seen:
        row["last_seen"] = last_seen
    return row
