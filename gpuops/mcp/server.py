"""The MCP server: one tool per gpuops operation, each a thin call into gpuops.ops.

Every tool returns the operation's envelope (gpuops.envelope), `summary` first, bounded by
gpuops.mcp.budget, as compact JSON in both the structured content and the one text block:
some clients show the model only one of the two. A negative answer (a failed check, a job
that failed, a dry run) is a successful call with ok=false; only a GpuopsError (unreachable,
usage, not found, refused) or a bug makes an is_error result, and that still carries the whole
envelope as text, since several clients drop structured content on errors.

Blocking operations get timeouts that keep a call under about 50 s (clients give up near 60 s).
GPUOPS_MODE=readonly refuses every call that would change a box, checked when the call comes.
"""

import logging
import os
from typing import Annotated, Any, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from .. import __version__, errors
from ..envelope import envelope, error_envelope
from ..jobs import states
from . import budget, scope

log = logging.getLogger("gpuops.mcp")

MODE_ENV = "GPUOPS_MODE"
OP_TIMEOUT_S = 40.0  # on-box work per call, leaving room for the SSH connect under ~50 s
LOG_TEXT_CHARS = 24_000
MAX_GRACE_S = 30.0
LOG_RESULT_META = {"anthropic/maxResultSizeChars": 60_000}

INSTRUCTIONS = """\
gpuops operates rented GPU boxes over SSH. host is 'local', an ssh_config alias or user@host:port.
Every result is one JSON envelope: summary, ok, data, findings, next (suggested CLI commands).
ok=false with no error is an answer (a failed check, a failed job, a dry run), not a failure.
job_stop and vram_reap only plan unless yes=true: call once, read the plan, then repeat with yes.
Jobs run detached on the box: launch, then poll job_status; read job_logs or job_diagnose after."""

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
    doc = budget.bound(doc)
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
) -> Result:
    """A bounded page of a job's log: the last lines, or the bytes after an offset."""
    from ..ops import jobs as op

    def page(target):
        return trim_log_text(op.logs(target, job=job, tail=tail, from_offset=from_offset, reconnect_s=10.0))

    return respond("logs", lambda: on_host("logs", host, page))


def trim_log_text(doc):
    """Keep the tail of the log text within LOG_TEXT_CHARS and move `text_starts_at` with it."""
    data = doc.get("data") or {}
    text = data.get("text")
    if isinstance(text, str) and len(text) > LOG_TEXT_CHARS:
        kept, gone = budget.tail_text(text, LOG_TEXT_CHARS)
        data["text"] = kept
        if data.get("text_starts_at") is not None:
            data["text_starts_at"] += len(text[:gone].encode("utf-8", "surrogatepass"))
        doc["truncated"] = {"cut": [f"data.text: first {gone} of {len(text)} chars; text_starts_at is the "
                                    "first byte shown (ask fewer lines or page with from_offset)"]}
    return doc


def job_stop(
    host: Host,
    job: Job,
    grace_s: Annotated[float, Field(ge=0, le=MAX_GRACE_S, description="seconds from SIGTERM to SIGKILL")] = 10,
    yes: Yes = False,
) -> Result:
    """SIGTERM the job's process group, SIGKILL after grace_s, and confirm every process is
    gone. Without yes: only the list of processes that would be signalled."""
    from ..ops import jobs as op

    return respond("stop", lambda: on_host(
        "stop", host, lambda t: op.stop(t, job=job, grace=grace_s, yes=yes)), mutates=yes)


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
) -> Result:
    """Find processes holding GPU memory and, with yes, reap the orphaned, finished and idle
    ones; live work is never touched. Without yes: the plan only."""
    from ..ops import reap as op

    return respond("reap", lambda: on_host("reap", host, lambda t: op.reap(t, gpu=gpu, yes=yes)), mutates=yes)


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

_TOOLS = (
    (host_preflight, "Preflight a GPU box", READ, None),
    (job_launch, "Launch a detached job",
     ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True),
     None),
    (job_status, "Job states", READ, None),
    (job_logs, "Read a job's log", READ, LOG_RESULT_META),
    (job_stop, "Stop a job",
     ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True), None),
    (job_diagnose, "Why a job stopped", READ, None),
    (vram_reap, "Reap GPU memory holders",
     ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True), None),
    (gotcha_lookup, "Look up a gotcha", READ_LOCAL, None),
    (profiles_show, "Platform profiles", READ_LOCAL, None),
    (log_triage, "Triage a job log", READ, LOG_RESULT_META),
    (data_verify, "Verify a copy by hashes", READ, None),
)


def build() -> MCPServer:
    return MCPServer("gpuops", instructions=INSTRUCTIONS, version=__version__,
                     tools=[_tool(*spec) for spec in _TOOLS])


def _tool(fn, title, hints, meta):
    import inspect

    tool = Tool.from_function(fn, title=title, description=inspect.cleandoc(fn.__doc__), annotations=hints,
                              meta=meta)
    tool.parameters = budget.lean_schema(tool.parameters)  # advertised only; calls validate on the full model
    return tool
