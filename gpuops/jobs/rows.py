"""What every engine's state rule shares (pure): a job's progress from the lines the box found,
its seconds per step, what an exit code says of a signal, and how a run's supervisor ended an
attempt."""

import signal

from ..onbox.triage import steps
from ..onbox.triage.retrypolicy import MAX_RUNTIME, STALL
from . import records
from .records import ExitRecord, FailedAttempt
from ..states import TIMEOUT


def run_tag(run) -> str:
    """' [attempt 2/4 of run R, resumed from /ckpt/step-40]': a run's attempt, as summaries end."""
    resumed = f", resumed from {run['resumed_from']}" if run.get("resumed_from") else ""
    return f" [attempt {run.get('attempt')}/{run.get('of')} of run {run.get('id')}{resumed}]"


def earlier_attempts(failed: list | None, job_id: str) -> list[str]:
    """Evidence lines for a run's attempts other than `job_id` that failed, as their supervisor
    judged each when it ended, in words first and the class after: 'run: attempt 1 (J) ended at step 25:
    no progress for the --stall-after limit: gpuops stopped it (class hang); retried'."""
    lines = []
    for entry in failed or []:
        f = records.read(FailedAttempt, entry)
        if f.job == job_id or not f.class_:
            continue
        step = f" at step {f.step}" if f.step is not None else ""
        lines.append(f"run: attempt {f.attempt} ({f.job}) ended{step}: {f.why} (class {f.class_}); "
                     + ("retried" if f.retry else "not retried"))
    return lines


def since(now, then):
    if now is None or then is None:
        return None
    return max(0.0, float(now) - float(then))


# What a shell's own exit codes mean (POSIX: 127 the command was not found, 126 it could not run).
SHELL_CODES = {127: "exit 127 = command not found: the shell could not find the program the job runs",
               126: "exit 126 = not executable: the program was found but could not run (permission denied, "
                    "or not a program)"}


def code_hint(code):
    """'exit 137 = 128+SIGKILL …' for codes a shell uses to report a child killed by a signal, and
    the words for the shell's own 126 and 127."""
    if code in SHELL_CODES:
        return SHELL_CODES[code]
    if code is None or not 128 < code < 128 + 65:
        return None
    try:
        name = signal.Signals(code - 128).name
    except ValueError:
        return None
    extra = " (often the OOM killer)" if name == "SIGKILL" else ""
    return "exit %d = 128+%s: a process inside the job was killed by %s%s" % (code, name, name, extra)


def progress(facts, now):
    """{last, step_time_s, silent_s} from the progress lines the box found in the job's log."""
    found = facts.get("progress") or {}
    events = found.get("events") or []
    out = {"last": None, "step_time_s": None, "silent_s": None}
    if found.get("regex_error"):
        out["regex_error"] = found["regex_error"]
    if not events:
        return out
    last = events[-1]
    at = last.get("at")
    if at is None and facts.get("log_size") is not None and last.get("end", 0) >= facts["log_size"] - 1:
        at = facts.get("log_mtime")  # the progress line is the log's last line: mtime is its time
    out["last"] = {"step": last.get("step"), "text": last.get("text"), "at": at}
    out["step_time_s"] = step_time(events, found.get("first_step"))
    out["silent_s"] = since(now, at)
    return out


def dated_progress(row):
    """{"at", "step_time_s"} of a row's last progress line, as the stall rule reads them, for a
    verb that judges the same job from its log (triage, diagnose); None when nothing dates it."""
    p = (row or {}).get("progress") or {}
    last = p.get("last") or {}
    if last.get("at") is None:
        return None
    return {"at": last["at"], "step_time_s": p.get("step_time_s")}


def step_time(events, first_step=None):
    """Seconds per step of on-box progress events (dicts with step, seconds, at)."""
    return steps.step_time(((e.get("step"), e.get("seconds"), e.get("at")) for e in events), first_step)


def add_hint(row, note) -> None:
    row["hint"] = (row["hint"] + "; " + note) if row.get("hint") else note


def ended_by_supervisor(row: dict, rec: ExitRecord) -> None:
    """An attempt of a run its supervisor ended (gpuops.onbox.run.runwatch), on any engine that runs
    one: at the run's time limit (TIMEOUT), or after a stall (its state as it ended, the class in
    its reason)."""
    if rec.ended_by == MAX_RUNTIME:
        row.update(state=TIMEOUT, reason="the run reached its --max-runtime: gpuops stopped it (SIGTERM, SIGKILL "
                                         "after the grace); never retried")
    elif rec.ended_by == STALL:
        saved = rec.stall_evidence
        row["reason"] = "stalled (class hang): no progress line for --stall-after, so gpuops stopped it" + (
            f"; evidence in {saved}" if saved else "")
