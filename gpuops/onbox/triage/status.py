"""A job's status, from the log's own terminal evidence first and the job's state second.

The procedure's table (seed 002), in this order:
    JOB SUMMARY, exit 0 / SUCCESS ......................... completed
    JOB SUMMARY, exit 130 or 143 (or CANCELLED) ............ cancelled
    JOB SUMMARY, any other exit ............................ failed
A gpuops job's exit record stands in for the summary (same rows; a record with neither a code nor
a signal says nothing, and the job's recorded state decides). Slurm's state CANCELLED is a cancel.

Without a summary, extended for the logs people have: the log's last *event* decides, not its last
line. Lines that are no event (a CUDA error's hints, a per-rank summary, a tracker's footer, the
remains of a progress bar, warnings) do not hide the event before them; an event after which
training went on for two or more steps (or two of a framework's progress lines that are no steps:
vLLM's stats, fairseq's train_inner), or before an elastic restart notice, did not end the run:
    a completion: a trainer's own end of training (frameworks.py: HF Trainer, Lightning, Megatron,
      Keras, fairseq, YOLO, submitit, ...), or the step lines reaching the run's total; a
      launcher's clean exit or W&B's footer only when no failure ended the run; a trainer that
      stopped itself on NaN is failed, however cleanly it exited ..................... completed
    a launcher's failure report (torchrun ChildFailedError / Root Cause, DeepSpeed / Accelerate
      return code, srun task exit), a crash the shell reported (core dumped, bash Killed), Slurm's
      oom_kill event, a harness stage FAILED, Slurm's DUE TO NODE FAILURE, or a failure line of
      the program (a traceback, a CUDA OOM, an NCCL watchdog tear-down, ...) that is not one
      of the soft signatures healthy runs print too (signatures.SOFT_SIGNATURES) ...... failed
    Slurm's `*** JOB|STEP ... CANCELLED AT ...` (DUE TO TIME LIMIT: class timeout; DUE TO
      PREEMPTION or JOB REQUEUE: class preempted), or a framework's own signal handling . cancelled
Then the procedure's rows on step progress (judged against `now`, never the file's mtime, with the
stall bar of gpuops.onbox.triage.steps; a gpuops job's step lines are dated by its supervisor's record,
as `status` dates them):
    steps advancing (a log without step lines: its last time is recent) ... running
    steps stalled, job alive (Slurm RUNNING, a live gpuops job) ........... hanging
    alive, but nothing dates the step lines ................................ running (cannot tell more)
    the job ended (its state says so) and nothing in the log says how ..... unknown   (class unknown-death)
    no state, and nothing in the log says the process ended ............... unknown   (no end in the log:
                                                                               no class; no death is claimed)
"""

from ... import states
from . import retrypolicy
from . import signatures as S

_SIGNAL_NUMBERS = {"SIGHUP": 1, "SIGINT": 2, "SIGABRT": 6, "SIGKILL": 9, "SIGSEGV": 11, "SIGTERM": 15}
# A gpuops job's recorded state, when its exit record holds neither a code nor a signal.
_RECORDED = {states.COMPLETED: "completed", states.FAILED: "failed", states.KILLED: "failed"}
_CANCEL_CLASSES = {"timeout": "cancelled", "preempted": "cancelled", "cancelled": "cancelled"}


def from_exit(code, word, signal=None) -> str:
    """The status table's rows for an ended job: 0 completed, 130/143 (SIGINT/SIGTERM) cancelled."""
    if code == 0 or (code is None and word == "SUCCESS"):
        return "completed"
    if code in S.CANCEL_EXITS or word == S.SLURM_CANCELLED or signal in ("SIGTERM", "SIGINT"):
        return "cancelled"
    return "failed"


# An attempt its run's supervisor ended (gpuops.onbox.run.runwatch), and the class it ended as.
SUPERVISOR_ENDS = {retrypolicy.STALL: "gpuops stopped it after --stall-after",
                   retrypolicy.MAX_RUNTIME: "gpuops stopped it at --max-runtime"}
SUPERVISOR_CLASS = {k: retrypolicy.failure_class({"ended_by": k})[0] for k in SUPERVISOR_ENDS}  # the run's own rule


def from_records(f, state, exit_record):
    """(status, what recorded the end) from the JOB SUMMARY or a gpuops exit record, or None."""
    if f.summary is not None:
        word, code = f.summary["word"], f.summary["exit"]
        ended_by = f"JOB SUMMARY: {f.summary['text'].decoded().strip()}"
        return from_exit(code if code is not None else (0 if word == "SUCCESS" else None), word), ended_by
    if exit_record:
        code, sig = exit_record.get("exit_code"), exit_record.get("signal")
        by = SUPERVISOR_ENDS.get(exit_record.get("ended_by"))
        if by:  # the run's own supervisor sent the signal: no cancel, a failure of the run
            return "failed", f"exit record: {by} ({sig or code})"
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
    """(status, the Occ that decided, its kind) from the log's last end event, or None when nothing
    in the log says the run ended. `v` is the verdict (classify._Verdict): its facts and its
    `terminal` / `last_hard` / `failed_after` rules. Kinds: report (a launcher, the shell, Slurm),
    error (a failure line of the program itself), done, cancel."""
    f = v.f
    marks = []

    def mark(occ, status, kind) -> None:
        if occ is not None and v.terminal([occ]) is not None:
            marks.append((occ.line, status, occ, kind))

    mark(f.end_report, "failed", "report")
    for name, status in _CANCEL_CLASSES.items():
        occ = v.terminal_of(name)
        if occ is not None and (name != "cancelled" or b"CANCELLED AT" in occ.text or occ.sig in S.FRAMEWORK_CANCEL):
            mark(occ, status, "cancel")
    node = v.terminal_of("node-fail")
    if node is not None and node.detail and node.detail.startswith("DUE TO"):
        mark(node, "failed", "report")
    for name in f.classes:
        if S.CLASS_BY_NAME[name].role in ("root", "cause"):
            mark(v.last_hard(name), "failed", "error")
    guard = v.last_hard("nan-divergence")  # a trainer's own NaN guard ended it, however cleanly
    if f.success is not None:
        failed = v.failed_after(f.success.line) or (guard is not None and v.terminal([guard]) is not None)
        mark(f.success, "failed" if failed else "completed", "done")
    if f.weak_success is not None and not v.failed_after(-1):
        mark(f.weak_success, "completed", "done")
    if f.last_step is not None and v.total and f.last_step >= v.total - 1 and not v.failed_after(f.last_step_occ.line):
        mark(f.last_step_occ, "completed", "done")  # the step lines reached the run's own total
    if not marks:
        return None
    _, status, occ, kind = max(marks, key=lambda m: m[0])
    return status, occ, kind
