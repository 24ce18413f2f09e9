"""A tool's parameters as the SDK reads them, made from the tool's description (gpuops.surface).

A tool function names its parameters and nothing else; `signature` gives it the types, bounds,
defaults and descriptions of its Args, so that what a call is validated against, what tools/list
advertises and what the CLI parses come from one place. A function whose names differ from its
description's is a TypeError at build, not a tool that quietly takes something else.
"""

import inspect
from typing import Annotated, Literal, Optional, Union

from mcp.server.mcpserver import Context
from pydantic import Field

from ..surface import model as M

_PLAIN = {M.TEXT: str, M.INT: int, M.NUM: float, M.SECS: float, M.SWITCH: bool}
# a bound past what a JSON number holds exactly cannot be said in a schema (a byte offset's 2**63-1)
_EXACT = 2 ** 53


def _base(arg):
    if arg.kind == M.CHOICE:
        return Literal[tuple(arg.choices)]
    if arg.kind in (M.STATES, M.LIST, M.CSV):
        return list[Literal[tuple(arg.items)]] if arg.items else list[str]
    if arg.kind == M.PAIRS:
        return dict[str, str]
    if arg.kind == M.OBJECT:
        return dict[str, Union[int, str, bool]]
    return _PLAIN[arg.kind]


def annotation(arg):
    bounds = {}
    if arg.low is not None:
        bounds["ge"] = arg.low
    if arg.high is not None and arg.high < _EXACT:
        bounds["le"] = arg.high
    typed = Annotated[_base(arg), Field(description=arg.tip, **bounds)]
    return typed if arg.required or arg.default is not None else Optional[typed]


def signature(fn, args) -> inspect.Signature:
    """`fn`'s signature with each Arg's annotation and default; its Context parameter kept."""
    own = inspect.signature(fn).parameters
    ctx = [p for p in own.values() if p.annotation is Context]
    names = [p.name for p in own.values() if p.annotation is not Context]
    if names != [a.name for a in args]:
        raise TypeError(f"{fn.__name__} takes {names}; its description says {[a.name for a in args]}")
    made = [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation(a),
                              default=inspect.Parameter.empty if a.required else a.default) for a in args]
    return inspect.Signature(ctx + made)
