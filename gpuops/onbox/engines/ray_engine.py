"""Ray Jobs as an engine, on the Ray head (gpuops.onbox.engines.registry lists the interface; its other
half is gpuops.engines.ray): a job is a Ray job submission (gpuops.onbox.engines.ray_submit) whose driver
runs on the head beside its record (gpuops.onbox.engines.ray_driver); Ray says how it stands
(PENDING ... as Ray spells them, mapped by the caller), and `ray job stop`'s REST call stops it.
Once Ray says it ended, its outcome is written to the job's exit.json (and a secrets file the
driver never took is deleted), so the record still answers when the cluster is gone. A job with a
run policy is a run whose driver supervises its attempts (gpuops.onbox.engines.ray_run): an attempt's end
is the exit record that supervisor wrote, and a stop of any attempt stops the Ray job, the run.

Ray has no hold: a Ray job is not paused by gpuops (stop it; retry it from its checkpoint).
"""

import os
import socket
import time

from ..host import evidence, jobrecord, plans, signals
from . import ray_api, ray_submit
from ..run import runrecord
from ..host.jobrecord import EXIT, STOP, JobError

NAME = ray_submit.NAME
POLL_S = 1.0  # each look is an HTTP call to the dashboard
SETTLE_S = 30.0  # Ray's stop: SIGTERM, RAY_JOB_STOP_WAIT_TIME_S (3 s), SIGKILL, and the status written
INHERITED = ray_submit.INHERITED
submit = ray_submit.submit
retried = ray_submit.retried
chain = None
_FIELDS = ("status", "message", "error_type", "driver_exit_code", "start_time", "end_time", "submission_id")
_ASKED = {}


def observe(out, jdir, meta, detail=True) -> None:
    out["scheduler"] = observed(out["job_id"], meta, jdir)


def observed(job_id, meta, jdir=None, attempt=True) -> dict:
    """What Ray says of the job: {known, source, job (Ray's words)}; the recorded outcome once it
    ended; known None with the error when the dashboard could not be asked. An attempt of a run
    ended when the run's supervisor (the driver: gpuops.onbox.engines.ray_run) recorded its end, while Ray
    runs the submission on; `attempt` false asks of the submission itself."""
    jdir = jdir or jobrecord.job_dir(job_id)
    recorded = jobrecord.read_json(os.path.join(jdir, EXIT))
    if recorded and isinstance(recorded.get("scheduler"), dict):
        return {"known": True, "source": "record", "job": recorded["scheduler"]}
    if recorded and attempt and runrecord.run_of(meta):
        return {"known": True, "source": "supervisor", "job": attempt_end(recorded)}
    try:
        info = ray_api.job(meta.get("ray_submission_id") or "-")
    except JobError as e:
        if e.kind == "rejected":
            raise
        return {"known": None, "error": str(e)}
    if not isinstance(info, dict):
        return {"known": False, "source": "ray", "job": None}
    job = dict((k, _word(info.get(k))) for k in _FIELDS)
    if jobrecord.phases(NAME).get(job["status"]) == "ended" and not recorded:
        _record_end(jdir, job)
    return {"known": True, "source": "ray", "job": job}


def attempt_end(rec):
    """A run's attempt that ended while Ray runs the submission on: no word of Ray's, since Ray
    never saw it end; how it ended is its exit record (the caller's state rule reads it)."""
    job = dict.fromkeys(_FIELDS, "")
    job["message"] = "attempt ended%s (recorded by the run's supervisor in the Ray job)" % (
        ", %s" % rec["ended_by"] if rec.get("ended_by") else "")
    return job


def _word(value):
    """One of Ray's values as a bounded word: its first line (a FAILED job's message carries the
    log's last 20,000 characters)."""
    if value is None:
        return ""
    return str(value).strip().split("\n")[0][:ray_api.VALUE_MAX]


def _record_end(jdir, job) -> None:
    try:
        code = int(job.get("driver_exit_code"))
    except (TypeError, ValueError):
        code = None
    sig = signals.name(-code) if code is not None and code < 0 else None
    jobrecord.write_json(os.path.join(jdir, EXIT), {
        "exit_code": None if sig else code, "signal": sig, "ended_at": time.time(), "engine_state": job["status"],
        "scheduler": job, "source": "ray"})
    try:
        os.unlink(os.path.join(jdir, ray_submit.SECRETS))  # the driver never started to take it
    except OSError:
        pass


def phase_of(facts):
    return _phase(facts.get("scheduler") or {})


def _phase(sched):
    if sched.get("known") is None and sched.get("error"):
        return "unknown"
    if sched.get("source") == "supervisor":
        return "ended"
    if not sched.get("known"):
        return "ended"
    return jobrecord.phases(NAME).get((sched.get("job") or {}).get("status"), "alive")


def phase(job_id, meta):
    return _phase(observed(job_id, meta))


def stream_end(job_id, meta):
    """A follow's end once Ray says the job ended (asked once a second); the driver has written
    the whole log by then."""
    if time.time() - _ASKED.get(job_id, 0.0) < POLL_S:
        return None
    _ASKED[job_id] = time.time()
    if phase(job_id, meta) != "ended":
        return None
    exit_rec = jobrecord.read_json(jobrecord.path(job_id, EXIT))
    return {"reason": "exited" if exit_rec else "vanished", "exit": exit_rec}


def check_retry(parent_id, parent, opts):
    if phase(parent_id, parent) in ("starting", "alive", "unknown"):
        raise JobError("refused", "job %s is still pending or running in Ray (%s), or Ray cannot say; stop it first "
                                  "(retry never runs two copies)" % (parent_id, parent.get("ray_submission_id")))


def stop(opts, job_id, meta):
    """`ray job stop` through the API: Ray sends the driver's process tree SIGTERM, SIGKILL after
    a few seconds. A plan is the submission it stops."""
    if opts.get("signal"):
        raise JobError("usage", "--signal: Ray stops a job with the signal its cluster is set to "
                                "(RAY_JOB_STOP_SIGNAL, SIGTERM by default); checkpoint before you stop it")
    sched = observed(job_id, meta, attempt=False)  # a run's attempt: the stop ends its Ray job, the run
    if sched.get("known") is None:
        raise JobError("unreachable", sched.get("error") or "the Ray dashboard did not answer")
    sid = meta.get("ray_submission_id")
    status = (sched.get("job") or {}).get("status")
    targets = [] if _phase(sched) == "ended" else [{"ray_submission_id": sid, "status": status}]
    doc = {"job_id": job_id, "targets": targets, "grace_s": None}
    planned = opts.get("plan")
    if planned is not None:
        expires = plans.expiry(planned)
        if expires is None:
            raise JobError("usage", "not a plan id: %r" % (planned,))
        if plans.plan_id("stop", job_id, [[t["ray_submission_id"]] for t in targets], expires) != planned:
            doc.update(dry_run=True, plan_refused=True, all_gone=not targets)
            return doc
    if not opts.get("yes") or not targets:
        doc.update(dry_run=not opts.get("yes"), all_gone=not targets)
        return doc
    record = {"requested_at": time.time(), "signals": []}
    ray_api.stop(sid)
    record["signals"].append({"signal": "ray job stop", "pids": [], "at": time.time()})
    jobrecord.write_json(jobrecord.path(job_id, STOP), record)
    deadline = time.time() + SETTLE_S
    while True:
        gone = _phase(observed(job_id, meta, attempt=False)) == "ended"
        if gone or time.time() >= deadline:
            break
        time.sleep(0.5)
    record.update(all_gone=gone, finished_at=time.time())
    jobrecord.write_json(jobrecord.path(job_id, STOP), record)
    doc.update(dry_run=False, signals=record["signals"], all_gone=gone)
    return doc


def before_pause(job_id, meta):
    raise JobError("refused", "Ray has no hold: gpuops does not pause a Ray job. Stop it (gpuops stop), then retry "
                              "it with --resume-arg once its checkpoint is written")


def default_signal(meta):
    return None


def send_checkpoint(job_id, meta, sig, number: int) -> None:
    before_pause(job_id, meta)


def release(job_id, meta, opts) -> None:
    before_pause(job_id, meta)


def resume(job_id, meta, opts):
    raise JobError("refused", "job %s is a Ray job, which gpuops does not pause: nothing to resume; retry it" % job_id)


def diagnose_facts(ev, job_id, rec, facts) -> None:
    """Ray's account of the job, the log's tail, and the head's kernel log (the driver runs here)."""
    meta = rec["meta"]
    ev.update({"pid": None, "boot_id_then": None, "boot_changed": False, "oom_kills_at_launch": None,
               "alive": phase_of(facts) in ("starting", "alive"),
               "log_tail": evidence.tail(os.path.join(rec["dir"], jobrecord.LOG)),
               "node": socket.gethostname(), "node_is_here": True, "dashboard": meta.get("dashboard")})
    evidence.with_kernel(ev, ev["since"], set())


def queue_cancel(job_id, meta) -> None:
    pass


def cluster_facts() -> dict:
    """What preflight reports of the cluster: the dashboard, each node Ray knows (alive or not,
    the CPUs and GPUs Ray schedules against those the node has, its object store), and the
    head's /dev/shm, where the object store lives when it fits."""
    head = ray_api.version()
    summary = ray_api.asked("GET", "/nodes?view=summary")
    nodes = []
    for node in ((summary or {}).get("data") or {}).get("summary") or []:
        if isinstance(node, dict) and len(nodes) < 256:
            nodes.append(_node(node))
    try:
        st = os.statvfs("/dev/shm")
        shm = st.f_blocks * st.f_frsize
    except OSError:
        shm = None
    return {"dashboard": ray_api.address(), "ray_version": str(head.get("ray_version"))[:40], "nodes": nodes,
            "shm_bytes": shm}


def _node(node) -> dict:
    raylet = node.get("raylet") if isinstance(node.get("raylet"), dict) else {}
    total = raylet.get("resourcesTotal") if isinstance(raylet.get("resourcesTotal"), dict) else {}
    cpus = node.get("cpus") if isinstance(node.get("cpus"), list) else []
    gpus = node.get("gpus") if isinstance(node.get("gpus"), list) else []
    return {"hostname": _word(node.get("hostname")), "ip": _word(node.get("ip")),
            "head": bool(raylet.get("isHeadNode")), "state": _word(raylet.get("state")),
            "ray_cpus": _number(total.get("CPU")), "ray_gpus": _number(total.get("GPU")),
            "object_store_bytes": _number(total.get("objectStoreMemory")),
            "box_cpus": _number(cpus[0]) if cpus else None, "box_gpus": len(gpus)}


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
