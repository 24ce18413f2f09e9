"""A job's status, from the log's own terminal evidence first and the job's state second.

The procedure's table (seed 002), in this order:
    JOB SUMMARY, exit 0 / SUCCESS ......................... completed
    JOB SUMMARY, exit 130 or 143 (or CANCELLED) ............ cancelled
    JOB SUMMARY, any other exit ............................ failed
A gpuops job's exit record stands in for the summary (same rows; a record with neither a code nor
a signal says nothing, and the job's recorded state decides). Slurm's state CANCELLED is a cancel.

Without a summary, extended for the logs people have: the last piece of terminal evidence in the
log decides, unless training went on for two or more steps after it (an error the run survived,
an elastic restart):
    a trainer's completion marker (HF Trainer, Lightning max_steps/max_epochs; DeepSpeed's `exits
      successfully` and W&B's run summary only when no failure ended the run) ........ completed
    a launcher's failure report (torchrun ChildFailedError / Root Cause, DeepSpeed / Accelerate
      return code, srun task exit), a crash the shell reported (core dumped, bash Killed), Slurm's
      oom_kill event, a harness stage FAILED, Slurm's DUE TO NODE FAILURE, or a traceback the
      log ends in (nothing but its own lines after it) .............................. failed
    Slurm's `*** JOB|STEP ... CANCELLED AT ...` (DUE TO TIME LIMIT: class timeout; DUE TO
      PREEMPTION or JOB REQUEUE: class preempted) ................................... cancelled
Then the procedure's rows on step progress (judged against `now`, never the file's mtime, with the
stall bar of gpuops.onbox.steps):
    steps advancing ........................................ running
    steps stalled, job alive (Slurm RUNNING) ............... hanging
    steps stalled, job ended or state unknown .............. unknown   (class unknown-death)
"""

from ..jobs import states
from . import signatures as S

_SIGNAL_NUMBERS = {"SIGHUP": 1, "SIGINT": 2, "SIGABRT": 6, "SIGKILL": 9, "SIGSEGV": 11, "SIGTERM": 15}
# A gpuops job's recorded state, when its exit record holds neither a code nor a signal.
_RECORDED = {states.COMPLETED: "completed", states.FAILED: "failed", states.KILLED: "failed"}
_CANCEL_CLASSES = {"timeout": "cancelled", "preempted": "cancelled", "cancelled": "cancelled"}


def from_exit(code, word, signal=None):
    """The status table's rows for an ended job: 0 completed, 130/143 (SIGINT/SIGTERM) cancelled."""
    if code == 0 or (code is None and word == "SUCCESS"):
        return "completed"
    if code in S.CANCEL_EXITS or word == S.SLURM_CANCELLED or signal in ("SIGTERM", "SIGINT"):
        return "cancelled"
    return "failed"


def from_records(f, state, exit_record):
    """(status, what recorded the end) from the JOB SUMMARY or a gpuops exit record, or None."""
    if f.summary is not None:
        word, code = f.summary["word"], f.summary["exit"]
        ended_by = f"JOB SUMMARY: {f.summary['text'].decoded().strip()}"
        return from_exit(code if code is not None else (0 if word == "SUCCESS" else None), word), ended_by
    if exit_record:
        code, sig = exit_record.get("exit_code"), exit_record.get("signal")
        if code is None and sig in _SIGNAL_NUMBERS:
            code = 128 + _SIGNAL_NUMBERS[sig]
        if code is not None or sig:
            return from_exit(code, None, sig), f"exit record: exit {code}" + (f" ({sig})" if sig else "")
        if state in _RECORDED:
            return _RECORDED[state], f"job state {state} (its exit record holds no code)"
    if state == S.SLURM_CANCELLED:
        return "cancelled", f"Slurm state {S.SLURM_CANCELLED}"
    return None


def from_log(v):
    """(status, the Occ that decided) from the log's last terminal evidence, or None.
    `v` is the verdict (classify._Verdict): its facts and its `terminal` / `failed_after` rules."""
    f = v.f
    marks = []
    if f.end_report is not None and v.terminal([f.end_report]) is not None:
        marks.append((f.end_report.line, "failed", f.end_report))
    for name, status in _CANCEL_CLASSES.items():
        occ = v.terminal_of(name)
        if occ is not None and (name != "cancelled" or b"CANCELLED AT" in occ.text):
            marks.append((occ.line, status, occ))
    node = v.terminal_of("node-fail")
    if node is not None and node.detail and node.detail.startswith("DUE TO"):
        marks.append((node.line, "failed", node))
    tb = v.terminal_of("python-exception")
    last_tb = f.classes["python-exception"].all()[-1] if tb is not None else None
    if last_tb is not None and f.lines - last_tb.line <= S.TRACEBACK_SPAN and v.terminal([last_tb]) is not None:
        marks.append((last_tb.line, "failed", last_tb))
    if f.success is not None and v.terminal([f.success]) is not None:
        marks.append((f.success.line, "failed" if v.failed_after(f.success.line) else "completed", f.success))
    weak = f.weak_success
    if weak is not None and v.terminal([weak]) is not None and not v.failed_after(-1):
        marks.append((weak.line, "completed", weak))
    if not marks:
        return None
    line, status, occ = max(marks, key=lambda m: m[0])
    return status, occ
