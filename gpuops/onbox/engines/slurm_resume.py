"""A run policy under Slurm: what a gpuops Slurm job's batch script runs each time the job starts,
Slurm's requeues (a preemption, a node failure, `scontrol requeue`) being the retries. Entry:
main([SLURM_RESTART_COUNT]), shipped into the job's record directory as resume.py by the
submission (gpuops.engines.slurm's with_policy): a compute node has nothing else of gpuops.

Each start is recorded as an event (gpuops.onbox.run.runevents, events.jsonl in the job directory)
and said in the job's log (stderr, which Slurm appends to it). A start after a requeue
  * counts against --max-retries unless `gpuops pause` requeued the job (a pause is no failure);
    past the cap it runs nothing (exit RETRIES_SPENT: the job ends FAILED, its reason says why);
  * with --max-runtime, runs nothing once the whole run's time is spent (exit RUNTIME_SPENT, the
    job is reported TIMEOUT), else lowers the job's Slurm time limit to what is left of it;
  * with --checkpoint-dir, resumes from the newest complete checkpoint (gpuops.onbox.run.checkpoints:
    two looks; names with control characters or `..` are skipped, each with an event): its path
    is printed for GPUOPS_RESUME_FROM, and with a --resume-arg a command line is rewritten as
    resume.sh (the immutable cmd with the quoted resume words at its end), a script's extra
    arguments as resume.args (NUL-separated, for bash's mapfile -d '').

`run_facts` is what status shows of such a job's attempts (gpuops.onbox.engines.slurm_engine.observe).
"""

import math
import os
import subprocess
import sys
import time

from ..run import checkpoints, runevents, boxpolicy, runrecord
from ..host import jobrecord
from . import slurm
from ..host.jobrecord import CMD, META, PAUSE

RESUME_SH, RESUME_ARGS = "resume.sh", "resume.args"
RETRIES_SPENT, RUNTIME_SPENT = 3, 4
STARTS = ("attempt-started", "resumed")  # the events of a start that ran the command
ENDS = {"gave-up": RETRIES_SPENT, "timed-out": RUNTIME_SPENT}


def _say(text: str) -> None:
    sys.stderr.write("[gpuops] %s\n" % text)
    sys.stderr.flush()


def retries_used(restart, last_start, pause):
    """The retries this start makes: one more than the start before it for a requeue by the
    scheduler, none for a start after `gpuops pause` requeued and held the job after that start,
    none for the first start. Without a record of the start before (a lost events file), every
    requeue counts."""
    if restart <= 0:
        return 0
    if last_start is None:
        return restart
    before = int(last_start.get("retry") or 0)
    held = (pause or {}).get("held_at")
    paused = isinstance(held, (int, float)) and held >= (last_start.get("at") or 0)
    return before if paused else before + 1


def decide(restart, policy, starts, pause, now):
    """What this start does: {attempt, retry, end: None | 'gave-up' | 'timed-out', why,
    time_left_s (None: no --max-runtime)}. `starts`: the start events recorded before it."""
    limit = int(policy.get("max_retries") or 0)
    retry = retries_used(restart, starts[-1] if starts else None, pause)
    out = {"attempt": retry + 1, "retry": retry, "end": None, "why": None, "time_left_s": None}
    if retry > limit:
        out.update(end="gave-up", why="Slurm requeued the job: retry %d is more than --max-retries %d; not "
                                      "running it again" % (retry, limit))
        return out
    budget = policy.get("max_runtime_s")
    if budget:
        first = starts[0].get("at") if starts else None
        left = float(budget) - (now - first) if restart > 0 and first else float(budget)
        out["time_left_s"] = left
        if left <= 0:
            out.update(end="timed-out", why="the run's --max-runtime of %gs was spent before Slurm requeued it; "
                                            "not running it again" % budget)
    return out


def slurm_minutes(seconds):
    """A Slurm time limit in minutes (it counts whole ones) that holds `seconds`."""
    return max(1, int(math.ceil(seconds / 60.0)))


def _lower_time_limit(seconds) -> None:
    job = os.environ.get("SLURM_JOB_ID", "")
    if not job.isdigit():
        return
    minutes = slurm_minutes(seconds)
    try:
        done = subprocess.run(["scontrol", "update", "JobId=%s" % job, "TimeLimit=%d" % minutes],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        said = done.stderr.decode("utf-8", "replace").strip() if done.returncode else None
    except (OSError, subprocess.SubprocessError) as e:
        said = str(e)
    if said:
        _say("could not lower the job's time limit to the %d minutes left of --max-runtime (%s); Slurm's "
             "--time still bounds this run" % (minutes, said[-200:]))
    else:
        _say("time limit lowered to %d minutes: what is left of the run's --max-runtime" % minutes)


def _resume_from(meta, policy, events, attempt, failed):
    """The newest complete checkpoint's path (None: none yet), passing over those `failed` (names
    an attempt failed to load)."""
    verdict = checkpoints.newest_complete(policy["checkpoint_dir"], policy.get("checkpoint_glob"), failed=failed)
    for e in verdict["unsafe"][:20]:
        why = "skipped checkpoint %r: %s" % (e["name"], e["why"])
        _say(why)
        events.emit("checkpoint-skipped", attempt=attempt, job=meta.get("job_id"), why=why)
    return verdict["path"]


def _write_resumed(jdir, meta, policy, path) -> None:
    """The command resumed from `path` (None: a fresh start) written beside cmd, where it differs:
    a --resume-arg added, or the command's {checkpoint} filled in."""
    with open(os.path.join(jdir, CMD), "rb") as f:
        body = f.read()
    kind, args = meta.get("kind"), list(meta.get("args") or [])
    new_body, new_args, _ = boxpolicy.resumed(kind, body, args, meta.get("command"), policy.get("resume_arg"), path)
    if kind == "script" and new_args != args:
        extra = "".join(a + "\0" for a in new_args[len(args):])
        jobrecord.atomic_write(os.path.join(jdir, RESUME_ARGS), extra.encode("utf-8"))
    elif new_body != body:
        jobrecord.atomic_write(os.path.join(jdir, RESUME_SH), new_body, 0o500)


def main(argv):
    restart = int(argv[0]) if argv and argv[0].isdigit() else 0
    jdir = os.environ.get("GPUOPS_JOB_DIR") or os.getcwd()
    meta = jobrecord.read_json(os.path.join(jdir, META)) or {}
    policy = meta.get("policy") or {}
    job = meta.get("job_id")
    for stale in (RESUME_SH, RESUME_ARGS):
        if os.path.exists(os.path.join(jdir, stale)):
            os.unlink(os.path.join(jdir, stale))
    events = runevents.Events(jdir, run=job)
    starts = own_starts(runevents.read(jdir))
    d = decide(restart, policy, starts, jobrecord.read_json(os.path.join(jdir, PAUSE)), time.time())
    common = dict(attempt=d["attempt"], job=job, restart=restart, retry=d["retry"])
    if d["end"]:
        _say(d["why"])
        events.emit(d["end"], why=d["why"], **common)
        return ENDS[d["end"]]
    if restart > 0 and d["time_left_s"] is not None:
        _lower_time_limit(d["time_left_s"])
    path = None
    if restart > 0 and policy.get("checkpoint_dir"):
        path = _resume_from(meta, policy, events, d["attempt"], failed_checkpoints(runevents.read(jdir)))
    if policy.get("checkpoint_dir"):
        _write_resumed(jdir, meta, policy, path)
    said = "attempt %d of at most %d" % (d["attempt"], int(policy.get("max_retries") or 0) + 1)
    if restart > 0:
        said = "requeued by Slurm (restart %d): %s" % (restart, said)
    if path:
        _say("%s resumes from checkpoint %s (the newest complete one)" % (said, path))
        events.emit("resumed", checkpoint=path, why="resumes from the newest complete checkpoint", **common)
        sys.stdout.write(path + "\n")
        return 0
    if restart > 0 and policy.get("checkpoint_dir"):
        _say("%s: no complete checkpoint in %s, from the beginning" % (said, policy["checkpoint_dir"]))
    elif restart > 0:
        _say("%s, from the beginning (no --checkpoint-dir)" % said)
    events.emit("attempt-started", **common)
    return 0


def own_starts(events) -> list:
    """The starts this helper recorded, oldest first: the watcher's attempt-started events
    (gpuops.onbox.engines.slurm_watch) carry no restart count, and count no retry."""
    return [e for e in events if e.get("kind") in STARTS and "restart" in e]


def failed_checkpoints(events) -> list:
    """The names of the checkpoints an attempt failed to load (the watcher's checkpoint-fallback
    events: gpuops.onbox.run.runloop), oldest first: never resumed from again."""
    return [os.path.basename(str(e.get("checkpoint"))) for e in events
            if e.get("kind") == "checkpoint-fallback" and e.get("checkpoint")]


def last_start(jdir):
    """The start this helper recorded last (the watcher's attempt and checkpoint), or None."""
    starts = own_starts(runevents.read(jdir))
    return starts[-1] if starts else None


def run_facts(job_id, jdir, meta, scheduler):
    """What status shows of a Slurm job's attempts under a run policy (the shape of gpuops.onbox.
    runrecord.facts), from the events its starts recorded and what the scheduler says; None for a
    job without a policy."""
    policy = meta.get("policy")
    if not isinstance(policy, dict):
        return None
    events = runevents.read(jdir)
    starts = own_starts(events)
    last = events[-1] if events else None
    since = [e for e in events if e.get("seq", 0) > (starts[-1].get("seq", 0) if starts else 0)]
    ends = [e for e in since if e.get("kind") in ENDS]  # this start's, or the watcher's after it
    final = None
    if ends:
        end = ends[-1]
        final = {"class": end["kind"], "why": end.get("why"), "job": job_id, "attempt": end.get("attempt")}
    attempt = (starts[-1] if starts else {}).get("attempt") or 1  # the last that ran: a refused one did not
    ended = slurm.phase_of(scheduler or {}) == "ended"
    resumed = starts[-1].get("checkpoint") if starts and starts[-1].get("kind") == "resumed" else None
    return {"id": job_id, "attempt": attempt, "current": job_id, "attempts": attempt,
            "max_attempts": int(policy.get("max_retries") or 0) + 1, "phase": "ended" if ended else "running",
            "ended": ended, "next_at": None, "started_at": starts[0].get("at") if starts else None,
            "resumed_from": resumed, "final": final, "last_event": runrecord.brief(last) if last else None}
