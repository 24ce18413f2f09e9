"""The MCP server: one tool per gpuops operation, each a thin call into gpuops.ops.

Every tool returns the operation's envelope (gpuops.envelope), `summary` first, bounded by
gpuops.mcp.budget, as compact JSON in both the structured content and the one text block:
some clients show the model only one of the two. A negative answer (a failed check, a job
that failed, a dry run) is a successful call with ok=false; only a GpuopsError (unreachable,
usage, not found, refused) or a bug makes an is_error result, and that still carries the whole
envelope as text, since several clients drop structured content on errors.

Blocking operations get timeouts that keep a call under about 50 s (clients give up near 60 s).
GPUOPS_MODE=readonly leaves the tools that change a box out of tools/list, and refuses their calls
(checked when the call comes, for a mode set after the start).
"""

import logging
import os
from typing import Annotated, Any, Literal, Optional

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import __version__, errors
from ..envelope import envelope, error_envelope, public
from ..jobs import states
from . import budget, scope

log = logging.getLogger("gpuops.mcp")

MODE_ENV = "GPUOPS_MODE"
OP_TIMEOUT_S = 40.0  # on-box work per call, leaving room for the SSH connect under ~50 s
LOG_TEXT_BYTES = 24_000  # of the ~40k characters a result may take (gpuops.mcp.budget), room for escapes
MAX_WAIT_S = 45.0  # one job_wait call; clients give up near 60 s, so a longer wait is several calls
PROGRESS_EVERY_S = 2.0
MAX_GRACE_S = 30.0
LOG_RESULT_META = {"anthropic/maxResultSizeChars": 60_000}

INSTRUCTIONS = """\
gpuops operates rented GPU boxes over SSH. host is 'local', an ssh_config alias or user@host:port.
Every result is one JSON envelope: summary, ok, data, findings, next (suggested CLI commands).
ok=false with no error is an answer (a failed check, a failed job, a dry run), not a failure.
job_stop and vram_reap only plan unless yes=true: call once, read the plan, then repeat with yes
(job_stop: and the plan_id it showed, so only that set of processes is signalled).
Jobs run detached on the box: job_launch, then job_wait (repeat while timed_out), then job_diagnose or
log_triage when it did not complete; job_logs pages exactly with from_offset=next_offset."""

READ = ToolAnnotations(read_only_hint=True, open_world_hint=True)
READ_LOCAL = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class Envelope(BaseModel):
    """The gpuops result envelope (schema_version 1); `data` differs per tool."""

    model_config = ConfigDict(extra="allow", json_schema_extra=lambda s: s.update(budget.lean_schema(s, inputs=False)))
    summary: str
    ok: bool
    command: str
    host: Optional[str] = None
    data: dict[str, Any] = {}
    findings: list[dict[str, Any]] = []
    next: list[str] = []
    error: Optional[dict[str, Any]] = None


Result = Annotated[CallToolResult, Envelope]
Host = Annotated[str, Field(description="'local', an ssh_config alias or user@host:port (one host)")]
Job = Annotated[str, Field(description="job id, idempotency key or name")]
Yes = Annotated[bool, Field(description="false: only report what would be signalled; true: do it")]
WaitState = Literal[tuple(s for s in states.NAMES if s not in (states.PENDING, states.UNREACHABLE))]


# ---------------------------------------------------------------- the adapter


def respond(command, produce, mutates=False) -> CallToolResult:
    """Run `produce() -> envelope` and turn it into a tool result; see the module docstring."""
    try:
        if mutates:
            refuse_if_readonly(command)
        doc = produce()
    except errors.GpuopsError as e:
        doc = error_envelope(command, e)
    except Exception as e:  # a bug: keep the traceback on the server's stderr, not in the result
        log.exception("tool %s failed", command)
        doc = envelope(command, ok=False, summary=f"internal error in gpuops ({type(e).__name__}); "
                                                  "see the MCP server's stderr",
                       error={"kind": "internal", "message": type(e).__name__})
    doc = budget.bound(public(doc))
    return CallToolResult(content=[TextContent(type="text", text=budget.compact(doc))], structured_content=doc,
                          is_error=bool(doc.get("error")))


def refuse_if_readonly(command):
    mode = os.environ.get(MODE_ENV, "").strip().lower() or "operate"
    if mode != "operate":  # anything but the default fails closed, a typo included
        raise errors.Refused(f"{command} would change the box, and this server runs with {MODE_ENV}={mode}")


def on_host(command, host, op):
    """`op(target) -> envelope` on exactly one host, the way the CLI's --host does it."""
    from ..ops.hosts import on_hosts, one_host

    return on_hosts(command, one_host(command, host), op)


# ---------------------------------------------------------------- tools


def host_preflight(
    host: Host,
    profile: Annotated[Optional[str], Field(description="platform profile (see profiles_show)")] = None,
) -> Result:
    """Check a GPU box before spending GPU-hours on it: GPUs, driver, disks, memory, cgroup
    limits, kernel log. ok=false lists failing findings, each with a fix."""
    from ..ops import preflight as op

    return respond("preflight", lambda: on_host(
        "preflight", host, lambda t: op.preflight(t, profile=profile, timeout_s=OP_TIMEOUT_S)))


def job_launch(
    host: Host,
    cmd: Annotated[str, Field(description="bash command line, run as given")],
    name: Optional[str] = None,
    key: Annotated[Optional[str], Field(description="idempotency key: an existing job with it is "
                                                     "returned instead of starting another")] = None,
    workdir: Annotated[Optional[str], Field(description="directory on the box")] = None,
    gpus: Annotated[Optional[str], Field(description="CUDA_VISIBLE_DEVICES, e.g. '0,1'")] = None,
    env: Annotated[Optional[dict[str, str]], Field(description="environment for the job (not secrets)")] = None,
    secret_env: Annotated[Optional[list[str]], Field(
        description="NAMES of variables set in this server's environment and allowed by its owner "
                    "(GPUOPS_MCP_SECRETS); their values reach the job through stdin only")] = None,
) -> Result:
    """Start a command detached on the box (own session, log and exit records on the box).
    Returns the job id at once; poll job_status."""
    from ..jobs import spec
    from ..ops import jobs as op

    def produce():
        envs = spec.pairs([f"{k}={v}" for k, v in (env or {}).items()], "env", env_names=True)
        secrets = spec.secrets(scope.allowed_secrets(secret_env, os.environ), os.environ, taken=envs)
        pinned = spec.gpus(gpus)
        return on_host("launch", host, lambda t: op.launch(
            t, command=cmd, name=name, env=envs, secrets=secrets, workdir=workdir, gpus=pinned, key=key,
            timeout_s=OP_TIMEOUT_S))

    return respond("launch", produce, mutates=True)


def job_status(
    host: Host,
    job: Annotated[Optional[str], Field(description="one job (default: list recent jobs)")] = None,
    limit: Annotated[int, Field(ge=1, le=200, description="jobs listed, newest first")] = 20,
) -> Result:
    """Job state derived from the box's records (UNREACHABLE is never read as dead)."""
    from ..ops import jobs as op

    return respond("status", lambda: on_host(
        "status", host, lambda t: op.status(t, job=job, limit=limit, timeout_s=OP_TIMEOUT_S)))


job_status.__doc__ += f"\nStates: {states.listing()}."


def job_logs(
    host: Host,
    job: Job,
    tail: Annotated[int, Field(ge=1, le=2000, description="last N lines")] = 80,
    from_offset: Annotated[Optional[int], Field(ge=0, description="read from this byte offset (a "
                                                                    "next_offset) instead of the tail")] = None,
    max_bytes: Annotated[int, Field(ge=1, le=LOG_TEXT_BYTES)] = LOG_TEXT_BYTES,
) -> Result:
    """An exact page of a job's log, from its last lines or a byte offset; next_offset is the
    first byte not returned (page on while data.more)."""
    from ..ops import joblogs as op

    return respond("logs", lambda: on_host("logs", host, lambda t: op.logs(
        t, job=job, tail=tail, from_offset=from_offset, max_bytes=max_bytes, reconnect_s=10.0)))


async def job_wait(
    ctx: Context,
    host: Host,
    job: Job,
    until: Annotated[Optional[list[WaitState]], Field(description="default: any terminal state")] = None,
    log_regex: Annotated[Optional[str], Field(description="or until a log line matches")] = None,
    from_offset: Annotated[Optional[int], Field(ge=0, description="log_regex from this byte")] = None,
    timeout_s: Annotated[float, Field(ge=0, le=MAX_WAIT_S)] = MAX_WAIT_S,
    max_bytes: Annotated[int, Field(ge=0, le=LOG_TEXT_BYTES, description="of new_text")] = 8_000,
) -> Result:
    """Wait on the box until the job reaches a state in until (or a log line matches). Returns
    state, timed_out, new_text (ending at next_offset); call again while timed_out."""
    from ..ops import wait as op

    def produce():
        wanted = op.parse_until(",".join(until) if until else op.TERMINAL)
        if log_regex:
            _regex("log_regex", log_regex)
        return on_host("wait", host, lambda t: op.wait(
            t, job=job, until=wanted, log_regex=log_regex, from_offset=from_offset, timeout_s=timeout_s,
            max_bytes=max_bytes))

    return await _with_progress(ctx, timeout_s, f"waiting on the box for {job}", lambda: respond("wait", produce))


async def _with_progress(ctx, total_s, message, work):
    """`work()` on a worker thread, with a progress notification every PROGRESS_EVERY_S meanwhile,
    so a client that asked for progress sees the wait is alive (and may extend its own timeout)."""
    import anyio

    async def beat():
        waited = 0.0
        while True:
            await anyio.sleep(PROGRESS_EVERY_S)
            waited += PROGRESS_EVERY_S
            await ctx.report_progress(min(waited, total_s), total_s, message)

    async with anyio.create_task_group() as group:
        group.start_soon(beat)
        result = await anyio.to_thread.run_sync(work)
        group.cancel_scope.cancel()
    return result


def _regex(name, pattern):
    import re

    try:
        re.compile(pattern)
    except re.error as e:
        raise errors.UsageError(f"{name} is not a valid regular expression: {e}") from None


def job_stop(
    host: Host,
    job: Job,
    grace_s: Annotated[float, Field(ge=0, le=MAX_GRACE_S, description="seconds from SIGTERM to SIGKILL")] = 10,
    yes: Yes = False,
    plan_id: Annotated[Optional[str], Field(description="with yes: the dry run's plan_id; refused if the "
                                                        "processes changed")] = None,
) -> Result:
    """SIGTERM the job's process group, SIGKILL after grace_s, and confirm every process is
    gone. Without yes: only the processes that would be signalled, and their plan_id."""
    from ..ops import jobs as op

    return respond("stop", lambda: on_host(
        "stop", host, lambda t: op.stop(t, job=job, grace=grace_s, yes=yes, plan=plan_id)), mutates=yes)


def job_diagnose(host: Host, job: Job) -> Result:
    """Why a job stopped or vanished (OOM kill, reboot, hangup, Xid, disk full, its own exit),
    with the evidence, what was ruled out, and next steps."""
    from ..ops import diagnose as op

    return respond("diagnose", lambda: on_host(
        "diagnose", host, lambda t: op.diagnose(t, job=job, timeout_s=OP_TIMEOUT_S)))


def vram_reap(
    host: Host,
    gpu: Annotated[Optional[int], Field(ge=0, description="only holders of this GPU index")] = None,
    yes: Yes = False,
    plan_id: Annotated[Optional[str], Field(description="with yes: the dry run's data.plan.plan_id; refused if "
                                                        "the holders changed")] = None,
) -> Result:
    """Find processes holding GPU memory and, with yes, reap the orphaned, finished and idle
    ones; live work is never touched. Without yes: the plan only."""
    from ..ops import reap as op

    return respond("reap", lambda: on_host("reap", host, lambda t: op.reap(t, gpu=gpu, yes=yes, plan=plan_id)),
                   mutates=yes)


def fleet_status(
    hosts: Annotated[Optional[list[str]], Field(
        description="boxes to ask (ssh_config aliases or user@host:port); default: the server's fleet file")] = None,
    fleet: Annotated[Optional[str], Field(description="a [fleet.NAME] group of the server's fleet file")] = None,
    window_s: Annotated[float, Field(ge=0.5, le=10, description="seconds GPU use is sampled over")] = 2,
) -> Result:
    """Every rented box at once: GPUs, VRAM, utilisation, gpuops jobs, disk headroom, uptime, and
    which box is idle since when and what that idle time cost. One bad box is its own row."""
    from .. import errors, fleetfile
    from ..ops import fleet as op

    def produce():
        if hosts and fleet:
            raise errors.UsageError("fleet_status: give hosts or fleet, not both")
        boxes = fleetfile.for_hosts(hosts) if hosts else fleetfile.boxes(fleet)
        return op.inventory(boxes, window_s=window_s)

    return respond("fleet", produce)


def gotcha_lookup(
    query: Annotated[str, Field(description="a gotcha id (U7, AD4) or keywords (inode, xid, zombie)")],
    limit: Annotated[int, Field(ge=1, le=20)] = 5,
) -> Result:
    """Look up a known GPU-box gotcha: what you see, why, the fix, and how gpuops checks it."""
    from ..ops import catalog

    return respond("gotcha", lambda: catalog.find_gotchas(query, limit))


def profiles_show(
    name: Annotated[Optional[str], Field(description="one profile in full (default: list them)")] = None,
) -> Result:
    """Platform profiles: paths, what the meter-stop verb deletes, detach method, thresholds."""
    from ..ops import catalog

    return respond("profiles", lambda: catalog.show_profile(name) if name else catalog.list_profiles())


def log_triage(
    path: Annotated[Optional[str], Field(description="a log file on this machine, under the directories "
                                                     "the server reads (GPUOPS_MCP_ROOTS)")] = None,
    job: Annotated[Optional[str], Field(description="a gpuops job id: triage its log on host")] = None,
    host: Annotated[Optional[str], Field(description="with job: the box it ran on (default 'local')")] = None,
) -> Result:
    """Classify a job log without shipping it: status, failure class with evidence lines,
    progress projection, next steps. Give path, or job (and host)."""
    from ..ops import triage as op

    def produce():
        op.check_inputs(path, None, None, host, job)
        if path:
            return op.triage_local(log=scope.local_path(path, os.environ))
        return on_host("triage", host or "local", lambda t: op.triage_remote(t, job=job))

    return respond("triage", produce)


def data_verify(
    host: Host,
    local: Annotated[str, Field(description="local file or directory, under the directories the server "
                                            "reads (GPUOPS_MCP_ROOTS)")],
    remote: Annotated[str, Field(description="path on the box")],
) -> Result:
    """Compare content hashes of a local tree and its copy on the box; ok only when every file
    matches. Lists what differs or is missing."""
    from ..ops.sync import Options
    from ..ops.verify import verify

    def produce():
        real = scope.local_path(local, os.environ)
        return on_host("verify", host, lambda t: verify(t, real, remote, Options(retry_for=OP_TIMEOUT_S)))

    return respond("verify", produce)


# ---------------------------------------------------------------- registration

# job_launch runs any shell command: as destructive as anything a shell can do.
MUTATE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
SIGNAL = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True)

_TOOLS = (
    (host_preflight, "Preflight a GPU box", READ, None),
    (fleet_status, "All boxes at once, idle money", READ, None),
    (job_launch, "Launch a detached job", MUTATE, None),
    (job_status, "Job states", READ, None),
    (job_logs, "Read a job's log", READ, LOG_RESULT_META),
    (job_wait, "Wait for a job", READ, LOG_RESULT_META),
    (job_stop, "Stop a job", SIGNAL, None),
    (job_diagnose, "Why a job stopped", READ, None),
    (vram_reap, "Reap GPU memory holders", SIGNAL, None),
    (gotcha_lookup, "Look up a gotcha", READ_LOCAL, None),
    (profiles_show, "Platform profiles", READ_LOCAL, None),
    (log_triage, "Triage a job log", READ, LOG_RESULT_META),
    (data_verify, "Verify a copy by hashes", READ, None),
)


def build() -> MCPServer:
    """The server; in readonly mode without the tools that change a box, so a client never offers
    them (calls are still refused per call, for a mode set after the start)."""
    readonly = os.environ.get(MODE_ENV, "").strip().lower() not in ("", "operate")
    return MCPServer("gpuops", instructions=INSTRUCTIONS, version=__version__,
                     tools=[_tool(*spec) for spec in _TOOLS if not (readonly and not spec[2].read_only_hint)])


class StrictTool(Tool):
    """A tool whose arguments are exactly its parameters (an unknown one is refused, not ignored),
    and whose argument errors come back as the usage envelope, naming the parameters."""

    async def run(self, arguments, context, convert_result=False):
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
            return respond(self.name, lambda: _refuse_arguments(self.name, problems))
        return await super().run(arguments, context, convert_result=convert_result)


def _refuse_arguments(name, problems):
    raise errors.UsageError(f"{name}: {problems}")


def _tool(fn, title, hints, meta):
    import inspect

    tool = StrictTool.from_function(fn, title=title, description=inspect.cleandoc(fn.__doc__), annotations=hints,
                                    meta=meta)
    loose = tool.fn_metadata.arg_model
    tool.fn_metadata.arg_model = type(loose.__name__, (loose,), {
        "__module__": loose.__module__, "model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True)})
    # advertised only; calls validate on the full model
    tool.parameters = dict(budget.lean_schema(tool.parameters), additionalProperties=False)
    return tool
