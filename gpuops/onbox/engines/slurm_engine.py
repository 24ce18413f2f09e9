"""Slurm as an engine, on the login node (gpuops.onbox.engines.registry lists the interface; its other
half is gpuops.engines.slurm): sbatch submits (gpuops.onbox.engines.slurm_submit), the scheduler says how
the job stands (gpuops.onbox.engines.slurm), scancel and scontrol act on it (gpuops.onbox.engines.slurm_control),
and a queue is a dependency chain Slurm runs itself.
"""

import os
import socket
import time

from ..host import evidence, jobrecord
from . import slurm, slurm_control, slurm_resume, slurm_submit

NAME = slurm.NAME
POLL_S = 1.0  # the controller serves the whole cluster: ask it once a second
INHERITED = slurm_submit.INHERITED
submit = slurm_submit.submit
stop = slurm_control.stop
check_retry = slurm_submit.check_retry
retried = slurm_submit.retried
before_pause = slurm_control.before_pause
chain = slurm_submit.chain
_ASKED = {}


def observe(out, jdir, meta, detail=True) -> None:
    """The scheduler says whether it lives, and its exit record is Slurm's verdict; with `detail`,
    a pending job's place in the queue and its partition too. A job under a run policy says its
    attempts: Slurm's requeues are its retries (gpuops.onbox.engines.slurm_resume)."""
    out["scheduler"] = slurm_control.observed(out["job_id"], meta, detail=detail)
    out["run"] = slurm_resume.run_facts(out["job_id"], jdir, meta, out["scheduler"])


phase = slurm.phase


def phase_of(facts):
    return slurm.phase_of(facts.get("scheduler") or {})


def stream_end(job_id, meta):
    """The end of a follow, once the scheduler says the job ended (asked once a second). Its log
    is complete by then: slurmstepd writes it."""
    if time.time() - _ASKED.get(job_id, 0.0) < POLL_S:
        return None
    _ASKED[job_id] = time.time()
    if slurm.phase(job_id, meta) != "ended":
        return None
    exit_rec = jobrecord.read_json(jobrecord.path(job_id, jobrecord.EXIT))
    return {"reason": "exited" if exit_rec else "vanished", "exit": exit_rec}


def default_signal(meta):
    return meta.get("signal")


def send_checkpoint(job_id, meta, sig, number: int) -> None:
    slurm_control.signal_batch(meta, sig)


def release(job_id, meta, opts):
    return slurm_control.requeue_hold(job_id, meta)


def resume(job_id, meta, opts):
    return slurm_control.resume(job_id, meta)


def diagnose_facts(ev, job_id, rec, facts) -> None:
    """The scheduler's facts (sacct's steps too, for MaxRSS against ReqMem), the log's tail, and
    the kernel log where the job ran when that node is this one (a login node that is not the
    compute node cannot read the node's log)."""
    meta = rec["meta"]
    job = ((facts.get("scheduler") or {}).get("job")) or {}
    rows, completion = slurm.accounting(meta["slurm_job_id"], steps=True) if meta.get("slurm_job_id") else ([], False)
    nodes = [n for n in (job.get("BatchHost"), job.get("NodeList")) if n and n not in ("(null)", "None")]
    here = socket.gethostname().split(".")[0]
    ev.update({"pid": None, "boot_id_then": None, "boot_changed": False, "oom_kills_at_launch": None,
               "oom_kills_now": None, "alive": phase_of(facts) in ("starting", "alive"),
               "log_tail": evidence.tail(os.path.join(rec["dir"], jobrecord.LOG)),
               "accounting": rows, "accounting_source": "sacct -c" if completion else "sacct",
               "node": nodes[0] if nodes else None, "node_is_here": bool(nodes) and nodes[0].split(",")[0] == here})
    if ev["node_is_here"]:
        evidence.with_kernel(ev, ev["since"], set())
    else:
        evidence.without_kernel(ev)


def queue_cancel(job_id, meta) -> None:
    """Take back an entry Slurm has not started (the running one keeps running)."""
    if slurm.phase(job_id, meta) == "starting":
        slurm.run(["scancel", str(meta["slurm_job_id"])])
