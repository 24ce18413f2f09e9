"""An envelope's prose in the words of the surface it is read on: tools and parameters, not flags.

Operations write for the CLI ("dry run: ...; add --yes --plan P", "pull it with gpuops pull
--host b --src /ckpt --dst LOCAL_DIR", "name paths to keep with --keep"); an agent on MCP cannot
type a flag. So before an answer leaves the server its prose is reworded: a gpuops command line
becomes the tool call it means (`data_pull {"host": "b", "remote": "/ckpt", "local": "LOCAL_DIR"}`),
or the tool's name when its flags cannot all be said; a flag of the answer's own verb becomes its
parameter (`plan_id`; "add --yes --plan P" is "call again with yes=true and plan_id P"), a
switch a tool means by itself that tool (--torchrun is gang_launch), an engine's flag
`resources.time`, and a flag no tool takes is named as the CLI's. A flag that is not gpuops's (a
training script's `--resume`, `docker run --gpus`) is left as it is: only the verb's own flags are
reworded outside a command.
"""

import functools
import json
import re

from .. import surface
from .nextsteps import tool_step

_DEEP = ("hint", "reason", "title", "fix", "message")  # strings reworded wherever they sit
# the apply of a plan, as every destructive verb's dry run words it
_APPLY = re.compile(r"\badd --yes --plan (\S+)")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


@functools.lru_cache(maxsize=None)
def _flags(verb):
    """{--flag: its MCP word} for `verb`'s flags (and its engines')."""
    from .. import engines

    spec = surface.verbs().get(verb)
    if spec is None:
        return {}
    out = {}
    for p in spec.params:
        made = [a for t in spec.tools for a in surface.args(t.name) if a.param == p.name]
        meaning = [t.name for t in spec.tools if p.name in t.implied]  # --torchrun: gang_launch itself
        if made:
            out[p.flag] = made[0].name
        elif meaning:
            out[p.flag] = meaning[0]
        else:
            out[p.flag] = f"the CLI's {p.flag}"
    if spec.engine_flags:
        for e in engines.each():
            for key in e.flags_for(verb):
                out.setdefault(engines.flag_of(key), f"resources.{key}")
    return out


def _call(match, listed):
    verb, rest = match.group(1), match.group(2).replace("=", " ").split()
    made = tool_step(["gpuops", verb, *rest], listed)
    if made is not None:
        return f"{made['tool']} {json.dumps(made['args'], ensure_ascii=False)}" if made["args"] else made["tool"]
    spec = surface.verbs().get(verb)
    shown = [t.name for t in spec.tools if t.name in listed] if spec else []
    return shown[0] if shown else f"the CLI's `gpuops {verb}`"


@functools.lru_cache(maxsize=1)
def _command():
    """A gpuops command line in prose: a verb and its --flags, each with at most one value."""
    verbs = "|".join(sorted(surface.verbs(), key=len, reverse=True))
    return re.compile(rf"`?\bgpuops ({verbs})\b((?:[ =]--[a-z][a-z-]*(?:[ =](?!--)[^\s`;,()]+)?)*)`?")


@functools.lru_cache(maxsize=1)
def _bare() -> re.Pattern:
    """A verb named without `gpuops` ("teardown-check says ..."): only the hyphenated ones, which
    no English word is."""
    named = sorted((v for v in surface.verbs() if "-" in v), key=len, reverse=True)
    return re.compile(rf"(?<![\w-])({'|'.join(map(re.escape, named))})(?![\w-])")


def _tool_of(match: re.Match, listed: frozenset) -> str:
    spec = surface.verbs()[match.group(1)]
    shown = [t.name for t in spec.tools if t.name in listed]
    return shown[0] if shown else match.group(0)


def reword(verb, text: str, listed=None):
    """`text` as an MCP caller should read it (see the module docstring)."""
    listed = frozenset(surface.tools()) if listed is None else listed
    text = _APPLY.sub(r"call again with yes=true and plan_id \1", text)
    text = _command().sub(lambda m: _call(m, listed), text)
    text = _bare().sub(lambda m: _tool_of(m, listed), text)
    names = _flags(verb)
    return _FLAG.sub(lambda m: names.get(m.group(), m.group()), text)


def for_mcp(doc, listed) -> dict:
    """The envelope with its prose reworded: summary, advice, and every hint, reason, title, fix
    and message (findings, job rows, the error)."""
    verb = doc.get("command") or ""

    def walk(node):
        if isinstance(node, dict):
            return {k: reword(verb, v, listed) if isinstance(v, str) and k in _DEEP else walk(v)
                    for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out = dict(doc)
    for key in ("data", "findings", "error"):
        if key in out:
            out[key] = walk(out[key])
    if isinstance(out.get("summary"), str):
        out["summary"] = reword(verb, out["summary"], listed)
    if isinstance(out.get("advice"), list):
        out["advice"] = [reword(verb, a, listed) if isinstance(a, str) else a for a in out["advice"]]
    return out
