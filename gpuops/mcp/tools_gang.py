"""The gang tools: one torchrun run across several boxes (gpuops.ops.gang and gangview).

gang_launch and gang_retry start processes on every box (destructive, like job_launch); gang_stop
only plans unless yes; status, logs and diagnose read. The gang id gang_launch returns is the
handle of every other call. Each returns the operation's envelope or raises a GpuopsError.
"""

from typing import Annotated, Optional

from mcp.server.mcpserver import Context
from pydantic import Field

from .. import errors
from .adapter import (LOG_TEXT_BYTES, MAX_GRACE_S, MAX_WAIT_S, Env, PlanId, SecretEnv, WaitState, Workdir, Yes,
                      applies_plan, refuse_if_readonly, with_progress)
from .tools_jobs import _envs

Gang = Annotated[str, Field(description="the gang id gang_launch returned")]
# The preflight's rendezvous test waits at most this long, so a launch answers well inside a call.
LAUNCH_WINDOW_S = 10.0


def gang_launch(
    cmd: Annotated[str, Field(description="training script and arguments torchrun runs, e.g. 'train.py --lr 3e-4'")],
    hosts: Annotated[Optional[list[str]], Field(min_length=1, max_length=64, description="boxes; the first hosts "
                                                                                         "the rendezvous")] = None,
    fleet: Annotated[Optional[str], Field(description="instead of hosts: a [fleet.NAME] group of the server's fleet "
                                                      "file, every box of it in its order")] = None,
    nproc_per_node: Annotated[int, Field(ge=1, le=64, description="processes (GPUs) per box")] = 1,
    rdzv_port: Annotated[int, Field(ge=1024, le=65535, description="rendezvous port on the first box")] = 29500,
    rdzv_host: Annotated[Optional[str], Field(description="first box's address as the others reach it")] = None,
    code: Annotated[Optional[str], Field(description="directory that must be identical on every box")] = None,
    workdir: Optional[Workdir] = None,
    name: Annotated[Optional[str], Field(description="a name for the gang's jobs")] = None,
    env: Optional[Env] = None,
    secret_env: Optional[SecretEnv] = None,
) -> dict:
    """Start one torchrun run across boxes, after a gang preflight (same torch and driver, same
    code, rendezvous port free and reachable, interfaces, clocks); a refusal starts nothing and
    says why. Returns the gang id."""
    from .. import fleetfile
    from ..ops import gang

    refuse_if_readonly("launch")
    if bool(hosts) == bool(fleet):
        raise errors.UsageError("give hosts or fleet (a [fleet.NAME] group): one of them names the gang's boxes")
    envs, secrets = _envs(env, secret_env)
    return gang.launch(list(hosts) if hosts else fleetfile.aliases(fleet), cmd=cmd, nproc_per_node=nproc_per_node, port=rdzv_port, rdzv_host=rdzv_host,
                       code=code, workdir=workdir, name=name, env=envs, secrets=secrets, window_s=LAUNCH_WINDOW_S)


def gang_retry(
    gang: Gang,
    resume_arg: Annotated[Optional[str], Field(description="text appended to the command, e.g. "
                                                           "'--resume last.pt'")] = None,
    env: Optional[Env] = None,
    secret_env: Optional[SecretEnv] = None,
) -> dict:
    """Launch a gang again (a new id, its parent named) once none of its nodes runs."""
    from ..ops import gang as op

    refuse_if_readonly("retry")
    envs, secrets = _envs(env, secret_env)
    return op.retry(gang, resume_arg=resume_arg, env=envs, secrets=secrets, window_s=LAUNCH_WINDOW_S)


def gang_status(gang: Gang) -> dict:
    """A gang's state from its nodes: RUNNING only when all run; DEGRADED or the first failed
    node's state, that node named."""
    from ..ops import gangview

    return gangview.status(gang)


async def gang_wait(
    ctx: Context,
    gang: Gang,
    until: Annotated[Optional[list[WaitState]], Field(description="states to wait for (default: any "
                                                                  "terminal state)")] = None,
    timeout_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S, description="seconds to wait at most; call "
                                                                       "again while timed_out")] = MAX_WAIT_S,
) -> dict:
    """Wait until the whole gang reaches a state in until; it returns sooner when that can no
    longer happen (it ended otherwise, or DEGRADED). Call again while timed_out."""
    from ..ops import gangview, wait

    def work():
        wanted = wait.parse_until(",".join(until) if until else wait.TERMINAL)
        return gangview.wait(gang, until=wanted, timeout_s=timeout_s)

    return await with_progress(ctx, timeout_s, lambda: f"waiting for gang {gang}", work)


def gang_logs(
    gang: Gang,
    tail: Annotated[int, Field(ge=1, le=2000, description="lines per node")] = 40,
    cursors: Annotated[Optional[str], Field(description="data.cursors of an earlier call")] = None,
    max_bytes: Annotated[int, Field(ge=1, le=LOG_TEXT_BYTES, description="per node")] = 8_000,
) -> dict:
    """Every node's log at once, each line prefixed with its node; data.cursors goes on from here."""
    from ..jobs import gangstore
    from ..ops import gangview

    parsed = gangview.parse_cursors(cursors, gangstore.load(gang)) if cursors else None
    return gangview.logs(gang, tail=tail, cursors=parsed, max_bytes=max_bytes, reconnect_s=10.0)


def gang_stop(
    gang: Gang,
    grace_s: Annotated[float, Field(ge=0, le=MAX_GRACE_S, description="seconds from SIGTERM to SIGKILL")] = 10,
    yes: Yes = False,
    plan_id: Optional[PlanId] = None,
) -> dict:
    """Stop every node of a gang. Without yes: the processes on each node and the gang's plan_id."""
    from ..ops import gangview

    applies_plan("gang_stop", "stop", yes, plan_id)
    return gangview.stop(gang, grace=grace_s, yes=yes, plan=plan_id)


def gang_diagnose(gang: Gang) -> dict:
    """Why a gang stopped: the node that failed first, and its verdict (evidence, ruled out)."""
    from ..ops import gangview

    return gangview.diagnose(gang)
