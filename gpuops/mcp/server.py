"""The MCP server: one tool per gpuops operation, each a thin call into gpuops.ops, each made from
its description (gpuops.surface: parameters, purpose, toolset, what it does to the world); a tool
whose verb's description names its operation has no function written either (gpuops.mcp.made).

Every tool returns the operation's envelope (gpuops.envelope), `summary` first, bounded by
gpuops.mcp.clientfit, as compact JSON in both the structured content and the one text block:
some clients show the model only one of the two. A negative answer (a failed check, a job
that failed, a dry run) is a successful call with ok=false; only a GpuopsError (unreachable,
usage, not found, refused) or a bug makes an is_error result, and that still carries the whole
envelope as text, since several clients drop structured content on errors. `next` is made of
tool calls (gpuops.mcp.nextsteps), and the text names parameters and tools, never CLI flags.

Which tools a server lists, and what it lets a call do, are its toolsets and its level
(gpuops.mcp.toolsets); a call the level does not admit is refused with the reason, checked when
the call comes, so a client that calls an unlisted tool learns why, not "Unknown tool".
"""

import logging

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, ValidationError

from .. import __version__, errors, surface
from ..envelope import envelope, error_envelope, public
from ..surface.model import CHANGES, ENDS, READS, RUNS
from . import (approval, chains, clientfit, made, nextsteps, params, requests, resources, schemas, tools_box,
               tools_gang, tools_jobs, vocab, words)
from . import toolsets as sets

log = logging.getLogger("gpuops.mcp")

LOG_RESULT_META = {"anthropic/maxResultSizeChars": 60_000}
_LONG = ("job_logs", "job_wait", "log_triage", "gang_logs")  # answers that may carry a log's text

# The written tools' functions; a tool whose verb names its op is made (gpuops.mcp.made)
FUNCTIONS = {fn.__name__: fn for fn in (*tools_box.TOOLS, *tools_jobs.TOOLS, *tools_gang.TOOLS, *requests.TOOLS)}

_HOW = """\
gpuops operates rented GPU boxes over SSH. host is 'local', an ssh_config alias or user@host:port.
Every result is one JSON envelope: summary, ok, data, findings, next (tool calls to make next, exact
arguments), advice. ok=false with no error is an answer (a failed check, a failed job, a dry run).
error.kind is one of: """ + ", ".join(vocab.ERROR_KINDS) + "; retryable says whether the same call may succeed later."
_SETS = {
    "jobs": "Jobs run detached: job_launch, then job_wait (again while timed_out); job_stop only plans unless "
            "yes=true with the plan_id its plan showed.",
    "postmortem": "After a failure: job_diagnose (why it stopped), log_triage (what its log says).",
    "data": "data_push/data_pull/data_verify answer within wait_s, or with a request_id: request_wait on it.",
    "fleet": "Several boxes: fleet_status, fleet_launch; a torchrun gang: gang_launch, then gang_wait.",
}


def instructions(offered):
    return "\n".join([_HOW] + [_SETS[s] for s in offered if s in _SETS])


def annotations(tool) -> ToolAnnotations:
    """The hints a client reads: a tool that only reads is read-only; one that runs a command the
    caller wrote is as destructive as a shell; a copy is destructive only through its `dangerous`
    arguments; ending processes is destructive and idempotent. The title is the tool's own (a
    client shows it before the annotations' one), not said twice on every turn."""
    world = not tool.local
    if tool.effect == READS:
        return ToolAnnotations(read_only_hint=True, open_world_hint=world)
    return ToolAnnotations(read_only_hint=False, open_world_hint=world,
                           destructive_hint=tool.effect in (RUNS, ENDS) or bool(tool.dangerous),
                           idempotent_hint=tool.effect in (CHANGES, ENDS))


def build(toolsets=None, level=None) -> MCPServer:
    """The server offering `toolsets` (text as --toolsets takes it; None: $GPUOPS_MCP_TOOLSETS, else
    the default) at `level` (or stricter, when GPUOPS_MODE says so)."""
    import os

    from .. import profiles

    offered = sets.selected(toolsets if toolsets is not None else os.environ.get(sets.TOOLSETS_ENV))
    at = sets.stricter(level or sets.OPERATE, sets.env_level(os.environ))
    shown = frozenset(n for n, t in surface.tools().items() if sets.listed(t, offered, at))
    profile_names = [p.name for p in profiles.all_profiles()]
    made = [_tool(t, shown, profile_names) for t in surface.tools().values()]
    for tool in made:
        tool.offered, tool.level = offered, at
    server = _Server("gpuops", instructions=instructions(offered), version=__version__, tools=made)
    server.shown = shown
    resources.register(server)
    return server



class _Server(MCPServer):
    """Lists only the tools in `shown`; every tool still answers a call, so one left out refuses it
    with the reason instead of "Unknown tool"."""

    shown = frozenset()

    async def list_tools(self) -> list:
        return [tool for tool in await super().list_tools() if tool.name in self.shown]


class StrictTool(Tool):
    """A tool whose arguments are exactly its parameters (an unknown one is refused, not ignored),
    whose calls its server's toolsets and level admit, and whose every outcome is the envelope:
    see the module docstring."""

    listed: frozenset = frozenset()  # the tools this server lists: what `next` may name
    offered: tuple = ()
    level: str = sets.OPERATE

    async def run(self, arguments, context, convert_result=False):
        spec = surface.tool(self.name)
        verb = spec.verb or self.name
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
            return self.result(error_envelope(verb, errors.UsageError(f"{self.name}: {problems}")), arguments)
        mark = sets.started.set(self.level)
        try:
            if spec.toolset not in self.offered:
                sets.not_offered(spec, self.offered)
            effect = sets.effect_of(spec, arguments)
            sets.refuse(verb, effect)
            await approval.approve(context, self.name, spec.does, effect, dict(arguments or {}))
            doc = await super().run(arguments, context, convert_result=False)
        except errors.GpuopsError as e:
            doc = error_envelope(verb, e)
        except ToolError as e:
            cause = e.__cause__
            if isinstance(cause, errors.GpuopsError):
                doc = error_envelope(verb, cause)
            else:  # a bug: keep the traceback on the server's stderr, not in the result
                log.error("tool %s failed", self.name, exc_info=cause)
                doc = envelope(verb, ok=False, summary=f"internal error in gpuops ({type(cause).__name__}); "
                                                       "see the MCP server's stderr",
                               error={"kind": "internal", "message": type(cause).__name__})
        finally:
            sets.started.reset(mark)
        return self.result(doc, arguments)

    def result(self, doc, arguments) -> CallToolResult:
        doc = public(doc)
        doc["next"] = nextsteps.translate(doc.get("next") or [], self.listed)
        doc = chains.chained(self.name, dict(arguments or {}), doc, self.listed)
        doc = clientfit.bound(words.for_mcp(doc, self.listed))
        return CallToolResult(content=[TextContent(type="text", text=clientfit.compact(doc))], structured_content=doc,
                              is_error=bool(doc.get("error")))


def _tool(spec, listed, profile_names):
    fn = made.made(spec.name) if spec.verb and surface.verb(spec.verb).op else FUNCTIONS[spec.name]
    fn.__signature__ = params.signature(fn, surface.args(spec.name))
    tool = StrictTool.from_function(fn, title=spec.title, description=spec.does, annotations=annotations(spec),
                                    meta=LOG_RESULT_META if spec.name in _LONG else None)
    tool.listed = listed
    loose = tool.fn_metadata.arg_model
    tool.fn_metadata.arg_model = type(loose.__name__, (loose,), {
        "__module__": loose.__module__, "model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True)})
    # advertised only; calls validate on the full model
    tool.parameters = schemas.input_schema(tool.name, tool.parameters, profile_names)
    # advertised, and checked by clients against every successful result (the result is built here)
    tool.fn_metadata.output_schema = schemas.output_schema(tool.name)
    return tool
