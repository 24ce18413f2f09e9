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
from ..jobs import curves, records
from ..jobs.records import JobFacts, Meta, PauseRecord, RunRecord
from ..jobs.rows import add_hint, code_hint, dated_progress, progress, since, step_time  # noqa: F401 (callers read them here)
from ..states import RETRYING, RUNNING, STALLED, STARTING, TERMINAL, UNREACHABLE, VANISHED

LAUNCH_GRACE_S = 60.0


def derive(facts: dict, stall_factor: float = steps.STALL_STEPS, stall_min_s: float = steps.STALL_MIN_S) -> dict:
    """One status row (dict) from the on-box facts of one job (checked: gpuops.engines.answers.facts)."""
    f = records.read(JobFacts, facts)
    now = f.now
    row: dict = {"job_id": f.job_id, "state": None, "reason": None, "exit_code": None, "signal": None, "hint": None}
    if f.meta is None:
        young = f.dir_age_s is None or f.dir_age_s < LAUNCH_GRACE_S
        row["state"] = STARTING if young else VANISHED
        if not young:
            row["reason"] = "the launch never wrote its start record (meta.json)"
        return row
    engine = engines.of_record(f.meta)
    meta = records.read(Meta, f.meta)
    row.update(
        engine=engine.name,
        name=meta.name,
        labels=meta.labels or {},
        pid=meta.pid,
        key=meta.key,
        parent_job_id=meta.parent_job_id,
        command=meta.command,
        launched_at=meta.launched_at,
        age_s=since(now, meta.launched_at),
        log_size=f.log_size,
    )
    row["progress"] = progress(facts, now)
    engine.decide(row, facts, f.meta)
    if row["state"] == RUNNING:
        _stall(row, stall_factor, stall_min_s, _policy_stall(f.meta))
    if f.telemetry:
        row["telemetry"] = f.telemetry
    _curves(row, f.trackers)
    _run(row, f.run, now)
    return _resumed(row, f)


UNSUPERVISED = ("unsupervised: retries, stall kill, time limit and retention are off (the run's gpuops "
                "supervisor died before the run ended)")


def _run(row: dict, record: dict | None, now: float | None) -> None:
    """A run's attempt: the row says which of how many, and the run's last event. The run's current
    attempt that ended while its run goes on is RETRYING (the run has not ended, so neither has a
    wait on it); an earlier attempt keeps the state it ended in, retried as the current one."""
    if not record:
        return
    run = records.read(RunRecord, record)
    current = run.current or row["job_id"]
    row["run"] = {"id": run.id, "attempt": run.attempt, "of": run.max_attempts, "phase": run.phase,
                  "ended": bool(run.ended), "last_event": run.last_event, "resumed_from": run.resumed_from,
                  "final": run.final, "current": current, "activity": run.activity,
                  "current_attempt": run.attempts, "attempts": run.attempt_ids or [],
                  "unsupervised": bool(run.unsupervised), "duration_s": since(run.ended_at, run.started_at)}
    if row["state"] == STALLED and records.read(records.Activity, run.activity).phase == SAVING:
        # its supervisor sees the checkpoint directory change: a long save, not a hang
        row.update(state=RUNNING, reason="no progress line, but a checkpoint is being written (its supervisor "
                                         "sees the checkpoint directory change)")
    if run.unsupervised:
        add_hint(row, UNSUPERVISED)
    if current != row["job_id"]:
        add_hint(row, f"retried: attempt {run.attempts}/{run.max_attempts} of run {run.id} is {current}")
    elif row["state"] in TERMINAL and not run.ended:
        ended = row["state"] + (f" ({row['signal']})" if row.get("signal") else
                                f" (exit {row['exit_code']})" if row.get("exit_code") else "")
        wait = since(run.next_at, now) if run.phase == "backoff" else None
        row["attempt_state"] = row["state"]
        row.update(state=RETRYING, reason=f"attempt {run.attempt}/{run.max_attempts} ended {ended}; " + (
            f"the next starts in {wait:.0f}s" if wait is not None else "its supervisor decides whether to retry"))


def _curves(row, record) -> None:
    """What the supervisor saw in the job's first minutes about where its curves go (U35, U39)."""
    found = curves.findings(record)
    if found:
        row["trackers"] = [{"id": f.id, "severity": f.severity, "gotcha": f.gotcha, "title": f.title} for f in found]
    note = curves.hint(record)
    if note:
        add_hint(row, note)


def _resumed(row: dict, facts: JobFacts) -> dict:
    child = records.read(PauseRecord, facts.pause).resumed_as
    if child:
        add_hint(row, "paused, then resumed as %s" % child)
    return row


def _policy_stall(meta: dict) -> float | None:
    """The run policy's stall_after_s, when the job's launch gave one: the supervisor stops the
    attempt then, so that is when it is stalled, not the status heuristic's threshold."""
    policy = meta.get("policy")
    after = policy.get("stall_after_s") if isinstance(policy, dict) else None
    return after if isinstance(after, (int, float)) and not isinstance(after, bool) and after > 0 else None


def _stall(row: dict, factor: float, floor: float, policy_after: float | None = None) -> None:
    p = row["progress"]
    if p["silent_s"] is None:
        return
    threshold = policy_after or steps.stall_after(p["step_time_s"], factor, floor)
    p["stall_after_s"] = threshold
    if p["silent_s"] > threshold:
        row["state"] = STALLED
        basis = ("the run's stall_after" if policy_after else "step time %.2fs" % p["step_time_s"]
                 if p["step_time_s"] else "step time unknown")
        row["reason"] = "no progress line for %.0fs (%s, threshold %.0fs)" % (p["silent_s"], basis, threshold)


def unreachable(job_id, error_message, last_seen=None):
    row = {"job_id": job_id, "state": UNREACHABLE, "reason": error_message, "exit_code": None, "signal": None,
           "hint": "the host did not answer; this says nothing about the job. Retry later."}
    if last_seen:
        row["last_seen"] = last_seen
    return row
