"""The job tools: launch (on a box, or placed on a fleet), status, wait, logs, stop, pause, resume,
retry, queue, diagnose, triage.

Each returns the operation's envelope (the same gpuops.ops call the CLI makes) or raises a
GpuopsError; gpuops.mcp.server makes the result. A tool's parameters, their types, bounds and
words are its description's (gpuops.surface); here they are only names. Whether the server's
level admits a call is checked before the function runs (gpuops.mcp.toolsets).
"""

import os

from mcp.server.mcpserver import Context

from .. import engines, errors
from ..surface.jobs import STATUS_ROWS_MAX
from . import scope, trim
from .adapter import OP_TIMEOUT_S, applies_plan, check_regex, on_host, with_progress


def _envs(env, secret_env):
    from ..jobs import spec

    envs = spec.pairs([f"{k}={v}" for k, v in (env or {}).items()], "env", env_names=True)
    return envs, spec.secrets(scope.allowed_secrets(secret_env, os.environ), os.environ, taken=envs)


def _labels(labels):
    from ..jobs import spec

    return spec.pairs([f"{k}={v}" for k, v in (labels or {}).items()], "labels")


def _resources(engine, resources, verb):
    chosen = engines.get(engine)
    asked = dict(resources or {})
    engines.refuse_foreign(chosen, asked, verb)
    return asked


def job_launch(host, cmd, script, name, labels, workdir, gpus, share_gpu, env, secret_env, key, progress_regex, profile,
               engine, resources, max_retries, retry_on, checkpoint_dir, resume_arg, stall_after_s, max_runtime_s,
               keep_checkpoints, keep_best):
    from ..engines import launchrequest
    from ..jobs import spec
    from ..ops import jobs as op

    scope.runs_here("job_launch", [host], os.environ)
    workdir, checkpoint_dir = scope.job_dir(host, workdir, os.environ), scope.box_path(host, checkpoint_dir, os.environ)
    req = launchrequest.build(
        cmd=cmd, script=script and scope.local_path(script, os.environ), script_shown=script, labels=labels, env=env,
        secret_env=scope.allowed_secrets(secret_env, os.environ), environ=os.environ, progress_regex=progress_regex,
        profile=profile, engine=engine, resources=resources,
        policy=dict(max_retries=max_retries, retry_on=retry_on, checkpoint_dir=checkpoint_dir, resume_arg=resume_arg,
                    stall_after=stall_after_s, max_runtime=max_runtime_s, keep_checkpoints=keep_checkpoints,
                    keep_best=keep_best))
    pinned = spec.gpus(gpus)
    return trim.launched(on_host("launch", host, lambda t: op.launch(
        t, command=cmd, script=req["script"], name=name, labels=req["labels"], env=req["env"], secrets=req["secrets"],
        workdir=workdir, gpus=pinned, key=key, progress_regex=progress_regex, profile=req["profile"], engine=engine,
        resources=req["resources"], timeout_s=OP_TIMEOUT_S, share_gpu=share_gpu, policy=req["policy"])))


def fleet_launch(gpus, cmd, fleet, gpu_type, min_vram_gib, name, key, workdir, env, secret_env, checkpoint_dir,
                 resume_arg, vault, lost_after_s, stop_when_done, stop_idle_s, budget, keeper_host):
    from .. import fleetfile, placement
    from ..jobs import runpolicy
    from ..keeper import request
    from ..ops import place

    envs, secrets = _envs(env, secret_env)
    policy = runpolicy.build(checkpoint_dir=checkpoint_dir, resume_arg=resume_arg) \
        if checkpoint_dir or resume_arg else None
    keeping = dict(lost_after_s=lost_after_s, stop_when_done=stop_when_done, stop_idle_s=stop_idle_s, budget_usd=budget)
    if request.asked(vault, keeping) or keeper_host:
        return kept(vault, keeping, dict(fleet=fleet or "", cmd=cmd, policy=policy, gpus=gpus, gpu_type=gpu_type,
                                         min_vram_gib=min_vram_gib, name=name, env=envs, workdir=workdir,
                                         secrets=secrets, dropped={"--key": key}), keeper_host)
    if policy:
        raise errors.UsageError("fleet_launch: checkpoint_dir and resume_arg go with vault (a kept run); "
                                "job_launch takes a run policy on one box")
    return place.launch(fleetfile.boxes(fleet), placement.request(gpus, gpu_type, min_vram_gib), command=cmd,
                        name=name, key=key, workdir=workdir, env=envs, secrets=secrets, timeout_s=OP_TIMEOUT_S)


def kept(vault, keeping, asked, keeper_host=None, tool="fleet_launch"):
    """A launch with vault (fleet_launch's, gang_launch's): the run's first attempt and its keeper
    (gpuops.keeper.start), a detached process on this machine (or on keeper_host) that outlives the
    server, judged by gpuops.keeper.request as the CLI's is. A local vault lies under the roots; a
    HOST:DIR one is on the host it names, which they do not bind."""
    from ..keeper import request, start
    from ..keeper.vault import parse

    if keeper_host:  # the keeper runs the fleet's stop commands where it runs
        scope.runs_here(tool, [keeper_host], os.environ)
    host, where = parse(vault) if vault else (None, None)
    local = vault if host or not vault else scope.local_path(where, os.environ)
    return start.launch(request.spec(vault=local, keeping=keeping, **asked), keeper_host=keeper_host)


def job_retry(host, job, resume_arg, checkpoint_dir, key, env, secret_env, resources):
    from ..ops import jobs as op

    _words("resume_arg", resume_arg)
    scope.runs_here("job_retry", [host], os.environ)
    checkpoint_dir = scope.box_path(host, checkpoint_dir, os.environ)
    envs, secrets = _envs(env, secret_env)
    asked = dict(resources or {})
    if asked:
        engines.refuse_foreign(engines.owner_of_flags(asked) or engines.get(None), asked, "retry")
    return trim.launched(on_host("retry", host, lambda t: op.retry(
        t, job=job, env=envs, secrets=secrets, resume_arg=resume_arg, key=key, resources=asked, timeout_s=OP_TIMEOUT_S,
        checkpoint_dir=checkpoint_dir)))


def _words(name, text):
    import shlex

    try:
        shlex.split(text or "")
    except ValueError as e:
        raise errors.UsageError(f"{name} cannot be split into words: {e}") from None


def job_queue(host, name, commands, cancel, wait_s, workdir, gpus, env, secret_env, engine, resources):
    from ..jobs import spec
    from ..ops import jobs as op

    if commands is not None and not all(c.strip() and "\n" not in c for c in commands):
        raise errors.UsageError("commands: each is one non-empty line")
    content = "".join(c + "\n" for c in commands) if commands else None
    scope.runs_here("job_queue", [host], os.environ)  # its runner runs the queue's lines
    workdir = scope.job_dir(host, workdir, os.environ)
    envs, secrets = _envs(env, secret_env)
    asked = _resources(engine, resources, "queue")
    return on_host("queue", host, lambda t: op.queue(
        t, name=name, content=content, env=envs, secrets=secrets, workdir=workdir, gpus=spec.gpus(gpus),
        wait=wait_s, cancel=cancel, engine=engine, resources=asked))


def job_status(host, job, limit, labels, progress_regex, stall_factor, stall_min_s, fields, failed_only):
    from ..keeper import view
    from ..ops import jobs as op

    kept = _kept_run("job_status", host, job) or view.kept(job)
    if kept is not None:  # a run a keeper looks after: its boxes, vault and ledger from the keeper's record
        return view.status(kept)

    if progress_regex:
        check_regex("progress_regex", progress_regex)
    tags = _labels(labels)
    # failed_only looks among every listed job, not the newest `limit`: a failure older than the last
    # five healthy runs is what the caller asked for; `limit` then caps the failures shown
    among = STATUS_ROWS_MAX if failed_only else limit
    return trim.status(on_host("status", host, lambda t: op.status(
        t, job=job, labels=tags, progress_regex=progress_regex, stall_factor=stall_factor, stall_min_s=stall_min_s,
        limit=among, timeout_s=OP_TIMEOUT_S)), fields, failed_only, cap=limit)


def job_logs(host, job, attempt, tail, from_offset, max_bytes, encoding):
    from ..ops import joblogs as op

    return on_host("logs", host, lambda t: op.logs(
        t, job=job, tail=tail, from_offset=from_offset, max_bytes=max_bytes, reconnect_s=10.0, encoding=encoding,
        attempt=attempt))


async def job_wait(ctx: Context, host, job, until, after_event, log_regex, from_offset, timeout_s, max_bytes, fields):
    from ..keeper import view
    from ..ops import wait as op

    kept = _kept_run("job_wait", host, job)
    if kept is not None:  # a kept run: until it ends, from the keeper's record
        return await with_progress(ctx, timeout_s, lambda: f"waiting on the keeper of {job}",
                                   lambda: view.wait(kept, timeout_s))

    def work():
        wanted = op.parse_until(",".join(until) if until else op.TERMINAL)
        if log_regex:
            check_regex("log_regex", log_regex)
        return on_host("wait", host, lambda t: op.wait(
            t, job=job, until=wanted, log_regex=log_regex, from_offset=from_offset, timeout_s=timeout_s,
            max_bytes=max_bytes, after_event=after_event))

    return trim.fields(await with_progress(ctx, timeout_s, lambda: f"waiting on the box for {job}", work), "job_wait",
                       fields)


def job_events(host: str, job: str, after_event: int) -> dict:
    from ..ops import wait as op

    return trim.fields(on_host("wait", host, lambda t: op.events(t, job=job, after_event=after_event)),
                       "job_events", None)


def _kept_run(tool: str, host, job):
    """The keeper's record of `job` when no host is given (a kept run, as the CLI's --job RUN)."""
    from ..keeper import view

    if host:
        return None
    kept = view.kept(job)
    if kept is None:
        raise errors.UsageError(f"{tool}: host is needed unless job names a kept run (launched with a vault)")
    return kept


def job_stop(host, job, grace_s, yes, plan_id):
    from ..keeper import view
    from ..ops import jobs as op

    applies_plan("job_stop", yes, plan_id)
    kept = _kept_run("job_stop", host, job)
    if kept is not None:  # its keeper stops it, wherever the keeper runs; a stop wins over a relaunch
        return view.stop(kept, yes=yes, plan=plan_id)
    return on_host("stop", host, lambda t: op.stop(t, job=job, grace=grace_s, yes=yes, plan=plan_id))


async def job_pause(ctx: Context, host, job, ckpt_regex, ckpt_file, signal, timeout_s, grace_s):
    from ..ops import pause as op

    if ckpt_regex:
        check_regex("ckpt_regex", ckpt_regex)

    def work():
        return on_host("pause", host, lambda t: op.pause(t, job=job, ckpt_regex=ckpt_regex, ckpt_file=ckpt_file,
                                                         signal=signal, timeout_s=timeout_s, grace=grace_s))

    return await with_progress(ctx, timeout_s, lambda: f"waiting for {job}'s checkpoint", work)


def job_resume(host, job, resume_arg, env, secret_env, key):
    from ..ops import pause as op

    _words("resume_arg", resume_arg)
    scope.runs_here("job_resume", [host], os.environ)
    envs, secrets = _envs(env, secret_env)
    return on_host("resume", host, lambda t: op.resume(t, job=job, resume_arg=resume_arg, env=envs, secrets=secrets,
                                                       key=key))


def job_diagnose(host, job, attempt):
    from ..ops import diagnose as op

    return on_host("diagnose", host, lambda t: op.diagnose(t, job=job, timeout_s=OP_TIMEOUT_S, attempt=attempt))


def log_triage(path, job, host, attempt):
    from ..ops import triage as op

    if bool(path) == bool(job):
        raise errors.UsageError("log_triage: give exactly one of path or job")
    if (host or attempt) and not job:
        raise errors.UsageError("log_triage: host and attempt go with job (the run and the box it ran on)")
    if path:
        return op.triage_local(log=scope.local_path(path, os.environ))
    return on_host("triage", host or "local", lambda t: op.triage_remote(t, job=job, attempt=attempt))


TOOLS = (job_launch, fleet_launch, job_retry, job_queue, job_status, job_logs, job_wait, job_events, job_stop,
         job_pause, job_resume, job_diagnose, log_triage)
