"""The pieces of a verb's description: its parameters, the MCP tools made of it, and their words.

A Param is one flag of a verb as the CLI takes it (its kind, bounds, default, help) and, in
`tip`, the line an agent reads for it. An Arg is one parameter of an MCP tool: a Param under the
tool's own name, narrowed where a tool call differs (a wait bounded by a call's patience), or a
parameter of the tool alone, whose `why` says why the CLI has no such flag. A Param no tool
takes says why in `cli_only`. gpuops.surface holds every verb's; gpuops.cli and gpuops.mcp are
made from them, and tests/test_surface.py lists both sides.

A verb whose description names its operation and renderer (Verb.op, Verb.render: "module:function")
is nothing more: its task (gpuops.cli.made) and its tools' functions (gpuops.mcp.made) are made from
it, the operation called with the flags by name, and each tool's answer described by its `data`.
"""

import importlib
from dataclasses import dataclass, replace
from typing import Callable

# What a value is. The CLI reads every one from text; MCP takes the JSON type in KINDS.
TEXT, INT, NUM, SECS, SWITCH, CHOICE = "text", "int", "number", "seconds", "switch", "choice"
LIST, PAIRS, CSV, STATES, OBJECT = "list", "pairs", "csv", "states", "object"
JSON_TYPE = {TEXT: "string", INT: "integer", NUM: "number", SECS: "number", SWITCH: "boolean", CHOICE: "string",
             LIST: "array", PAIRS: "object", CSV: "array", STATES: "array", OBJECT: "object"}
REPEATED = (LIST, PAIRS)  # a flag given as often as wanted (Invoke's `iterable`)
NUMERIC = (INT, NUM, SECS)

# The groups of `gpuops help`, in its order; a verb's group is one of them.
GROUPS = ("Check", "Data", "Jobs", "Post-mortem", "Reference", "Connections")

# What a tool does to the world; the server's levels (gpuops.mcp.toolsets) admit some of them.
READS = "reads"        # changes nothing anywhere
RUNS = "runs"          # starts work: any command the caller wrote (as destructive as a shell can be)
CHANGES = "changes"    # adds or updates (a copy), ends nothing and deletes nothing unless an Arg says so
ENDS = "ends"          # ends processes or takes resources away (stop, reap, pause): the destructive level
EFFECTS = (READS, RUNS, CHANGES, ENDS)
SAME = object()  # an Arg's field left to its Param


@dataclass(frozen=True)
class Param:
    name: str                       # the task's parameter; its flag is --name-with-dashes
    kind: str = TEXT
    help: str = ""                  # the CLI's help line
    tip: str = ""                   # the MCP description (no flags in it); default: help, when it has none
    default: object = None          # as the verb means it (a number, not Invoke's text)
    low: float = None
    high: float = None
    what: str = None                # how a bad number's message names what it takes ("a byte offset")
    choices: tuple = ()
    cli_only: str = ""              # why no MCP tool takes it
    shows: str = ""                 # a made task hands it to the renderer under this keyword, not to the operation

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")

    @property
    def cli_default(self):
        """The default as Invoke must see it: text for a number (Invoke converts by the default's
        type before gpuops sees a value, so an int default would turn `--limit x` into a traceback)."""
        if self.kind in NUMERIC and self.default is not None:
            return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)
        if self.kind == SWITCH:
            return bool(self.default)
        return self.default


@dataclass(frozen=True)
class Arg:
    name: str                       # the tool's parameter
    param: str = None               # the verb's Param it is; None: the tool's own (then `why`)
    kind: str = None
    tip: str = None
    default: object = SAME
    low: float = None
    high: float = None
    choices: tuple = ()
    required: bool = False
    why: str = ""                   # a tool's own parameter: why the CLI has no flag for it
    items: tuple = ()               # STATES and a LIST of choices: the values an item may take


@dataclass(frozen=True)
class Tool:
    name: str
    verb: str                       # the CLI verb it is a face of; None for the server's own tools
    toolset: str
    effect: str
    title: str
    does: str                       # what it is for, in one line
    args: tuple = ()
    implied: tuple = ()             # the verb's switches this tool itself means (gang_launch: torchrun)
    acts_when: tuple = ()           # Args without which a call only reads (a stop without yes plans)
    dangerous: tuple = ()           # Args that make one call destructive (delete on a copy)
    local: bool = False             # reads only this machine (no box)
    findings: bool = False          # its answers carry findings (the output schema lists them)
    # A made tool's answer (its verb has an op): every key its data may carry, in gpuops.mcp.answers'
    # short code (a word without a type names a dataclass whose fields it carries), and the keys of
    # those its output schema types, the ones an agent branches on. A written tool's are in answers.py.
    data: str = ""
    typed: tuple = ()


@dataclass(frozen=True)
class Verb:
    name: str
    group: str
    effect: str
    params: tuple
    line: str = ""                  # what it answers in a few words: its row of `gpuops help`
    tools: tuple = ()
    engine_flags: bool = False      # takes every engine's own flags (gpuops.engines); MCP: `resources`
    cli_only: str = ""              # why no tool is made of it
    examples: tuple = ()            # whole command lines its --help shows, everyday first
    word: str = ""                  # the Param a bare word fills (`gpuops logs demo`: job)
    words: bool = False             # with word: every bare word joins it (`gotcha cuda oom`)
    connects: bool = True           # its --host is a box it connects to (the warm-up may start early)
    resumable: bool = False         # run again after Ctrl-C, it picks up where it stopped
    sections: tuple = ()            # ((title, (param names)), ...): its --help's groups of flags (sectioned)
    # A verb whose faces are made from this description (gpuops.cli.made, gpuops.mcp.made): its
    # operation, called with its params by name (not json, nor those a Param `shows`), each tool's
    # with the params its Args are; its renderer (doc, console, **shown); its --help's text.
    op: str = ""                    # "gpuops.ops.disconnect:disconnect"
    render: str = ""                # "gpuops.render.catalog:render_gotchas"
    doc: str = ""

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")


def sectioned(*sections) -> dict:
    """A Verb's params= and sections= from ((title, (Param, ...)), ...), each flag written once in
    its section: its --help shows them under their titles in this order, and its task takes them
    in it."""
    return {"params": tuple(p for _, params in sections for p in params),
            "sections": tuple((title, tuple(p.name for p in params)) for title, params in sections)}


def a(name: str, param=None, **over) -> Arg:
    """A tool's parameter: the verb's `param` (default: the same name) under `name`, narrowed by
    `over`; or, with `why=`, one of the tool's own."""
    if over.get("why"):
        return Arg(name, None, **over)
    return Arg(name, param or name, **over)


def resolve(verb, arg: Arg) -> Arg:
    """`arg` with every field its Param gives and the Arg does not override filled in."""
    if arg.param is None:
        return replace(arg, default=None) if arg.default is SAME else arg
    p = verb.param(arg.param)
    tip = arg.tip or p.tip or p.help
    default = None if arg.required else p.default if arg.default is SAME else arg.default
    return replace(arg, kind=arg.kind or p.kind, tip=tip, default=default,
                   low=arg.low if arg.low is not None else p.low, high=arg.high if arg.high is not None else p.high,
                   choices=arg.choices or p.choices)


def named(path: str) -> Callable:
    """The function a description names as "module:function" (Verb.op, Verb.render), imported when
    a face calls it, never when the description is read."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
