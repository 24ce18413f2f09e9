"""The gang tools: one torchrun run across several boxes (gpuops.ops.gang and gangview).

gang_launch and gang_retry start processes on every box (destructive, like job_launch); gang_stop
only plans unless yes; status, logs and diagnose read. The gang id gang_launch returns is the
handle of every other call. Each returns the operation's envelope or raises a GpuopsError.
"""

import os

from mcp.server.mcpserver import Context

from .. import errors
from . import scope
from .adapter import applies_plan, with_progress
from .tools_jobs import _envs, kept

# The preflight's rendezvous test waits at most this long, so a launch answers well inside a call.
LAUNCH_WINDOW_S = 10.0


def gang_launch(cmd, hosts, fleet, nproc_per_node, rdzv_port, rdzv_host, code, workdir, name, env, secret_env,
                max_restarts, nnodes, max_retries, retry_on, checkpoint_dir, resume_arg, stall_after_s, max_runtime_s,
                keep_checkpoints, keep_best, vault, lost_after_s, stop_when_done, stop_idle_s, budget,
                keeper_host):
    from .. import fleetfile
    from ..jobs import runpolicy
    from ..keeper import request
    from ..ops import gang

    keeping = dict(lost_after_s=lost_after_s, stop_when_done=stop_when_done, stop_idle_s=stop_idle_s, budget_usd=budget)
    keeps = request.asked(vault, keeping) or bool(keeper_host)
    if not keeps and bool(hosts) == bool(fleet):
        raise errors.UsageError("give hosts or fleet (a [fleet.NAME] group): one of them names the gang's boxes")
    scope.runs_here("gang_launch", hosts or (), os.environ)
    envs, secrets = _envs(env, secret_env)
    policy = runpolicy.build(max_retries=max_retries, retry_on=retry_on, checkpoint_dir=checkpoint_dir,
                             resume_arg=resume_arg, stall_after=stall_after_s, max_runtime=max_runtime_s,
                             keep_checkpoints=keep_checkpoints, keep_best=keep_best)
    if keeps:  # kept: hosts are its first nodes, the fleet its replacements
        return kept(vault, keeping, dict(
            fleet=fleet, cmd=cmd, policy=policy, hosts=list(hosts or ()), name=name, env=envs, workdir=workdir,
            secrets=secrets, dropped={"--code": code, "--rdzv-host": rdzv_host},
            gang=dict(nproc_per_node=nproc_per_node, rdzv_port=rdzv_port, nnodes=nnodes, max_restarts=max_restarts)),
            keeper_host, tool="gang_launch")
    return gang.launch(list(hosts) if hosts else fleetfile.aliases(fleet), cmd=cmd, nproc_per_node=nproc_per_node,
                       port=rdzv_port, rdzv_host=rdzv_host, code=code, workdir=workdir, name=name, env=envs,
                       secrets=secrets, window_s=LAUNCH_WINDOW_S, policy=policy, max_restarts=max_restarts,
                       nnodes=nnodes)


def gang_retry(gang, resume_arg, env, secret_env):
    from ..ops import gang as op

    envs, secrets = _envs(env, secret_env)
    return op.retry(gang, resume_arg=resume_arg, env=envs, secrets=secrets, window_s=LAUNCH_WINDOW_S)


def gang_status(gang):
    from ..ops import gangview

    return gangview.status(gang)


async def gang_wait(ctx: Context, gang, until, timeout_s):
    from ..ops import gangview, wait

    def work():
        wanted = wait.parse_until(",".join(until) if until else wait.TERMINAL)
        return gangview.wait(gang, until=wanted, timeout_s=timeout_s)

    return await with_progress(ctx, timeout_s, lambda: f"waiting for gang {gang}", work)


def gang_logs(gang, tail, cursors, max_bytes):
    from ..jobs import gangstore
    from ..ops import gangview

    parsed = gangview.parse_cursors(cursors, gangstore.load(gang)) if cursors else None
    return gangview.logs(gang, tail=tail, cursors=parsed, max_bytes=max_bytes, reconnect_s=10.0)


def gang_stop(gang, grace_s, yes, plan_id):
    from ..ops import gangview

    applies_plan("gang_stop", yes, plan_id)
    return gangview.stop(gang, grace=grace_s, yes=yes, plan=plan_id)


def gang_diagnose(gang):
    from ..ops import gangview

    return gangview.diagnose(gang)


TOOLS = (gang_launch, gang_retry, gang_status, gang_wait, gang_logs, gang_stop, gang_diagnose)
