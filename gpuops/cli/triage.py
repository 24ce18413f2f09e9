"""`triage`: read a job's log and say what happened, how far training got, and what to do next."""

from .common import run
from .flags import verb


@verb("triage")
def triage(c, log, dir, slurm_id, outputs, host, job, attempt, jobs_dir, profile, identity, slurm_state, now, json,
           format, verbose) -> None:
    """Classify a job log: status, failure class, progress projection, next steps (exit 0 completed/running, 1 not)."""
    from ..ops import triage as op
    from ..render import triage as render

    def produce():
        op.check_inputs(log, dir, slurm_id, host, job)
        render.check_format(format)
        when = op.parse_now(now)
        if job:
            from ..ops.hosts import on_hosts, one_host

            prof = None
            if profile:
                from .. import profiles

                prof = profiles.load(profile)
            return on_hosts("triage", one_host("triage", host or "local"), lambda t: op.triage_remote(
                t, job=job, jobs_dir=jobs_dir, profile=prof, slurm_state=slurm_state, now=when, attempt=attempt),
                identity)
        return op.triage_local(log=log, dir=dir, slurm_id=slurm_id, outputs=outputs, slurm_state=slurm_state, now=when)

    run("triage", json, produce, lambda doc, con: render.render(doc, con, format, verbose))


TASKS = (triage,)
