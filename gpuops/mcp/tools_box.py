"""The box and data tools: preflight, fleet, reap, gotchas, profiles (and the guess), teardown-check,
verify, push, pull.

Each returns the operation's envelope (the same gpuops.ops call the CLI makes) or raises a
GpuopsError; gpuops.mcp.server makes the result. Local paths (push's source, pull's destination,
verify's reference) must lie under the owner's roots (gpuops.mcp.scope), since a model steered by
hostile text could otherwise send this machine's secrets to a box, or overwrite them.
"""

import os

from mcp.server.mcpserver import Context

from .. import errors
from . import scope, trim
from .adapter import OP_TIMEOUT_S, Stages, applies_plan, on_host, with_progress


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


def gotcha_lookup(query, limit):
    from ..ops import catalog

    return catalog.find_gotchas(query, limit)


def profiles_show(name):
    from ..ops import catalog

    return catalog.show_profile(name) if name else catalog.list_profiles()


def profile_guess(host):
    from ..ops import catalog

    return on_host("profiles", host, catalog.guess_on)


def teardown_check(host, profile, keep, verb):
    from ..ops import teardown

    return teardown.teardown_check(host, profile, keep or [], verb)


def _options(stages, exclude, include_git, rehash=False, **more):
    from ..ops.sync import Options

    return Options(excludes=tuple(exclude or ()), include_git=include_git, rehash=rehash, retry_for=OP_TIMEOUT_S,
                   progress=stages, **more)


async def _synced(ctx, verb, host, local, run):
    """`run(target, local path, progress) -> envelope` for a sync verb, on a worker thread while
    progress notifications say its stage; `local` only under the owner's roots."""
    stages = Stages()

    def work():
        real = scope.local_path(local, os.environ)
        return on_host(verb, host, lambda t: run(t, real, stages))

    return await with_progress(ctx, None, lambda: str(stages), work)


async def data_verify(ctx: Context, host, local, remote, exclude, include_git, rehash):
    from ..ops.verify import verify

    return await _synced(ctx, "verify", host, local, lambda t, real, stages: verify(
        t, real, remote, _options(stages, exclude, include_git, rehash)))


async def data_push(ctx: Context, host, local, remote, exclude, include_git, delete, yes, plan_id, no_budget, compress,
                    rehash, fix_crlf, profile):
    from ..ops import push as op

    _check_plan("data_push", delete, yes, plan_id)
    return await _synced(ctx, "push", host, local, lambda t, real, stages: op.push(t, real, remote, _options(
        stages, exclude, include_git, rehash, delete=delete, yes=yes, plan=plan_id, fix_crlf=fix_crlf, profile=profile,
        check_budget=not no_budget, compress=compress)))


async def data_pull(ctx: Context, host, remote, local, exclude, include_git, delete, yes, plan_id, no_budget, compress,
                    rehash):
    from ..ops import pull as op

    _check_plan("data_pull", delete, yes, plan_id)
    return await _synced(ctx, "pull", host, local, lambda t, real, stages: op.pull(t, remote, real, _options(
        stages, exclude, include_git, rehash, delete=delete, yes=yes, plan=plan_id, check_budget=not no_budget,
        compress=compress)))


def _check_plan(tool, delete, yes, plan_id):
    if plan_id is not None and not delete:
        raise errors.UsageError("plan_id names a plan of deletions: it goes with delete")
    if delete:
        applies_plan(tool, yes, plan_id)


TOOLS = (host_preflight, fleet_status, vram_reap, gotcha_lookup, profiles_show, profile_guess, teardown_check,
         data_verify, data_push, data_pull)
