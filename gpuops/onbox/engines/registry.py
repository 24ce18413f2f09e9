"""The job engines on the box: who runs a job, behind the one interface every job action calls.

Each engine is a module here named after it (box_engine, slurm_engine, ...), holding:

    NAME                          meta["engine"]; its other half is gpuops.engines' entry of this name
    POLL_S                        how often a wait asks it whether the job's phase changed
    INHERITED                     record fields a retry takes from its parent besides every job's
    submit(spec, body)            start a job (the caller holds the jobs-dir lock); its job id
    observe(out, jdir, meta, detail)  the facts status derives a state from, into `out`
    phase(job_id, meta)           "starting", "alive", "paused" or "ended", for waits and follows
    phase_of(facts)               the same, from facts observe() gathered
    stream_end(job_id, meta)      a follow's end once the job ended without an exit record yet, or None
    stop(opts, job_id, meta)      dry run, plan and stop; the answer without the job's facts after it
    check_retry(parent_id, parent, opts) / retried(spec, parent, opts)
    before_pause(job_id, meta)    None for a job to checkpoint, or the pause's answer (already, held)
    default_signal(meta) / send_checkpoint(job_id, meta, sig, number) / release(job_id, meta, opts)
    resume(job_id, meta, opts)    its answer, or None: the job starts again as a retry's child
    diagnose_facts(ev, job_id, rec, facts)  what diagnose reads beside the records, into `ev`
    chain(spec, entries, by_key)  a queue the engine runs itself (None: gpuops' runner runs it)
    queue_cancel(job_id, meta)    take back a chained entry that has not started
    cluster_facts()               optional: what preflight reports of its cluster from this host

Typed on the workstation as gpuops.engines.seam.BoxHalf (this side runs on Python 3.6, without
typing.Protocol); tests/test_engine_seam.py holds every engine here to it.
A job action calls the engine of the job's record; none branches on which one it is. What the
engine's own state words mean comes from the caller (gpuops.onbox.host.jobrecord.phases), so no
module here spells a state.
"""

from . import box_engine, ray_engine, slurm_engine
from ..host import jobrecord
from ..host.jobrecord import JobError

# By name, not by each module's NAME: a bundled module runs its code only once it is used (gpuops.
# onbox's loader), so a call runs only its job's engine (tests/test_layout.py holds the names equal).
ENGINES = {"box": box_engine, "slurm": slurm_engine, "ray": ray_engine}


def named(name: str):
    """The engine `name` (None: the supervisor)."""
    name = name or jobrecord.DEFAULT_ENGINE
    if name not in ENGINES:
        raise JobError("usage", "no job engine %r on this side (gpuops knows %s)" % (name, ", ".join(sorted(ENGINES))))
    return ENGINES[name]


def of(meta):
    """The engine of a job's record."""
    return named(jobrecord.engine(meta))
