"""`triage`: read a job's log and say what happened, how far training got, and what to do next."""

from .common import run
from .flags import verb


@verb(help={
    "log": "the job's log file",
    "dir": "a job directory (its `log` link, else the sibling <dir>.log)",
    "slurm_id": "a Slurm job id, looked up as <outputs>/<id>-*/log or <outputs>/<id>-*.log",
    "outputs": "the outputs folder that --slurm-id looks in (default ./outputs)",
    "host": "with --job: the box the gpuops job ran on ('local' or an ssh_config alias / user@host:port)",
    "job": "a gpuops job (its id, --key or --name): reads a bounded head and tail of its log on --host",
    "jobs_dir": "with --job: job records directory on the box (default: $GPUOPS_JOBS_DIR there, else ~/.gpuops/jobs)",
    "profile": "with --job: the platform profile the job was launched with (its job directory applies)",
    "identity": "SSH private key file to use",
    "slurm_state": "the job's scheduler state (RUNNING, CANCELLED, ...); default: scontrol when on PATH, else unknown",
    "now": "the time to judge progress against, ISO 8601 (default: now), so a triage can be repeated",
    "json": "print one JSON envelope instead of the markdown report",
    "format": "the report as 'rich' (doctor-style like every verb's, the default) or 'md' (Markdown, for a "
              "ticket or a chat)",
    "verbose": "what happened, the progress in full, each finding's evidence and all the advice",
})
def triage(c, log=None, dir=None, slurm_id=None, outputs="outputs", host=None, job=None, jobs_dir=None, profile=None,
           identity=None, slurm_state=None, now=None, json=False, format=None, verbose=False):
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
                t, job=job, jobs_dir=jobs_dir, profile=prof, slurm_state=slurm_state, now=when), identity)
        return op.triage_local(log=log, dir=dir, slurm_id=slurm_id, outputs=outputs, slurm_state=slurm_state, now=when)

    run("triage", json, produce, lambda doc, con: render.render(doc, con, format, verbose))


TASKS = (triage,)
