"""On-box `pause` and `resume`, for both engines. Entry: main(argv).

Pause sends the job its checkpoint signal, waits until the job shows its checkpoint is written
(a line matching `marker_regex` in its log after the signal, or `marker_file` appearing or
changing), and only then gives its resources back: a Slurm job is requeued and held (gpuops.
onbox.slurm_control), a supervised job is stopped (TERM, KILL after the grace; gpuops.onbox.
job_stop) and its record kept as paused. Without the marker by the timeout nothing is stopped.
Resume releases the held Slurm job (same Slurm job, restarted from its script, which finds the
checkpoint), or starts a supervised job again as a child with `resume_arg` appended.
pause.json records each step.
"""

import os
import re
import signal
import time

from . import job_facts, job_launch, job_stop, job_wait, jobrecord, signals, slurm_control
from .jobrecord import LOG, META, PAUSE, JobError

POLL_S = 0.2


def marker_waiter(job_id, opts, since):
    """wait(offset) -> what showed the checkpoint ({"log": line} or {"file": path}), or None at
    the timeout or when the job ended first."""
    try:
        pattern = re.compile(opts["marker_regex"]) if opts.get("marker_regex") else None
    except re.error as e:
        raise JobError("usage", "checkpoint regex: %s" % e)
    path = os.path.expanduser(opts["marker_file"]) if opts.get("marker_file") else None
    if pattern is None and path is None:
        raise JobError("usage", "pause needs a checkpoint marker: a log regex or a file the job writes")

    def wait(offset):
        deadline = time.time() + float(opts.get("timeout") or 300)
        scan = job_wait.Scan(jobrecord.path(job_id, LOG), offset, pattern) if pattern else None
        asked = time.time()
        while True:
            if scan is not None:
                hit = scan.run(False, deadline)
                if hit:
                    return {"log": hit[1].decode("utf-8", "replace")[:1000], "offset": hit[0]}
            if path:
                try:
                    if os.stat(path).st_mtime >= since - 1:
                        return {"file": path}
                except OSError:
                    pass
            if time.time() >= deadline:
                return None
            if time.time() - asked >= job_wait.SCHEDULER_POLL_S:  # a job that died first writes no marker
                if job_wait.phase(job_id) == "ended":
                    return None
                asked = time.time()
            time.sleep(POLL_S)

    return wait


def pause(opts):
    job_id = jobrecord.resolve(opts.get("job"))
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    since = time.time()
    wait = marker_waiter(job_id, opts, since)
    scheduled = jobrecord.engine(meta) == jobrecord.SLURM
    done = slurm_control.before_pause(job_id, meta) if scheduled else _before_supervised(job_id, meta)
    if done is None:
        done = _checkpoint(opts, job_id, meta, wait, scheduled)
    done.update(job_id=job_id, engine=jobrecord.engine(meta), after=job_facts.facts(job_id))
    return done


def _before_supervised(job_id, meta):
    if meta.get("pid") and jobrecord.liveness(meta) == "alive":
        return None
    if job_wait.paused(jobrecord.job_dir(job_id)):
        return {"paused": True, "already": True, "marker": None}
    raise JobError("refused", "job %s is not running: nothing to pause" % job_id)


def _checkpoint(opts, job_id, meta, wait, scheduled):
    """Signal, wait for the marker, then give the resources back; pause.json says each step."""
    sig = (opts.get("signal") or (meta.get("signal") if scheduled else None) or "USR1").upper().replace("SIG", "", 1)
    number = getattr(signal, "SIG" + sig, None)
    if number is None:
        raise JobError("usage", "no signal SIG%s on this box" % sig)
    log = jobrecord.path(job_id, LOG)
    offset = os.path.getsize(log) if os.path.exists(log) else 0
    rec = {"requested_at": time.time(), "engine": jobrecord.engine(meta), "signal": "SIG" + sig,
           "from_offset": offset}
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    if scheduled:
        slurm_control.signal_batch(meta, sig)
    else:
        _signal_supervised(job_id, meta, number)
    marker = wait(offset)
    if marker is None:
        rec.update(failed="no checkpoint marker", gave_up_at=time.time())
        jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
        return {"paused": False, "marker": None}
    rec.update(marker=marker, checkpointed_at=time.time())
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    if scheduled:
        return {"paused": slurm_control.requeue_hold(job_id, meta), "marker": marker}
    stopped = job_stop.stop({"job": job_id, "yes": True, "grace": opts.get("grace")})
    rec["stopped_at"] = time.time()
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    return {"paused": bool(stopped.get("all_gone")), "marker": marker}


def _signal_supervised(job_id, meta, number):
    targets = job_stop.job_processes(job_id, meta)
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
        with open(jobrecord.path(job_id, jobrecord.CMD), "rb") as f:
            return f.read(2) != b"#!"
    except (OSError, IOError):
        return True


def resume(opts):
    job_id = jobrecord.resolve(opts.get("job"))
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    if jobrecord.engine(meta) == jobrecord.SLURM:
        done = slurm_control.resume(job_id, meta)
        done.update(job_id=job_id, engine=jobrecord.SLURM, after=job_facts.facts(job_id))
        return done
    if not job_wait.paused(jobrecord.job_dir(job_id)):
        raise JobError("refused", "job %s is not paused" % job_id)
    child = job_launch.retry(dict(opts, job=job_id))
    rec = jobrecord.read_json(jobrecord.path(job_id, PAUSE)) or {}
    rec.update(resumed_at=time.time(), resumed_as=child["job"]["job_id"])
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    return {"job_id": job_id, "engine": jobrecord.BOX, "resumed": True, "child": child["job"],
            "existing": child.get("existing"), "after": job_facts.facts(job_id)}


def main(argv):
    return jobrecord.serve({"pause": pause, "resume": resume}, argv)
