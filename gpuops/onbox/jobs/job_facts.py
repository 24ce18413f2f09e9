"""On-box job facts: `status` (records, liveness, log size, progress lines and when they were
written) and `excerpt` (a bounded view of a log for triage, with the job's facts). Entry: main(argv).

Only facts are gathered here; the state (RUNNING, STALLED, VANISHED ...) is derived on the
caller's side (gpuops.engines.statusrow), so the rule is pure and tested without a box.
"""

import base64
import os
import socket
import time

from ..engines import registry
from ..host import jobrecord, procs, telemetry
from ..triage import logexcerpt, logscan, steps
from ..run import runrecord
from ..track import trackwatch
from ..host.jobrecord import EXIT, GROWTH, LOG, META, PAUSE, STOP, JobError

_LIVE_WINDOW, _ENDED_WINDOW = 1 << 20, 256 << 10


def facts(job_id, progress_regex=None, detail=True):
    """Everything status needs about one job, as observed now (its engine's liveness facts read
    before the exit record); with `detail`, what the engine adds of a job still waiting (a pending
    Slurm job's place in the queue and its partition)."""
    jdir = jobrecord.job_dir(job_id)
    meta = jobrecord.read_json(os.path.join(jdir, META))
    out = {"job_id": job_id, "now": time.time()}
    if meta is None:
        try:
            out["dir_age_s"] = time.time() - os.stat(jdir).st_mtime
        except OSError:
            out["dir_age_s"] = None
        out["meta"] = None
        out["exit"] = jobrecord.read_json(os.path.join(jdir, EXIT))
        return out
    out["meta"] = meta
    registry.of(meta).observe(out, jdir, meta, detail)
    out["exit"] = jobrecord.read_json(os.path.join(jdir, EXIT))
    out["pause"] = jobrecord.read_json(os.path.join(jdir, PAUSE))
    out["stop"] = jobrecord.read_json(os.path.join(jdir, STOP))
    if out["exit"] and out.get("liveness") not in (None, "rebooted"):
        out["survivors_alive"] = [s["pid"] for s in out["exit"].get("survivors") or []
                                  if isinstance(s, dict) and procs.alive(s.get("pid"), s.get("start_ticks"))]
    log = os.path.join(jdir, LOG)
    try:
        st = os.stat(log)
        out["log_size"], out["log_mtime"] = st.st_size, st.st_mtime
    except OSError:
        out["log_size"] = out["log_mtime"] = None
    out["progress"] = _progress(jdir, log, progress_regex or meta.get("progress_regex"),
                                _LIVE_WINDOW if out["exit"] is None else _ENDED_WINDOW)
    out["run"] = runrecord.facts(meta) or out.get("run")  # a scheduler's requeues are its engine's to say
    out["telemetry"] = telemetry.latest(jdir)
    out["trackers"] = trackwatch.read(jdir)
    return out


def _progress(jdir, log, user_regex, window) -> dict:
    try:
        patterns = steps.compile_patterns(user_regex)
    except Exception as e:  # re.error: reported, the defaults still apply
        return {"events": [], "regex_error": str(e)}
    user = bool(user_regex)
    events = logscan.progress(log, patterns, window, user=user)
    when = logscan.written_at(os.path.join(jdir, GROWTH), [e["end"] for e in events])
    for e in events:
        e["at"] = when.get(e["end"])
    return {"events": events, "first_step": logscan.first_step(log, patterns, user=user) if events else None}


def listing():
    """All job ids, including directories whose launch is still in flight (no meta yet)."""
    root = jobrecord.jobs_dir()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return sorted(n for n in names if not n.startswith(".") and os.path.isfile(os.path.join(root, n, jobrecord.CMD)))


def status(opts) -> dict:
    """The facts of the newest `limit` jobs (0: all) with the labels asked for, and how many more
    there are; or of the one job asked for."""
    labels = opts.get("labels") or {}
    if opts.get("job"):
        ids = [jobrecord.resolve(opts["job"])]
    else:
        ids = list(reversed(listing()))
    most = 50 if opts.get("limit") is None else int(opts["limit"])
    jobs, more = [], 0
    for job_id in ids:
        if labels:
            meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
            if any((meta.get("labels") or {}).get(k) != v for k, v in labels.items()):
                continue
        if most and len(jobs) >= most:
            more += 1
            continue
        jobs.append(facts(job_id, opts.get("progress_regex")))
    return {"jobs": jobs, "now": time.time(), "boot_id": procs.boot_id(), "hostname": socket.gethostname(),
            "jobs_dir": jobrecord.jobs_dir(), "total": len(ids), "more": more}


# ---------------------------------------------------------------- excerpt (triage)


def excerpt(opts) -> dict:
    """The job's facts plus its log in pieces [first line number, base64 bytes]: logexcerpt's
    bounded view (head, step lines, tail)."""
    job_id = jobrecord.resolve(opts.get("job"))
    head, tail = int(opts.get("head") or logexcerpt.HEAD), int(opts.get("tail") or logexcerpt.TAIL)
    log = jobrecord.path(job_id, LOG)
    try:
        size, lines, pieces = logexcerpt.read(log, head, tail)
    except (OSError, IOError):
        raise JobError("not-found", "job %s has no readable log (%s)" % (job_id, log))
    pieces = [[first, base64.b64encode(data).decode("ascii")] for first, data in pieces]
    return {"job": facts(job_id), "size": size, "lines": lines, "pieces": pieces, "now": time.time(),
            "telemetry": telemetry.judged(jobrecord.job_dir(job_id))}


def main(argv):
    return jobrecord.serve({"status": status, "excerpt": excerpt}, argv)
