"""One description per verb: its flags (kind, bounds, default, help), what it does to the world,
and the MCP tools made of it (their parameters, one-line purpose, toolset).

gpuops.cli makes each verb's task from it (gpuops.cli.flags.verb: the parameters, their help and
the parsing of their values), gpuops.mcp each tool's input schema, its annotations, the toolsets,
the table that turns a CLI next step into a tool call (gpuops.mcp.nextsteps) and the words a
message's flags become (gpuops.mcp.words), and docs.py the interface reference
(references/INTERFACE.md, written by `python -m gpuops.refdocs --write`). A flag one side has and
the other lacks says why (Param.cli_only, Arg.why); tests/test_surface.py holds both sides to it.

A new flag is one Param in its verb's tuple (and, for MCP, an `a(name)` in a tool's args), plus its
name in the verb's function (gpuops.cli) and its tool's (gpuops.mcp), where those are written: the
parity test says which is missing. A verb whose description names its operation and renderer
(Verb.op, Verb.render) has neither written: both faces are made of the description (gpuops.cli.made,
gpuops.mcp.made), and a new verb of that kind is its description, its operation and its renderer.

Nothing here imports the CLI, the MCP SDK or an operation when read: both faces read it.
"""

import functools
import importlib
import pkgutil

from .. import verbindex
from .model import Tool, Verb, resolve

# Where each verb is described (gpuops/verbindex.py, generated from described()): the CLI loads
# only its verb's (a verb's task is made at import, and `gpuops gotcha U7` must not pay for the
# engines' or profiles' modules).
_HOME = {name: module for name, (_, module, _) in verbindex.VERBS.items()}
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


def _module(name: str):
    return importlib.import_module(f"{__package__}.{name}")


@functools.lru_cache(maxsize=1)
def verbs() -> dict:
    """{name: Verb} of every CLI verb, in `gpuops help`'s order."""
    return {name: verb(name) for name in _HOME}


def described() -> dict:
    """{name: (module, Verb)} of every verb its module describes, found by reading every module
    here: what gpuops/verbindex.py is written from (gpuops.cli.tables)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        found.update({v.name: (info.name, v) for v in getattr(_module(info.name), "VERBS", ())})
    return found


def verb(name: str) -> Verb:
    """One verb's description, loading only the module it is in."""
    return next(v for v in _module(_HOME[name]).VERBS if v.name == name)


@functools.lru_cache(maxsize=1)
def tools() -> dict:
    """{name: Tool} of every MCP tool, toolset by toolset."""
    made = [t for v in verbs().values() for t in v.tools] + list(_module("data").TOOLS)
    return {t.name: t for s in TOOLSETS for t in made if t.toolset == s}


def tool(name: str) -> Tool:
    return tools()[name]


@functools.lru_cache(maxsize=None)
def args(tool_name: str) -> tuple:
    """A tool's parameters, every field its verb's Param gives filled in."""
    t = tool(tool_name)
    if t.verb is None:
        return tuple(resolve(None, a) for a in t.args)
    return tuple(resolve(verb(t.verb), a) for a in t.args)


def toolset(name: str) -> tuple:
    """The tool names of one toolset."""
    return tuple(n for n, t in tools().items() if t.toolset == name)


def flags_of(tool_name: str) -> dict:
    """{--flag: Arg} of a tool: which of its verb's flags each parameter stands for."""
    t = tool(tool_name)
    if t.verb is None:
        return {}
    v = verb(t.verb)
    return {v.param(a.param).flag: a for a in args(tool_name) if a.param}
