"""On-box `stop`: the job's engine stops it (gpuops.onbox.engines.registry: the supervisor's TERM, KILL
after the grace and a check that every process is gone; a scheduler's cancel). Dry run unless
`yes`; with a `plan` id (gpuops.onbox.host.plans), only when what would be stopped is still what was
planned. Entry: main(argv).

A stop of a run (any of its attempts named, the run's id first) is recorded for the run before
anything is signalled (gpuops.onbox.run.runrecord.stop), under the lock its supervisor's hand-over
takes: no attempt starts after it, and the one that is current then is the one stopped. A stop
under a plan binds to the attempt the plan showed; its stop.json is read at the hand-over too.
"""

import time

from ..engines import registry
from . import job_facts
from ..host import jobrecord
from ..run import runrecord
from ..host.jobrecord import META, JobError


def stop(opts):
    job_id = jobrecord.resolve(opts.get("job"))
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    run_id = runrecord.going(meta) if opts.get("yes") and opts.get("plan") is None else None
    if run_id:
        try:
            job_id = runrecord.stop(run_id, {"requested_at": time.time(), "grace_s": opts.get("grace"),
                                             "named": job_id})
        except (OSError, IOError) as e:
            raise JobError("refused", "cannot record the stop of run %s (%s): nothing was signalled" % (run_id, e))
        meta = jobrecord.read_json(jobrecord.path(job_id, META)) or meta
    engine = registry.of(meta)
    doc = engine.stop(opts, job_id, meta)
    doc.update(engine=engine.NAME, after=job_facts.facts(job_id))
    if run_id:
        doc["run_stopped"] = run_id
    return doc


def main(argv):
    return jobrecord.serve({"stop": stop}, argv)
