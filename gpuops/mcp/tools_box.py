"""The box and data tools: preflight, fleet, reap, gotchas, profiles (and the guess), teardown-check,
verify, push, pull.

Each returns the operation's envelope (the same gpuops.ops call the CLI makes) or raises a
GpuopsError; gpuops.mcp.server makes the result. Local paths (push's source, pull's destination,
verify's reference) must lie under the owner's roots (gpuops.mcp.scope), since a model steered by
hostile text could otherwise send this machine's secrets to a box, or overwrite them.
"""

import os
from typing import Annotated, Literal, Optional

from mcp.server.mcpserver import Context
from pydantic import Field

from .. import errors
from ..profiles import VERBS as TEARDOWN_VERBS
from . import scope
from .adapter import (OP_TIMEOUT_S, Exclude, Host, IncludeGit, PlanId, Stages, Yes, applies_plan, on_host,
                      refuse_if_readonly, with_progress)

Profile = Annotated[str, Field(description="platform profile (see profiles_show)")]
Delete = Annotated[bool, Field(description="remove paths that exist only at the destination: listed, with a plan_id, "
                                           "unless yes")]
YesDelete = Annotated[bool, Field(description="with delete: really delete")]
_LOCAL = "under the directories the server reads (GPUOPS_MCP_ROOTS)"


def host_preflight(
    host: Host,
    profile: Optional[Profile] = None,
    paths: Annotated[Optional[list[str]], Field(
        description="directories the run writes to, checked for free space and inodes; DIR:SIZE for one that "
                    "needs SIZE free (e.g. /data:500G)")] = None,
) -> dict:
    """Check a GPU box before spending GPU-hours on it: GPUs, driver, disks, memory, cgroup
    limits, kernel log. ok=false lists failing findings, each with a fix."""
    from ..ops import preflight as op

    return on_host("preflight", host, lambda t: op.preflight(t, profile=profile, paths=paths or (),
                                                            timeout_s=OP_TIMEOUT_S))


def fleet_status(
    hosts: Annotated[Optional[list[str]], Field(
        description="boxes to ask (ssh_config aliases or user@host:port); default: the server's fleet file")] = None,
    fleet: Annotated[Optional[str], Field(description="a [fleet.NAME] group of the server's fleet file")] = None,
    window_s: Annotated[float, Field(ge=0.5, le=10, description="seconds GPU use is sampled over")] = 2,
) -> dict:
    """Every rented box at once: GPUs, VRAM, utilisation, gpuops jobs, disk headroom, uptime, and
    which box is idle since when and what that idle time cost. One bad box is its own row."""
    from .. import fleetfile
    from ..ops import fleet as op

    if hosts and fleet:
        raise errors.UsageError("fleet_status: give hosts or fleet, not both")
    boxes = fleetfile.for_hosts(hosts) if hosts else fleetfile.boxes(fleet)
    return op.inventory(boxes, window_s=window_s)


def vram_reap(
    host: Host,
    gpu: Annotated[Optional[int], Field(ge=0, description="only holders of this GPU index")] = None,
    yes: Yes = False,
    plan_id: Optional[PlanId] = None,
    min_age_s: Annotated[float, Field(ge=0, description="a holder younger than this is never reaped")] = 600,
    idle_window_s: Annotated[float, Field(ge=0, le=10, description="seconds GPU use is watched to call a "
                                                                   "holder idle")] = 10,
    term_wait_s: Annotated[float, Field(ge=0, le=10, description="seconds from SIGTERM to SIGKILL")] = 10,
) -> dict:
    """Find processes holding GPU memory and, with yes, reap the orphaned, finished and idle
    ones; live work is never touched. Without yes: the plan only (data.plan.plan_id)."""
    from ..ops import reap as op

    applies_plan("vram_reap", "reap", yes, plan_id)
    return on_host("reap", host, lambda t: op.reap(t, gpu=gpu, min_age=min_age_s, idle_window=idle_window_s,
                                                   term_wait=term_wait_s, yes=yes, plan=plan_id))


def gotcha_lookup(
    query: Annotated[str, Field(description="a gotcha id (U7, AD4) or keywords (inode, xid, zombie)")],
    limit: Annotated[int, Field(ge=1, le=20, description="gotchas returned at most, best match first")] = 5,
) -> dict:
    """Look up a known GPU-box gotcha: what you see, why, the fix, and how gpuops checks it."""
    from ..ops import catalog

    return catalog.find_gotchas(query, limit)


def profiles_show(
    name: Annotated[Optional[str], Field(description="one profile in full (default: list them)")] = None,
) -> dict:
    """Platform profiles: paths, what the meter-stop verb deletes, detach method, thresholds."""
    from ..ops import catalog

    return catalog.show_profile(name) if name else catalog.list_profiles()


def profile_guess(host: Host) -> dict:
    """Which platform profile a box resembles, from its hostname, mounts, environment variable
    names (never values) and marker files: a guess, never applied."""
    from ..ops import catalog

    return on_host("profiles", host, catalog.guess_on)


def teardown_check(
    host: Annotated[str, Field(description="the box, named as when its outputs were pulled")],
    profile: Profile,
    keep: Annotated[Optional[list[str]], Field(description="paths on the box you need afterwards: absolute, or "
                                                           "relative to the login home")] = None,
    verb: Annotated[Literal[TEARDOWN_VERBS], Field(description="what is about to happen to the box")] = "stop",
) -> dict:
    """Before stopping or destroying a box: what the platform deletes, what still bills, and
    whether each kept path has a verified pull here. Reads local records only."""
    from ..ops import teardown

    return teardown.teardown_check(host, profile, keep or [], verb)


def _options(stages, exclude, include_git, **more):
    from ..ops.sync import Options

    return Options(excludes=tuple(exclude or ()), include_git=include_git, retry_for=OP_TIMEOUT_S, progress=stages,
                   **more)


async def _synced(ctx, verb, host, local, run, mutates=True):
    """`run(target, local path, progress) -> envelope` for a sync verb, on a worker thread while
    progress notifications say its stage; `local` only under the owner's roots."""
    if mutates:
        refuse_if_readonly(verb)
    stages = Stages()

    def work():
        real = scope.local_path(local, os.environ)
        return on_host(verb, host, lambda t: run(t, real, stages))

    return await with_progress(ctx, None, lambda: str(stages), work)


async def data_verify(
    ctx: Context,
    host: Host,
    local: Annotated[str, Field(description=f"local file or directory, {_LOCAL}")],
    remote: Annotated[str, Field(description="path on the box")],
    exclude: Optional[Exclude] = None,
    include_git: IncludeGit = False,
) -> dict:
    """Compare content hashes of a local tree and its copy on the box; ok only when every file
    matches. Lists what differs or is missing."""
    from ..ops.verify import verify

    return await _synced(ctx, "verify", host, local, lambda t, real, stages: verify(
        t, real, remote, _options(stages, exclude, include_git)), mutates=False)


async def data_push(
    ctx: Context,
    host: Host,
    local: Annotated[str, Field(description=f"local directory to send, {_LOCAL}")],
    remote: Annotated[str, Field(description="directory on the box (created if missing)")],
    exclude: Optional[Exclude] = None,
    include_git: IncludeGit = False,
    delete: Delete = False,
    yes: YesDelete = False,
    plan_id: Optional[PlanId] = None,
    fix_crlf: Annotated[bool, Field(description="convert shell scripts with CRLF line endings to LF first")] = False,
    profile: Optional[Profile] = None,
) -> dict:
    """Send a local directory to the box, resuming after drops, and prove it arrived (sha256 on
    both ends). For a tree that takes minutes, use the CLI: a call should end within a minute."""
    from ..ops import push as op

    _check_plan("data_push", "push", delete, yes, plan_id)
    return await _synced(ctx, "push", host, local, lambda t, real, stages: op.push(t, real, remote, _options(
        stages, exclude, include_git, delete=delete, yes=yes, plan=plan_id, fix_crlf=fix_crlf, profile=profile)))


async def data_pull(
    ctx: Context,
    host: Host,
    remote: Annotated[str, Field(description="directory on the box to fetch")],
    local: Annotated[str, Field(description=f"local directory to write (created if missing), {_LOCAL}")],
    exclude: Optional[Exclude] = None,
    include_git: IncludeGit = False,
    delete: Delete = False,
    yes: YesDelete = False,
    plan_id: Optional[PlanId] = None,
) -> dict:
    """Fetch a directory from the box, verify it, and record the verified pull (teardown_check
    reads it). For a tree that takes minutes, use the CLI: a call should end within a minute."""
    from ..ops import pull as op

    _check_plan("data_pull", "pull", delete, yes, plan_id)
    return await _synced(ctx, "pull", host, local, lambda t, real, stages: op.pull(t, remote, real, _options(
        stages, exclude, include_git, delete=delete, yes=yes, plan=plan_id)))


def _check_plan(tool, verb, delete, yes, plan_id):
    if plan_id is not None and not delete:
        raise errors.UsageError("plan_id names a plan of deletions: it goes with delete")
    if delete:
        applies_plan(tool, verb, yes, plan_id)
