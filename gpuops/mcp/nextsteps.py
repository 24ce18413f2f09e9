"""The CLI's words as MCP's: a next step's argv as a tool call, a message's flags as parameters.

Operations speak the CLI (gpuops.envelope.step: `gpuops stop --host b --job j --yes --plan P`);
an agent on MCP calls tools. Each verb's description (gpuops.surface) says which tool and
parameter each of its flags is, and serves both directions of use: translating `next`, and
rewording an error an operation raised about `--secret-env` as one about `secret_env`. A gpuops
step with a verb, flag or value no listed tool can carry (`--jobs-dir`, `logs --follow`, a verb
MCP lacks) is left out rather than shown in CLI syntax; a step that is not gpuops (`scancel 7`)
has no tool and keeps its argv.
"""

import functools

from .. import engines, surface
from ..surface import model as M
from ..surface.jobs import EVENT
from typing import Sequence

S, I, F, B, L, STATES = "str", "int", "float", "flag", "list", "states"
CSV, IMPLIED = "csv", "implied"  # 'a,b' as a list; a flag the tool itself means (no parameter)
RESOURCE = "resource"  # an engine's own flag: a key of the tool's `resources`
_KIND = {M.TEXT: S, M.CHOICE: S, M.INT: I, M.NUM: F, M.SECS: F, M.SWITCH: B, M.LIST: L, M.PAIRS: "pairs",
         M.CSV: CSV, M.STATES: STATES}


@functools.lru_cache(maxsize=1)
def table():
    """CLI verb -> [(tool, {flag: (parameter, kind)})], tried in order: the first whose flags cover
    the step's is the call. Kinds: a flag without a value is B; L repeats; "pairs" is KEY=VALUE."""
    out = {}
    for verb in surface.verbs().values():
        rows = []
        for t in verb.tools:
            flags = {flag: (a.name, _KIND[a.kind]) for flag, a in surface.flags_of(t.name).items()}
            flags.update({verb.param(name).flag: (None, IMPLIED) for name in t.implied})
            if verb.engine_flags and any(a.name == "resources" for a in surface.args(t.name)):
                flags.update({engines.flag_of(key): (key, RESOURCE) for e in engines.each()
                              for key in e.flags_for(verb.name)})
            rows.append((t.name, flags))
        out[verb.name] = rows
    return out


def tool_step(argv, listed):
    """The MCP form of one step's argv: {"tool", "args"}; the argv itself for a command that is not
    gpuops; None for a gpuops command no listed tool can make."""
    if not argv or argv[0] != "gpuops":
        return {"argv": list(argv)}
    for tool, flags in table().get(argv[1] if len(argv) > 1 else "", []):
        if tool in listed:
            args = _args(argv[2:], flags)
            if args is not None:
                return {"tool": tool, "args": args}
    return None


def translate(steps, listed):
    """A document's `next` for an MCP caller (see tool_step); `why` is kept. A step of the
    server's own tools (request_wait) is a tool call already."""
    out = []
    for item in steps:
        if "tool" in item:
            if item["tool"] in listed and item not in out:
                out.append(item)
            continue
        made = tool_step(item["argv"], listed)
        if made is not None and made not in out:
            out.append(dict(made, why=item["why"]) if item.get("why") else made)
    return out


def _args(words: Sequence[str], flags):
    args, i = {}, 0
    while i < len(words):
        if words[i] == "--json":  # how the CLI prints, which a tool call has no need to say
            i += 1
            continue
        spec = flags.get(words[i])
        if spec is None:
            return None
        name, kind = spec
        if kind == IMPLIED:
            i += 1
            continue
        if kind == RESOURCE:  # a switch of the engine's says True; its other flags take the next word
            given = i + 1 < len(words) and not words[i + 1].startswith("--")
            args.setdefault("resources", {})[name] = words[i + 1] if given else True
            i += 2 if given else 1
            continue
        if kind == B:
            args[name], i = True, i + 1
            continue
        if i + 1 >= len(words):
            return None
        if kind == STATES and words[i + 1].lower() == "terminal":
            i += 2  # job_wait's own default: a call without `until`
            continue
        value = _value(kind, words[i + 1], args.get(name))
        if value is None:
            return None
        args[name], i = value, i + 2
    return args


def _value(kind, word: str, before):
    try:
        if kind == I:
            return int(word)
        if kind == F:
            return float(word)
    except ValueError:
        return None
    if kind == L:
        return (before or []) + [word]
    if kind == CSV:
        return [w for w in word.split(",") if w] or None
    if kind == "pairs":
        key, sep, value = word.partition("=")
        return dict(before or {}, **{key: value}) if sep and key else None
    if kind == STATES:  # states are upper case; 'event' (a run's next) is not a state
        return [w.strip().upper() if w.strip().lower() != EVENT else EVENT for w in word.split(",")]
    return word


