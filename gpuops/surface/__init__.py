"""One description per verb: its flags (kind, bounds, default, help), what it does to the world,
and the MCP tools made of it (their parameters, one-line purpose, toolset).

gpuops.cli makes each verb's task from it (gpuops.cli.flags.verb: the parameters, their help and
the parsing of their values), gpuops.mcp each tool's input schema, its annotations, the toolsets
and the table that turns a CLI next step into a tool call (gpuops.mcp.nextsteps), and `python -m
gpuops.surface` the interface reference (references/INTERFACE.md). A flag one side has and the
other lacks says why (Param.cli_only, Arg.why); tests/test_surface.py holds both sides to it.

Nothing here imports the CLI, the MCP SDK or an operation: both faces read it.
"""

import functools

from . import box, data, jobs
from .model import Tool, Verb, resolve

# The toolsets a server may offer (gpuops-mcp --toolsets), in the order tools/list shows them.
TOOLSETS = ("check", "jobs", "postmortem", "data", "fleet", "reference")
DEFAULT_TOOLSETS = ("check", "jobs", "postmortem")
TOOLSET_WORDS = {
    "check": "is this box fit to run on",
    "jobs": "every job verb: launch, status, wait, logs, stop, pause, resume, retry, queue",
    "postmortem": "why a job ended: diagnose, triage, and freeing GPU memory it left held",
    "data": "copies proven by hashes (push, pull, verify), what a teardown would lose, and the requests a long "
            "copy answers with",
    "fleet": "several boxes: the fleet's state, placement by free GPUs, torchrun gangs",
    "reference": "gotchas, platform profiles, and which profile a box resembles",
}


@functools.lru_cache(maxsize=1)
def verbs() -> dict:
    """{name: Verb} of every CLI verb, in the order of the groups of `gpuops help`."""
    return {v.name: v for v in (*box.VERBS, *jobs.VERBS, *data.VERBS)}


def verb(name) -> Verb:
    return verbs()[name]


@functools.lru_cache(maxsize=1)
def tools() -> dict:
    """{name: Tool} of every MCP tool, toolset by toolset."""
    made = [t for v in verbs().values() for t in v.tools] + list(data.TOOLS)
    return {t.name: t for s in TOOLSETS for t in made if t.toolset == s}


def tool(name) -> Tool:
    return tools()[name]


@functools.lru_cache(maxsize=None)
def args(tool_name) -> tuple:
    """A tool's parameters, every field its verb's Param gives filled in."""
    t = tool(tool_name)
    if t.verb is None:
        return tuple(resolve(None, a) for a in t.args)
    return tuple(resolve(verb(t.verb), a) for a in t.args)


def toolset(name) -> tuple:
    """The tool names of one toolset."""
    return tuple(n for n, t in tools().items() if t.toolset == name)


def flags_of(tool_name) -> dict:
    """{--flag: Arg} of a tool: which of its verb's flags each parameter stands for."""
    t = tool(tool_name)
    if t.verb is None:
        return {}
    v = verb(t.verb)
    return {v.param(a.param).flag: a for a in args(tool_name) if a.param}
