"""Which tools a server offers (its toolsets) and what it lets a call do (its level).

    gpuops-mcp --toolsets check,jobs,postmortem     (or `all`, `default`; env GPUOPS_MCP_TOOLSETS)
    gpuops-mcp --read-only | --no-destructive       (env GPUOPS_MODE=readonly | no-destructive)

Every tool costs an agent its definition on every turn, so a server offers the toolsets it is
asked for (gpuops.surface.TOOLSETS; by default check, jobs and postmortem) and no others. A level
admits effects (gpuops.surface.model): read-only only reads; no-destructive also runs and copies,
but ends no process and deletes nothing; operate does all. A tool the level does not admit is
not listed, and a call to it is refused per call, saying why (never "Unknown tool"): the server's
start level and GPUOPS_MODE as it is when the call comes, whichever is stricter, so a mode set
after the start still holds. A call to a tool outside the offered toolsets is refused the same
way. What one call does depends on its arguments: a stop without `yes` only plans (a read), a copy
with `delete` deletes (destructive).
"""

import contextvars
import os

from .. import errors, surface
from ..surface.model import CHANGES, ENDS, READS, RUNS

TOOLSETS_ENV = "GPUOPS_MCP_TOOLSETS"
MODE_ENV = "GPUOPS_MODE"
OPERATE, NO_DESTRUCTIVE, READ_ONLY = "operate", "no-destructive", "readonly"
LEVELS = (OPERATE, NO_DESTRUCTIVE, READ_ONLY)  # loosest first
ADMITS = {OPERATE: (READS, RUNS, CHANGES, ENDS), NO_DESTRUCTIVE: (READS, RUNS, CHANGES), READ_ONLY: (READS,)}
FLAGS = {READ_ONLY: "--read-only", NO_DESTRUCTIVE: "--no-destructive"}
_SAID = {NO_DESTRUCTIVE: "it would end processes or delete data", READ_ONLY: "it would change the box"}

# the level a server was started at, for the call being answered (set by gpuops.mcp.server)
started = contextvars.ContextVar("gpuops_mcp_level", default=OPERATE)


def selected(text) -> tuple:
    """The toolsets `text` names ('check,jobs', 'all', 'default'; None or empty: the default), in
    their listing order; an unknown name is a UsageError listing the known ones."""
    words = [w.strip().lower() for w in (text or "").replace(" ", ",").split(",") if w.strip()]
    if not words or words == ["default"]:
        return surface.DEFAULT_TOOLSETS
    if "all" in words:
        return surface.TOOLSETS
    unknown = sorted(set(words) - set(surface.TOOLSETS) - {"default"})
    if unknown:
        raise errors.UsageError(f"no toolset {', '.join(unknown)}: pick from {', '.join(surface.TOOLSETS)}, "
                                "or all, or default")
    wanted = set(words) | (set(surface.DEFAULT_TOOLSETS) if "default" in words else set())
    return tuple(s for s in surface.TOOLSETS if s in wanted)


def env_level(environ) -> str:
    """GPUOPS_MODE as a level. Unset or 'operate' is operate; anything else but no-destructive is
    read-only: a typo fails closed."""
    mode = environ.get(MODE_ENV, "").strip().lower().replace("_", "-")
    if mode in ("", OPERATE):
        return OPERATE
    return NO_DESTRUCTIVE if mode in (NO_DESTRUCTIVE, "nodestructive") else READ_ONLY


def stricter(*levels) -> str:
    return max(levels, key=LEVELS.index)


def level() -> str:
    """The level a call is judged by now."""
    return stricter(started.get(), env_level(os.environ))


def effect_of(tool, arguments) -> str:
    """What one call of `tool` (a gpuops.surface Tool) does with these arguments."""
    if tool.acts_when and not any(arguments.get(name) for name in tool.acts_when):
        return READS
    if any(arguments.get(name) for name in tool.dangerous):
        return ENDS
    return tool.effect


def refuse(command, effect):
    """Refused, saying why, when the current level does not admit `effect`."""
    now = level()
    if effect in ADMITS[now]:
        return
    mode = os.environ.get(MODE_ENV, "").strip().lower()
    why = f"{MODE_ENV}={mode}" if mode and env_level(os.environ) == now else f"started with {FLAGS[now]}"
    raise errors.Refused(f"{command} is refused: {_SAID[now]}, and this server runs in {now} mode ({why})")


def listed(tool, toolsets, at) -> bool:
    """Whether a server offering `toolsets` at level `at` lists `tool`."""
    return tool.toolset in toolsets and tool.effect in ADMITS[at]


def not_offered(tool, toolsets):
    raise errors.Refused(f"{tool.name} is in the toolset {tool.toolset}, which this server does not offer (it offers "
                         f"{', '.join(toolsets)}; its owner chooses with --toolsets or {TOOLSETS_ENV})")
