"""The box and data tools written by hand: preflight, fleet, reap, verify, push, pull (gotchas,
profiles and teardown-check are made from their descriptions: gpuops.mcp.made).

Each returns the operation's envelope (the same gpuops.ops call the CLI makes; a copy runs as the
CLI verb itself, as a request: gpuops.mcp.requests) or raises a GpuopsError; gpuops.mcp.server
makes the result. Local paths (push's source, pull's destination, verify's reference) must lie
under the owner's roots (gpuops.mcp.scope), and so must the box's end when the box is this machine,
since a model steered by hostile text could otherwise send this machine's secrets to a box, or
overwrite them.
"""

import os

from mcp.server.mcpserver import Context

from .. import errors, surface
from . import requests, scope, trim
from .adapter import OP_TIMEOUT_S, applies_plan, on_host


def host_preflight(host, profile, paths, fields, failed_only):
    from ..ops import preflight as op

    return trim.preflight(on_host("preflight", host, lambda t: op.preflight(t, profile=profile, paths=paths or (),
                                                                           timeout_s=OP_TIMEOUT_S)),
                          fields, failed_only)


def fleet_status(hosts, fleet, window_s):
    from .. import fleetfile
    from ..ops import fleet as op

    if hosts and fleet:
        raise errors.UsageError("fleet_status: give hosts or fleet, not both")
    boxes = fleetfile.for_hosts(hosts) if hosts else fleetfile.boxes(fleet)
    return op.inventory(boxes, window_s=window_s)


def vram_reap(host, gpu, yes, plan_id, min_age_s, idle_window_s, term_wait_s):
    from ..ops import reap as op

    applies_plan("vram_reap", yes, plan_id)
    return on_host("reap", host, lambda t: op.reap(t, gpu=gpu, min_age=min_age_s, idle_window=idle_window_s,
                                                   term_wait=term_wait_s, yes=yes, plan=plan_id))


async def _copy(ctx, tool, host, args, what, wait_s):
    """A copy as a request (gpuops.mcp.requests): its answer within `wait_s`, or its request_id.
    One host, as every tool takes; the local path already resolved under the owner's roots."""
    from ..ops.hosts import one_host

    one_host(surface.tool(tool).verb, host)
    return await requests.waited(ctx, requests.start(tool, dict(args, host=host), what), wait_s)


async def data_verify(ctx: Context, host, local, remote, exclude, include_git, rehash, wait_s):
    real, remote = scope.local_path(local, os.environ), scope.box_path(host, remote, os.environ)
    return await _copy(ctx, "data_verify", host, dict(local=real, remote=remote, exclude=exclude,
                                                      include_git=include_git, rehash=rehash),
                       f"verify {real} against {host}:{remote}", wait_s)


async def data_push(ctx: Context, host, local, remote, exclude, include_git, delete, yes, plan_id, no_budget, compress,
                    rehash, wait_s, fix_crlf, profile):
    _check_plan("data_push", delete, yes, plan_id)
    real, remote = scope.local_path(local, os.environ), scope.box_path(host, remote, os.environ)
    return await _copy(ctx, "data_push", host, dict(
        local=real, remote=remote, exclude=exclude, include_git=include_git, delete=delete, yes=yes, plan_id=plan_id,
        no_budget=no_budget, compress=compress, rehash=rehash, fix_crlf=fix_crlf, profile=profile),
        f"push {real} to {host}:{remote}", wait_s)


async def data_pull(ctx: Context, host, remote, local, exclude, include_git, delete, yes, plan_id, no_budget, compress,
                    rehash, wait_s):
    _check_plan("data_pull", delete, yes, plan_id)
    real, remote = scope.local_path(local, os.environ), scope.box_path(host, remote, os.environ)
    return await _copy(ctx, "data_pull", host, dict(
        remote=remote, local=real, exclude=exclude, include_git=include_git, delete=delete, yes=yes, plan_id=plan_id,
        no_budget=no_budget, compress=compress, rehash=rehash), f"pull {host}:{remote} to {real}", wait_s)


def _check_plan(tool, delete, yes, plan_id):
    if plan_id is not None and not delete:
        raise errors.UsageError("plan_id names a plan of deletions: it goes with delete")
    if delete:
        applies_plan(tool, yes, plan_id)


TOOLS = (host_preflight, fleet_status, vram_reap, data_verify, data_push, data_pull)
