"""On-box `stop`: the job's engine stops it (gpuops.onbox.engines: the supervisor's TERM, KILL
after the grace and a check that every process is gone; a scheduler's cancel). Dry run unless
`yes`; with a `plan` id (gpuops.onbox.plans), only when what would be stopped is still what was
planned. Entry: main(argv)."""

from . import engines, job_facts, jobrecord
from .jobrecord import META


def stop(opts):
    job_id = jobrecord.resolve(opts.get("job"))
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    engine = engines.of(meta)
    doc = engine.stop(opts, job_id, meta)
    doc.update(engine=engine.NAME, after=job_facts.facts(job_id))
    return doc


def main(argv):
    return jobrecord.serve({"stop": stop}, argv)
