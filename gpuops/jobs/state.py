"""A job's state, derived from its records and what the box saw just now; never guessed.

The states and what they mean are gpuops.jobs.states; the rules that pick one are here:
no start record yet and young -> STARTING (old -> VANISHED); an exit record decides COMPLETED,
FAILED or KILLED, unless `gpuops pause` stopped the job (PAUSED until resumed); a changed boot_id
or a dead process without an exit record is VANISHED; a live process is RUNNING, or STALLED by
the progress policy (gpuops.onbox.steps). A Slurm job's state is the scheduler's
(gpuops.jobs.slurmstate), and a running one is STALLED by the same policy.

Times are the box's clock (`now` comes from the box), so a skewed laptop clock cannot make a
job look stalled.
"""

import signal

from ..onbox import steps
from ..onbox.jobrecord import SLURM
from . import slurmstate
from .states import COMPLETED, FAILED, KILLED, PAUSED, RUNNING, STALLED, STARTING, UNREACHABLE, VANISHED

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
    row.update(
        engine=meta.get("engine") or "box",
        name=meta.get("name"),
        labels=meta.get("labels") or {},
        pid=meta.get("pid"),
        key=meta.get("key"),
        parent_job_id=meta.get("parent_job_id"),
        command=meta.get("command"),
        launched_at=meta.get("launched_at"),
        age_s=_since(now, meta.get("launched_at")),
        log_size=facts.get("log_size"),
    )
    row["progress"] = progress(facts, now)
    if meta.get("engine") == SLURM:
        return _scheduled(row, facts, meta, stall_factor, stall_min_s)
    exit_rec = facts.get("exit")
    if exit_rec is not None and _paused(facts):
        row.update(state=PAUSED, reason="paused by gpuops: checkpointed and stopped; `gpuops resume` starts it "
                                        "again from its checkpoint")
    elif exit_rec is not None:
        _from_exit(row, exit_rec, meta, facts.get("survivors_alive") or [])
    elif facts.get("liveness") == "rebooted":
        row.update(state=VANISHED, reason="the box rebooted since launch (boot_id changed)")
    elif facts.get("liveness") == "alive":
        row["state"] = RUNNING
        _stall(row, stall_factor, stall_min_s)
        if facts.get("wrapper_alive") is False:
            row["hint"] = "the gpuops supervisor of this job is gone: its exit will not be recorded"
    else:
        row.update(state=VANISHED, reason=_vanish_reason(facts))
    return _resumed(row, facts)


def _resumed(row, facts):
    child = (facts.get("pause") or {}).get("resumed_as")
    if child:
        note = "paused, then resumed as %s" % child
        row["hint"] = (row["hint"] + "; " + note) if row.get("hint") else note
    return row


def _paused(facts):
    rec = facts.get("pause") or {}
    return bool(rec.get("stopped_at")) and not rec.get("resumed_at")


def _scheduled(row, facts, meta, stall_factor, stall_min_s):
    """A Slurm job's row: the scheduler decides the state; a running one can still be STALLED."""
    row.update(slurmstate.decide(facts, meta.get("resources") or {}), slurm_job_id=meta.get("slurm_job_id"))
    if row["state"] == FAILED:
        row["hint"] = code_hint(row["exit_code"])
    elif row["state"] == RUNNING:
        _stall(row, stall_factor, stall_min_s)
    if (facts.get("exit") or {}).get("ended_at") is not None:
        row["ended_at"] = facts["exit"]["ended_at"]
    return row


def _from_exit(row, rec, meta, survivors):
    row["ended_at"] = rec.get("ended_at")
    row["duration_s"] = _since(rec.get("ended_at"), meta.get("launched_at"))
    if rec.get("signal"):
        row.update(state=KILLED, signal=rec["signal"])
    elif rec.get("exit_code") == 0:
        row.update(state=COMPLETED, exit_code=0)
    elif rec.get("exit_code") is not None:
        row.update(state=FAILED, exit_code=rec["exit_code"], hint=code_hint(rec["exit_code"]))
    else:
        row.update(state=VANISHED, reason=rec.get("error") or "the exit record holds neither a code nor a signal")
    if rec.get("error") and row["state"] == FAILED:
        row["reason"] = rec["error"]
    if survivors:
        row["survivors"] = survivors
        note = "%d process(es) of the job's group outlived it (pids %s): gpuops stop --job %s" % (
            len(survivors), ", ".join(map(str, survivors)), row["job_id"])
        row["hint"] = (row["hint"] + "; " + note) if row.get("hint") else note


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


def _vanish_reason(facts):
    if facts.get("pid_reused"):
        return "the recorded pid now belongs to another process (pid reused); the job ended unrecorded"
    if facts.get("stop"):
        return "stopped by `gpuops stop`, but its supervisor did not record the exit"
    if facts.get("wrapper_alive") is False:
        return "the process and its gpuops supervisor are gone without an exit record (killed, OOM?)"
    lost = (facts.get("meta") or {}).get("supervisor_lost")
    if lost:  # recorded by the launcher (gpuops.onbox.wrapper), which found the job running without it
        return f"{lost}, and the job has ended unrecorded"
    return "the process is gone and no exit record was written"


def _since(now, then):
    if now is None or then is None:
        return None
    return max(0.0, float(now) - float(then))


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
    out["silent_s"] = _since(now, at)
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
