"""references/INTERFACE.md: every verb's flags and the MCP tools made of it, from their descriptions.

Written with the other generated references (`python -m gpuops.refdocs --write`), so what the
document says a flag or a parameter is cannot drift from what the CLI parses and MCP validates.
"""

from . import DEFAULT_TOOLSETS, TOOLSET_WORDS, TOOLSETS, args, toolset, verbs
from .model import NUMERIC, REPEATED


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _number(x):
    return "" if x is None else str(int(x)) if float(x).is_integer() else f"{x:g}"


def _bounds(low, high):
    return "" if low is None and high is None else f"{_number(low)}..{_number(high)}"


def _kind(p):
    words = p.kind + (" (repeatable)" if p.kind in REPEATED else "")
    if p.choices:
        words += ": " + ", ".join(p.choices)
    return words


def _flags(verb):
    rows = ["| flag | kind | default | bounds | MCP | help |", "|---|---|---|---|---|---|"]
    for p in verb.params:
        taken = sorted({f"{t.name}.{a.name}" for t in verb.tools for a in args(t.name) if a.param == p.name})
        where = ", ".join(taken) or f"CLI only: {p.cli_only}"
        default = "" if p.default in (None, False) else p.default
        bounds = _bounds(p.low, p.high) if p.kind in NUMERIC else ""
        rows.append(f"| `{p.flag}` | {_kind(p)} | {_cell(default)} | {bounds} | {_cell(where)} | {_cell(p.help)} |")
    return rows


def _tool(t, verb):
    out = [f"**`{t.name}`** ({t.toolset}, {t.effect}): {t.does}", "",
           "| parameter | type | default | bounds | flag | description |", "|---|---|---|---|---|---|"]
    for a in args(t.name):
        flag = f"`{verb.param(a.param).flag}`" if verb and a.param else f"MCP only: {a.why}"
        choices = a.choices or a.items
        kind = a.kind + (": " + ", ".join(choices) if choices else "")
        default = "" if a.default is None else a.default
        bounds = _bounds(a.low, a.high) if a.kind in NUMERIC else ""
        out.append(f"| `{a.name}`{' (required)' if a.required else ''} | {kind} | {_cell(default)} | {bounds} | "
                   f"{_cell(flag)} | {_cell(a.tip)} |")
    return out


def markdown() -> str:
    out = ["# The interface: every verb on the CLI and as MCP tools", "",
           "Generated from `gpuops/surface/` (one description per verb) by `python -m gpuops.refdocs --write`.",
           "A flag MCP has no parameter for, and a parameter the CLI has no flag for, say why.", "",
           "## Toolsets", "", f"`gpuops-mcp --toolsets` (default: {', '.join(DEFAULT_TOOLSETS)}).", ""]
    out += [f"- **{s}**: {TOOLSET_WORDS[s]} ({', '.join(f'`{n}`' for n in toolset(s))})" for s in TOOLSETS]
    for verb in verbs().values():
        out += ["", f"## `gpuops {verb.name}` ({verb.group}, {verb.effect})", ""] + _flags(verb)
        if verb.engine_flags:
            out += ["", "Each engine's own flags too (gpuops/engines); MCP takes them as `resources`."]
        if verb.cli_only:
            out += ["", f"No MCP tool: {verb.cli_only}."]
        for t in verb.tools:
            out += [""] + _tool(t, verb)
    from . import data

    out += ["", "## The server's own tools", ""]
    for t in data.TOOLS:
        out += _tool(t, None) + [""]
    return "\n".join(out).rstrip() + "\n"
