"""The box's own supervisor as an engine, on the box (gpuops.onbox.engines.registry lists the interface;
its other half is gpuops.engines.box). The job is a process group under gpuops.onbox.run.wrapper,
which records its start and its end beside it; pause stops it once its checkpoint is written,
and resume starts it again as a child of the same command.
"""

import os
import time

from . import box_launch, box_stop
from ..host import evidence, jobrecord, signals
from ..host.jobrecord import CMD, EXIT, PAUSE, JobError

NAME = box_launch.NAME
POLL_S = 0.2
INHERITED = ("share_gpu",)  # a retry runs beside the jobs its parent was let share a GPU with
submit = box_launch.create
stop = box_stop.stop
chain = None


LIVE_SHOWN = 20  # pids of a job whose leader is gone named in its facts


def observe(out, jdir, meta, detail=True) -> None:
    """Liveness of the recorded process (same pid, start time and boot) and of its supervisor; for
    a leader gone without an exit record, the job's processes that still live (`live_pids`: its
    group, its descendants and what carries its GPUOPS_JOB_ID), so a job whose supervisor and
    leader were killed while its workers train on is not said to have vanished."""
    out["liveness"] = jobrecord.liveness(meta) if meta.get("pid") else "gone"
    out["pid_reused"] = box_stop.pid_reused(meta)
    out["wrapper_alive"] = box_stop.wrapper_alive(meta)
    if out["liveness"] == "gone" and out["wrapper_alive"]:
        box_stop.wait_exit_record(jdir, meta, box_stop.EXIT_SETTLE_S)
        out["wrapper_alive"] = box_stop.wrapper_alive(meta)
    if out["liveness"] == "gone" and not out["wrapper_alive"] and not os.path.exists(os.path.join(jdir, EXIT)):
        out["live_pids"] = sorted(box_stop.job_processes(meta.get("job_id"), meta))[:LIVE_SHOWN]


def paused(jdir):
    """A job that `gpuops pause` checkpointed and stopped, and nothing resumed yet."""
    rec = jobrecord.read_json(os.path.join(jdir, PAUSE)) or {}
    return bool(rec.get("stopped_at")) and not rec.get("resumed_at")


def phase(job_id, meta):
    jdir = jobrecord.job_dir(job_id)
    if os.path.exists(os.path.join(jdir, EXIT)):
        return "paused" if paused(jdir) else "ended"
    if meta.get("pid") and jobrecord.liveness(meta) == "alive":
        return "alive"
    return "ended"


def phase_of(facts):
    if facts.get("exit") is not None:
        pause = facts.get("pause") or {}
        return "paused" if pause.get("stopped_at") and not pause.get("resumed_at") else "ended"
    return "alive" if facts.get("liveness") == "alive" else "ended"


def stream_end(job_id, meta):
    if meta.get("pid") and jobrecord.liveness(meta) != "alive":
        time.sleep(1.0)  # the supervisor may be writing exit.json right now
        exit_rec = jobrecord.read_json(jobrecord.path(job_id, EXIT))
        if exit_rec is not None:
            return {"reason": "exited", "exit": exit_rec}
        return {"reason": "vanished"}
    return None


def check_retry(parent_id, parent, opts):
    if parent.get("pid") and jobrecord.liveness(parent) == "alive":
        raise JobError("refused", "job %s is still running; stop it first (retry never runs two copies)" % parent_id)


def retried(spec, parent, opts) -> None:
    pass


def before_pause(job_id, meta):
    if meta.get("pid") and jobrecord.liveness(meta) == "alive":
        return None
    if paused(jobrecord.job_dir(job_id)):
        return {"paused": True, "already": True, "marker": None}
    raise JobError("refused", "job %s is not running: nothing to pause" % job_id)


def default_signal(meta):
    return None


def send_checkpoint(job_id, meta, sig, number: int) -> None:
    targets = box_stop.job_processes(job_id, meta)
    if _shell_leads(job_id, meta):
        # The job's leader is the bash that runs its command line: the signal is for the programs
        # it started (bash would die of SIGUSR1 and end the job before any checkpoint).
        targets.pop(meta.get("pid"), None)
    for pid, ticks in targets.items():
        signals.send(pid, ticks, number)


def _shell_leads(job_id, meta):
    """Whether the supervisor started the job as `bash cmd` (a command line, or a script without
    a #! line) rather than as the script's own interpreter."""
    if meta.get("kind") != "script":
        return True
    try:
        with open(jobrecord.path(job_id, CMD), "rb") as f:
            return f.read(2) != b"#!"
    except (OSError, IOError):
        return True


def release(job_id, meta, opts):
    """Stop the checkpointed job (TERM, KILL after the grace); its record stays, as paused."""
    stopped = stop({"job": job_id, "yes": True, "grace": opts.get("grace")}, job_id, meta)
    rec = jobrecord.read_json(jobrecord.path(job_id, PAUSE)) or {}
    rec["stopped_at"] = time.time()
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    return bool(stopped.get("all_gone"))


def resume(job_id, meta, opts):
    if not paused(jobrecord.job_dir(job_id)):
        raise JobError("refused", "job %s is not paused" % job_id)
    return None


def diagnose_facts(ev, job_id, rec, facts) -> None:
    """The process's records against the box now: boot, liveness, OOM counter, kernel lines
    naming its pid, the log's tail."""
    meta = rec["meta"]
    ev.update({
        "pid": meta.get("pid"),
        "boot_id_then": meta.get("boot_id"),
        "oom_kills_at_launch": meta.get("oom_kills_at_launch"),
        "boot_changed": bool(meta.get("boot_id")) and meta.get("boot_id") != ev["boot_id_now"],
        "alive": rec["exit"] is None and jobrecord.liveness(meta) == "alive",
        "log_tail": evidence.tail(meta.get("log") or os.path.join(rec["dir"], jobrecord.LOG)),
    })
    evidence.with_kernel(ev, ev["since"], {ev["pid"]} if ev["pid"] else set())


def queue_cancel(job_id, meta) -> None:
    pass
