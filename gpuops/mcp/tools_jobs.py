"""The job tools: launch (on a box, or placed on a fleet), status, wait, logs, stop, retry, queue, diagnose,
triage.

Each returns the operation's envelope (the same gpuops.ops call the CLI makes) or raises a
GpuopsError; gpuops.mcp.server makes the result. A parameter named here is what an agent sends.
"""

import os
from typing import Annotated, Optional, Union

from mcp.server.mcpserver import Context
from pydantic import Field

from .. import engines, errors
from ..jobs.runpolicy import HELP as RUN_HELP
from ..jobs import states
from . import scope
from .adapter import (LOG_TEXT_BYTES, MAX_GRACE_S, MAX_WAIT_S, OP_TIMEOUT_S, Env, Gpus, Host, Job, PlanId,
                      SecretEnv, WaitState, Workdir, Yes, applies_plan, check_regex, on_host, refuse_if_readonly,
                      with_progress)

MAX_QUEUE_WAIT_S = 40.0


def _envs(env, secret_env):
    from ..jobs import spec

    envs = spec.pairs([f"{k}={v}" for k, v in (env or {}).items()], "env", env_names=True)
    return envs, spec.secrets(scope.allowed_secrets(secret_env, os.environ), os.environ, taken=envs)


def job_launch(
    host: Host,
    cmd: Annotated[str, Field(description="bash command line, run as given")],
    name: Annotated[Optional[str], Field(description="a name for the job (any text); later calls may name the job by it")] = None,
    key: Annotated[Optional[str], Field(description="idempotency key: an existing job with it is "
                                                     "returned instead of starting another")] = None,
    workdir: Optional[Workdir] = None,
    gpus: Optional[Gpus] = None,
    env: Optional[Env] = None,
    secret_env: Optional[SecretEnv] = None,
    engine: Annotated[Optional[str], Field(description=engines.help_text())] = None,
    resources: Annotated[Optional[dict[str, Union[int, str, bool]]], Field(
        description="what to ask the engine for, by its own flags: " + "; ".join(
            f"{e.name}: {', '.join(e.flags_for('launch'))}" for e in engines.each() if e.flags))] = None,
    max_retries: Annotated[Optional[int], Field(ge=0, le=100, description=RUN_HELP["max_retries"])] = None,
    retry_on: Annotated[Optional[list[str]], Field(description=RUN_HELP["retry_on"])] = None,
    checkpoint_dir: Annotated[Optional[str], Field(description=RUN_HELP["checkpoint_dir"])] = None,
    resume_arg: Annotated[Optional[str], Field(description=RUN_HELP["resume_arg"])] = None,
    stall_after: Annotated[Optional[str], Field(description=RUN_HELP["stall_after"])] = None,
    max_runtime: Annotated[Optional[str], Field(description=RUN_HELP["max_runtime"])] = None,
    keep_checkpoints: Annotated[Optional[int], Field(ge=1, description=RUN_HELP["keep_checkpoints"])] = None,
    notify: Annotated[Optional[str], Field(description=RUN_HELP["notify"])] = None,
) -> dict:
    """Start a command detached on the box (own session, log and exit records on the box), or
    as a job of another engine (a Slurm batch job ...). Returns the job id at once; then job_wait.
    With max_retries and the other run fields it is a run the box looks after: retried from the
    newest complete checkpoint, a stall stopped, a time limit kept; the id is the run's."""
    from ..jobs import spec
    from ..ops import jobs as op

    refuse_if_readonly("launch")
    envs, secrets = _envs(env, secret_env)
    pinned = spec.gpus(gpus)
    chosen = engines.get(engine)
    asked = dict(resources or {})
    engines.refuse_unknown(chosen, asked, "launch", "resources")
    from ..jobs import runpolicy

    policy = runpolicy.build(max_retries=max_retries, retry_on=",".join(retry_on) if retry_on else None,
                             checkpoint_dir=checkpoint_dir, resume_arg=resume_arg, stall_after=stall_after,
                             max_runtime=max_runtime, keep_checkpoints=keep_checkpoints, notify=notify)
    return on_host("launch", host, lambda t: op.launch(
        t, command=cmd, name=name, env=envs, secrets=secrets, workdir=workdir, gpus=pinned, key=key,
        engine=engine, resources=asked, timeout_s=OP_TIMEOUT_S, policy=policy))


def fleet_launch(
    gpus: Annotated[int, Field(ge=1, le=64, description="how many GPUs the job needs on one box")],
    cmd: Annotated[str, Field(description="bash command line, run as given")],
    fleet: Annotated[Optional[str], Field(description="a [fleet.NAME] group of the server's fleet file; "
                                                      "default: every box in it")] = None,
    gpu_type: Annotated[Optional[str], Field(description="only GPUs whose model names this (H100, A100-SXM4-80GB)")] = None,
    min_vram_gib: Annotated[Optional[float], Field(gt=0, le=4096, description="only GPUs with this much memory")] = None,
    name: Annotated[Optional[str], Field(description="a name for the job (any text)")] = None,
    key: Annotated[Optional[str], Field(description="idempotency key on the chosen box")] = None,
    workdir: Optional[Workdir] = None,
    env: Optional[Env] = None,
    secret_env: Optional[SecretEnv] = None,
) -> dict:
    """Place a job on the least loaded box of the fleet with enough free matching GPUs and launch
    it there, pinned to them (data.placement says why each other box was passed over). When no box
    fits, nothing starts: ok=false with what the fleet has."""
    from .. import fleetfile, placement
    from ..ops import place

    refuse_if_readonly("launch")
    envs, secrets = _envs(env, secret_env)
    return place.launch(fleetfile.boxes(fleet), placement.request(gpus, gpu_type, min_vram_gib), command=cmd,
                        name=name, key=key, workdir=workdir, env=envs, secrets=secrets, timeout_s=OP_TIMEOUT_S)


def job_retry(
    host: Host,
    job: Annotated[str, Field(description="the job to run again: its id, idempotency key or name")],
    resume_arg: Annotated[Optional[str], Field(description="text appended to its command, e.g. "
                                                           "'--resume last.ckpt'")] = None,
    key: Annotated[Optional[str], Field(description="idempotency key for the retry itself")] = None,
    env: Optional[Env] = None,
    secret_env: Optional[SecretEnv] = None,
) -> dict:
    """Start a child job from the same command as `job` (parent_job_id set), detached."""
    import shlex

    from ..ops import jobs as op

    refuse_if_readonly("retry")
    try:
        shlex.split(resume_arg or "")
    except ValueError as e:
        raise errors.UsageError(f"resume_arg cannot be split into words: {e}") from None
    envs, secrets = _envs(env, secret_env)
    return on_host("retry", host, lambda t: op.retry(t, job=job, env=envs, secrets=secrets, resume_arg=resume_arg,
                                                     key=key, timeout_s=OP_TIMEOUT_S))


def job_queue(
    host: Host,
    name: Annotated[str, Field(description="queue name on the box")],
    commands: Annotated[Optional[list[str]], Field(
        description="commands run one after another, each a job; give the whole list again with more appended "
                    "to extend a running queue, unchanged to resume it; omit to show the queue")] = None,
    cancel: Annotated[bool, Field(description="start no further entries (the running one keeps running)")] = False,
    wait_s: Annotated[float, Field(ge=0, le=MAX_QUEUE_WAIT_S, description="wait up to this long for the "
                                                                           "queue to finish")] = 0,
    workdir: Optional[Workdir] = None,
    gpus: Optional[Gpus] = None,
    env: Optional[Env] = None,
    secret_env: Optional[SecretEnv] = None,
) -> dict:
    """A sequential run queue on the box: each line a normal job, resumable, append-safe."""
    from ..jobs import spec
    from ..ops import jobs as op

    if commands or cancel:
        refuse_if_readonly("queue")
    if commands is not None and not all(c.strip() and "\n" not in c for c in commands):
        raise errors.UsageError("commands: each is one non-empty line")
    content = "".join(c + "\n" for c in commands) if commands else None
    envs, secrets = _envs(env, secret_env)
    return on_host("queue", host, lambda t: op.queue(
        t, name=name, content=content, env=envs, secrets=secrets, workdir=workdir, gpus=spec.gpus(gpus),
        wait=wait_s, cancel=cancel))


def job_status(
    host: Host,
    job: Annotated[Optional[str], Field(description="one job (default: list recent jobs)")] = None,
    limit: Annotated[int, Field(ge=1, le=200, description="jobs listed, newest first")] = 20,
) -> dict:
    """Job state derived from the box's records (UNREACHABLE is never read as dead)."""
    from ..ops import jobs as op

    return on_host("status", host, lambda t: op.status(t, job=job, limit=limit, timeout_s=OP_TIMEOUT_S))


job_status.__doc__ += f"\nStates: {states.listing()}."


def job_logs(
    host: Host,
    job: Job,
    tail: Annotated[int, Field(ge=1, le=2000, description="last N lines")] = 80,
    from_offset: Annotated[Optional[int], Field(ge=0, description="read from this byte offset (a "
                                                                    "next_offset) instead of the tail")] = None,
    max_bytes: Annotated[int, Field(ge=1, le=LOG_TEXT_BYTES, description="the page holds at most this many "
                                                                         "bytes")] = LOG_TEXT_BYTES,
) -> dict:
    """An exact page of a job's log, from its last lines or a byte offset; next_offset is the
    first byte not returned (page on while data.more)."""
    from ..ops import joblogs as op

    return on_host("logs", host, lambda t: op.logs(
        t, job=job, tail=tail, from_offset=from_offset, max_bytes=max_bytes, reconnect_s=10.0))


async def job_wait(
    ctx: Context,
    host: Host,
    job: Job,
    until: Annotated[Optional[list[WaitState]], Field(description="states to wait for (default: any "
                                                                  "terminal state)")] = None,
    log_regex: Annotated[Optional[str], Field(description="or until a log line matches")] = None,
    from_offset: Annotated[Optional[int], Field(ge=0, description="log_regex from this byte")] = None,
    timeout_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S, description="seconds to wait at most; call "
                                                                       "again while timed_out")] = MAX_WAIT_S,
    max_bytes: Annotated[int, Field(ge=0, le=LOG_TEXT_BYTES, description="new_text holds at most this many "
                                                                         "bytes")] = 8_000,
    until_event: Annotated[bool, Field(description="a run: also return at its next event")] = False,
    after_event: Annotated[Optional[int], Field(ge=0, description="a run: its events after this seq come back "
                                                                  "(default: those from the call on)")] = None,
) -> dict:
    """Wait on the box until the job reaches a state in until (or a log line matches). Returns
    state, timed_out, new_text (ending at next_offset); call again while timed_out. A run's state
    is the run's (RETRYING between attempts) and its events come back in events."""
    from ..ops import wait as op

    def work():
        wanted = op.parse_until(",".join(list(until or [op.TERMINAL]) + ([op.EVENT] if until_event else [])))
        if log_regex:
            check_regex("log_regex", log_regex)
        return on_host("wait", host, lambda t: op.wait(
            t, job=job, until=wanted, log_regex=log_regex, from_offset=from_offset, timeout_s=timeout_s,
            max_bytes=max_bytes, after_event=after_event))

    return await with_progress(ctx, timeout_s, lambda: f"waiting on the box for {job}", work)


def job_stop(
    host: Host,
    job: Job,
    grace_s: Annotated[float, Field(ge=0, le=MAX_GRACE_S, description="seconds from SIGTERM to SIGKILL")] = 10,
    yes: Yes = False,
    plan_id: Optional[PlanId] = None,
) -> dict:
    """SIGTERM the job's process group, SIGKILL after grace_s, and confirm every process is
    gone. Without yes: only the processes that would be signalled, and their plan_id."""
    from ..ops import jobs as op

    applies_plan("job_stop", "stop", yes, plan_id)
    return on_host("stop", host, lambda t: op.stop(t, job=job, grace=grace_s, yes=yes, plan=plan_id))


def job_diagnose(host: Host, job: Job) -> dict:
    """Why a job stopped or vanished (OOM kill, reboot, hangup, Xid, disk full, its own exit, a
    gpuops stop), with the evidence and what was ruled out."""
    from ..ops import diagnose as op

    return on_host("diagnose", host, lambda t: op.diagnose(t, job=job, timeout_s=OP_TIMEOUT_S))


def log_triage(
    path: Annotated[Optional[str], Field(description="a log file on this machine, under the directories "
                                                     "the server reads (GPUOPS_MCP_ROOTS)")] = None,
    job: Annotated[Optional[str], Field(description="a gpuops job id: triage its log on host")] = None,
    host: Annotated[Optional[str], Field(description="with job: the box it ran on (default 'local')")] = None,
) -> dict:
    """Classify a job log without shipping it: status, failure class with evidence lines,
    progress projection, advice. Give exactly one of path or job (job with host)."""
    from ..ops import triage as op

    if bool(path) == bool(job):
        raise errors.UsageError("log_triage: give exactly one of path or job")
    if host and not job:
        raise errors.UsageError("log_triage: host goes with job (the box the job ran on)")
    if path:
        return op.triage_local(log=scope.local_path(path, os.environ))
    return on_host("triage", host or "local", lambda t: op.triage_remote(t, job=job))
