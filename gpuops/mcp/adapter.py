"""What every tool shares: the plan rule of a destructive apply, one host, and progress.

A tool function returns the operation's envelope or raises a GpuopsError; gpuops.mcp.server turns
either into the tool result. Blocking operations get timeouts that keep a call under about 50 s
(clients give up near 60 s).
"""

from .. import errors
from ..surface import common

OP_TIMEOUT_S = common.CALL_S  # on-box work per call, leaving room for the SSH connect under ~50 s
LOG_TEXT_BYTES = common.PAGE  # of the ~40k characters a result may take (gpuops.mcp.clientfit), room for escapes
MAX_WAIT_S = common.WAIT_S  # one job_wait call; clients give up near 60 s, so a longer wait is several calls
PROGRESS_EVERY_S = 2.0


def applies_plan(tool, yes, plan_id):
    """A destructive apply (`yes`) through MCP names the plan it was shown: an agent calls without
    yes, reads the plan, then calls again with yes and its plan_id (refused if what it would
    touch changed since). A person at the CLI may still say --yes alone; an agent must not skip
    the plan it was meant to read. (The server's level is checked before: gpuops.mcp.toolsets.)"""
    if yes and not plan_id:
        raise errors.UsageError(f"{tool}: yes applies a plan: call {tool} without yes, read its plan, then again with "
                                "yes and the plan_id it showed")


def on_host(command, host: str, op):
    """`op(target) -> envelope` on exactly one host, the way the CLI's --host does it."""
    from ..ops.hosts import on_hosts, one_host

    return on_hosts(command, one_host(command, host), op)


def check_regex(name: str, pattern: str):
    import re

    try:
        re.compile(pattern)
    except re.error as e:
        raise errors.UsageError(f"{name} is not a valid regular expression: {e}") from None


async def with_progress(ctx, total_s, message, work):
    """`work()` on a worker thread, with a progress notification every PROGRESS_EVERY_S meanwhile
    (`message()` says what is happening), so a client that asked for progress sees the call is
    alive and may extend its own timeout. The progress is the seconds waited: always increasing."""
    import anyio

    async def beat() -> None:
        waited = 0.0
        while True:
            await anyio.sleep(PROGRESS_EVERY_S)
            waited += PROGRESS_EVERY_S
            # past its expected total (an SSH connect, a slow answer) the progress still grows
            await ctx.report_progress(waited, total_s if total_s and waited <= total_s else None, message())

    def caught():  # raised after the task group, so the caller sees the error itself, not a group of one
        try:
            return work(), None
        except Exception as e:  # noqa: BLE001 - re-raised below
            return None, e

    async with anyio.create_task_group() as group:
        group.start_soon(beat)
        try:
            done, failed = await anyio.to_thread.run_sync(caught)
        finally:
            group.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return done
