"""`pause` and `resume`: checkpoint a job and give its GPUs back, then continue it."""

from ..errors import UsageError
from .common import on_hosts, one_host, run
from .flags import DAY, seconds, verb

_COMMON = {
    "host": "'local' (default), an ssh_config alias or user@host:port (a Slurm job: its login node)",
    "identity": "SSH private key file to use",
    "job": "the job: its id, --key, --name or Slurm job id",
    "json": "print one JSON envelope instead of tables",
    "jobs_dir": "job records directory on the box (default: $GPUOPS_JOBS_DIR there, else ~/.gpuops/jobs)",
}


@verb(help=dict(
    _COMMON,
    ckpt_regex="a log line the job prints once its checkpoint is written (a regular expression)",
    ckpt_file="a file the job writes (or rewrites) once its checkpoint is written",
    signal="the checkpoint signal (default: the job's --signal, else USR1)",
    timeout="seconds to wait for the checkpoint marker; without it nothing is stopped (exit 6)",
    grace="a supervised job: seconds between SIGTERM and SIGKILL once the checkpoint is written",
))
def pause(c, host="local", identity=None, job=None, ckpt_regex=None, ckpt_file=None, signal=None, timeout="300",
          grace="10", jobs_dir=None, json=False):
    """Checkpoint a job and give its resources back: signal, wait for the checkpoint, then requeue and hold it
    (Slurm) or stop it and keep it PAUSED (the box's supervisor)."""
    from ..ops import pause as op
    from ..render import jobs as render

    def produce():
        if not job:
            raise UsageError("name the job with --job")
        if ckpt_regex:
            from .flags import check_regex

            check_regex(ckpt_regex, "--ckpt-regex")
        wait, patience = seconds("--timeout", timeout, low=1, high=DAY), seconds("--grace", grace)
        return on_hosts("pause", one_host("pause", host), lambda t: op.pause(
            t, job=job, ckpt_regex=ckpt_regex, ckpt_file=ckpt_file, signal=signal, timeout_s=wait, grace=patience,
            jobs_dir=jobs_dir), identity)

    run("pause", json, produce, render.started)


@verb(iterable=["env", "secret_env"], help=dict(
    _COMMON,
    resume_arg="a supervised job: text appended to its command for the new run, e.g. '--resume last.ckpt' "
               "(a Slurm job restarts its own script, which finds the checkpoint)",
    env="a supervised job: KEY=VALUE for the new run (repeatable)",
    secret_env="a supervised job: NAME of a local variable passed through stdin only (repeatable)",
    key="a supervised job: idempotency key for the new run",
))
def resume(c, host="local", identity=None, job=None, resume_arg=None, env=None, secret_env=None, key=None,
           jobs_dir=None, json=False):
    """Continue a paused job: release it in Slurm, or start it again from its checkpoint as a child job."""
    from ..ops import pause as op
    from ..render import jobs as render
    from .flags import check_words
    from .jobs import _env_and_secrets

    def produce():
        if not job:
            raise UsageError("name the job with --job")
        check_words(resume_arg)
        envs, secrets = _env_and_secrets(env, secret_env)
        return on_hosts("resume", one_host("resume", host), lambda t: op.resume(
            t, job=job, resume_arg=resume_arg, env=envs, secrets=secrets, key=key, jobs_dir=jobs_dir), identity)

    run("resume", json, produce, render.started)


TASKS = (pause, resume)
