"""On-box `pause` and `resume`, for every engine that can. Entry: main(argv).

Pause sends the job its checkpoint signal, waits until the job shows its checkpoint is written
(a line matching `marker_regex` in its log after the signal, or `marker_file` appearing or
changing), and only then has its engine give its resources back (gpuops.onbox.engines.registry: a Slurm
job is requeued and held, a supervised job is stopped and its record kept as paused). Without
the marker by the timeout nothing is stopped. Resume is the engine's (a held Slurm job released:
the same job, restarted from its script, which finds the checkpoint), or starts the job again as
a child with `resume_arg` appended. pause.json records each step.
"""

import os
import re
import signal
import time

from ..engines import registry
from . import job_facts, job_launch, job_wait
from ..host import jobrecord
from ..host.jobrecord import LOG, META, PAUSE, JobError

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

    def wait(offset: int):
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
    engine = registry.of(meta)
    done = engine.before_pause(job_id, meta)
    if done is None:
        done = _checkpoint(opts, job_id, meta, wait, engine)
    done.update(job_id=job_id, engine=engine.NAME, after=job_facts.facts(job_id))
    return done


def _checkpoint(opts, job_id, meta, wait, engine) -> dict:
    """Signal, wait for the marker, then give the resources back; pause.json says each step."""
    sig = (opts.get("signal") or engine.default_signal(meta) or "USR1").upper().replace("SIG", "", 1)
    number = getattr(signal, "SIG" + sig, None)
    if number is None:
        raise JobError("usage", "no signal SIG%s on this box" % sig)
    log = jobrecord.path(job_id, LOG)
    offset = os.path.getsize(log) if os.path.exists(log) else 0
    rec = {"requested_at": time.time(), "engine": engine.NAME, "signal": "SIG" + sig, "from_offset": offset}
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    engine.send_checkpoint(job_id, meta, sig, number)
    marker = wait(offset)
    if marker is None:
        rec.update(failed="no checkpoint marker", gave_up_at=time.time())
        jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
        return {"paused": False, "marker": None}
    rec.update(marker=marker, checkpointed_at=time.time())
    jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
    return {"paused": bool(engine.release(job_id, meta, opts)), "marker": marker}


def resume(opts):
    job_id = jobrecord.resolve(opts.get("job"))
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    engine = registry.of(meta)
    done = engine.resume(job_id, meta, opts)
    if done is None:  # the engine starts it again: a child of the same command, from its checkpoint
        child = job_launch.retry(dict(opts, job=job_id))
        rec = jobrecord.read_json(jobrecord.path(job_id, PAUSE)) or {}
        rec.update(resumed_at=time.time(), resumed_as=child["job"]["job_id"])
        jobrecord.write_json(jobrecord.path(job_id, PAUSE), rec)
        done = {"resumed": True, "child": child["job"], "existing": child.get("existing")}
    done.update(job_id=job_id, engine=engine.NAME, after=job_facts.facts(job_id))
    return done


def main(argv):
    return jobrecord.serve({"pause": pause, "resume": resume}, argv)
