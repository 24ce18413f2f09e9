"""`pause` and `resume`: checkpoint a job and give its GPUs back, then continue it."""

from ..errors import UsageError
from .common import on_hosts, one_host, run
from .flags import verb


@verb("pause")
def pause(c, host, identity, job, ckpt_regex, ckpt_file, signal, timeout, grace, jobs_dir, json) -> None:
    """Checkpoint a job and give its resources back: signal, wait for the checkpoint, then requeue and hold it
    (Slurm) or stop it and keep it PAUSED (the box's supervisor)."""
    from ..ops import pause as op
    from ..render import jobs as render

    def produce():
        if not job:
            raise UsageError("name the job with --job")
        if ckpt_regex:
            from ..jobs.spec import check_regex

            check_regex(ckpt_regex, "--ckpt-regex")
        return on_hosts("pause", one_host("pause", host), lambda t: op.pause(
            t, job=job, ckpt_regex=ckpt_regex, ckpt_file=ckpt_file, signal=signal, timeout_s=timeout, grace=grace,
            jobs_dir=jobs_dir), identity)

    run("pause", json, produce, render.started)


@verb("resume")
def resume(c, host, identity, job, resume_arg, env, secret_env, key, jobs_dir, json) -> None:
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
