"""The MCP server: one tool per gpuops operation, each a thin call into gpuops.ops.

Every tool returns the operation's envelope (gpuops.envelope), `summary` first, bounded by
gpuops.mcp.budget, as compact JSON in both the structured content and the one text block:
some clients show the model only one of the two. A negative answer (a failed check, a job
that failed, a dry run) is a successful call with ok=false; only a GpuopsError (unreachable,
usage, not found, refused) or a bug makes an is_error result, and that still carries the whole
envelope as text, since several clients drop structured content on errors. `next` is made of
tool calls (gpuops.mcp.nextsteps), and a usage error names parameters, not CLI flags.

GPUOPS_MODE=readonly leaves the tools that change a box out of tools/list, and refuses their calls
with the reason (checked when the call comes, for a mode set after the start): a client that calls
one anyway learns it is refused in readonly mode, not that there is no such tool.
"""

import inspect
import logging

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, ValidationError

from .. import __version__, errors
from ..envelope import envelope, error_envelope, public
from . import budget, nextsteps, resources, schemas, tools_box, tools_gang, tools_jobs
from .adapter import readonly

log = logging.getLogger("gpuops.mcp")

LOG_RESULT_META = {"anthropic/maxResultSizeChars": 60_000}

INSTRUCTIONS = """\
gpuops operates rented GPU boxes over SSH. host is 'local', an ssh_config alias or user@host:port.
Every result is one JSON envelope: summary, ok, data, findings, next (tool calls to make next, exact
arguments), advice (prose). ok=false with no error is an answer (a failed check, a failed job, a dry run).
job_stop, vram_reap and deletions (data_push/data_pull delete) only plan unless yes=true: call once,
read the plan, then repeat with yes and the plan_id it showed (refused if what it would touch changed).
Jobs run detached on the box: job_launch, then job_wait (repeat while timed_out), then job_diagnose or
log_triage when it did not complete; job_logs pages exactly with from_offset=next_offset.
One torchrun run across boxes is a gang: gang_launch, then gang_status or gang_wait, gang_logs, gang_diagnose, gang_stop.
Resources: gpuops://profile/{name}, gpuops://gotcha/{id}; prompt post_mortem."""

READ = ToolAnnotations(read_only_hint=True, open_world_hint=True)
READ_LOCAL = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# job_launch (and fleet_launch, retry, queue, the gang's launch and retry) runs any shell command: as destructive as anything
# a shell can do.
MUTATE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
SIGNAL = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True)

J, B, G = tools_jobs, tools_box, tools_gang
_TOOLS = (
    (B.host_preflight, "Preflight a GPU box", READ, None),
    (B.fleet_status, "All boxes at once, idle money", READ, None),
    (J.job_launch, "Launch a detached job", MUTATE, None),
    (J.fleet_launch, "Launch a job where it fits", MUTATE, None),
    (J.job_retry, "Run a job's command again", MUTATE, None),
    (J.job_queue, "A sequential run queue", MUTATE, None),
    (J.job_status, "Job states", READ, None),
    (J.job_logs, "Read a job's log", READ, LOG_RESULT_META),
    (J.job_wait, "Wait for a job", READ, LOG_RESULT_META),
    (J.job_stop, "Stop a job", SIGNAL, None),
    (J.job_diagnose, "Why a job stopped", READ, None),
    (J.log_triage, "Triage a job log", READ, LOG_RESULT_META),
    (B.vram_reap, "Reap GPU memory holders", SIGNAL, None),
    (B.gotcha_lookup, "Look up a gotcha", READ_LOCAL, None),
    (B.profiles_show, "Platform profiles", READ_LOCAL, None),
    (B.profile_guess, "Guess a box's platform", READ, None),
    (B.teardown_check, "What a teardown would lose", READ_LOCAL, None),
    (B.data_verify, "Verify a copy by hashes", READ, None),
    (B.data_push, "Send a directory, verified", SIGNAL, None),
    (B.data_pull, "Fetch a directory, verified", SIGNAL, None),
    (G.gang_launch, "Launch torchrun across boxes", MUTATE, None),
    (G.gang_retry, "Launch a gang again", MUTATE, None),
    (G.gang_status, "A gang's state", READ, None),
    (G.gang_wait, "Wait for a gang", READ, None),
    (G.gang_logs, "Every node's log", READ, LOG_RESULT_META),
    (G.gang_stop, "Stop every node of a gang", SIGNAL, None),
    (G.gang_diagnose, "Why a gang stopped", READ, None),
)
# the CLI verb of each tool: the `command` of its error envelopes
VERB = {tool: verb for verb, made in nextsteps.VERBS.items() for tool, _ in made}


def build() -> MCPServer:
    """The server; in readonly mode without the tools that change a box, so a client never offers
    them (calls are still refused per call, for a mode set after the start)."""
    from .. import profiles

    shown = [spec for spec in _TOOLS if not (readonly() and not spec[2].read_only_hint)]
    names = frozenset(spec[0].__name__ for spec in shown)
    profile_names = [p.name for p in profiles.all_profiles()]
    codes = schemas.data_codes()
    server = _Server("gpuops", instructions=INSTRUCTIONS, version=__version__,
                     tools=[_tool(*spec, listed=names, profile_names=profile_names, codes=codes) for spec in _TOOLS])
    server.shown = names
    resources.register(server)
    return server


class _Server(MCPServer):
    """Lists only the tools in `shown`; every tool still answers a call, so one left out in
    readonly mode refuses it with the reason (each checks the mode) instead of "Unknown tool"."""

    shown = frozenset()

    async def list_tools(self):
        return [tool for tool in await super().list_tools() if tool.name in self.shown]


class StrictTool(Tool):
    """A tool whose arguments are exactly its parameters (an unknown one is refused, not ignored),
    and whose every outcome is the envelope: see the module docstring."""

    listed: frozenset = frozenset()  # the tools this server lists: what `next` may name

    async def run(self, arguments, context, convert_result=False):
        verb = VERB[self.name]
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
            return self.result(error_envelope(verb, errors.UsageError(f"{self.name}: {problems}")))
        try:
            doc = await super().run(arguments, context, convert_result=False)
        except ToolError as e:
            cause = e.__cause__
            if isinstance(cause, errors.GpuopsError):
                doc = error_envelope(verb, cause)
            else:  # a bug: keep the traceback on the server's stderr, not in the result
                log.error("tool %s failed", self.name, exc_info=cause)
                doc = envelope(verb, ok=False, summary=f"internal error in gpuops ({type(cause).__name__}); "
                                                       "see the MCP server's stderr",
                               error={"kind": "internal", "message": type(cause).__name__})
        return self.result(doc)

    def result(self, doc) -> CallToolResult:
        doc = public(doc)
        doc["next"] = nextsteps.translate(doc.get("next") or [], self.listed)
        if (doc.get("error") or {}).get("kind") in (errors.UsageError.kind, errors.Ambiguous.kind):
            said = nextsteps.reword(doc["command"], doc["error"]["message"])
            doc["error"] = dict(doc["error"], message=said)
            doc["summary"] = nextsteps.reword(doc["command"], doc["summary"])
        doc = budget.bound(doc)
        return CallToolResult(content=[TextContent(type="text", text=budget.compact(doc))], structured_content=doc,
                              is_error=bool(doc.get("error")))


def _tool(fn, title, hints, meta, listed, profile_names, codes):
    tool = StrictTool.from_function(fn, title=title, description=inspect.cleandoc(fn.__doc__), annotations=hints,
                                    meta=meta)
    tool.listed = listed
    loose = tool.fn_metadata.arg_model
    tool.fn_metadata.arg_model = type(loose.__name__, (loose,), {
        "__module__": loose.__module__, "model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True)})
    # advertised only; calls validate on the full model
    tool.parameters = schemas.input_schema(tool.name, tool.parameters, profile_names)
    # advertised, and checked by clients against every successful result (the result is built here)
    tool.fn_metadata.output_schema = schemas.output_schema(tool.name, codes)
    return tool
