"""The functions of the tools whose verb's description names its operation (gpuops.surface:
Verb.op), so that none is written for them in tools_*.py.

Each calls the operation with the verb's params its Args stand for, by name. A verb that connects
takes one host a call, as every tool does (gpuops.mcp.adapter.on_host). The server gives the
function its signature from the Args (gpuops.mcp.params), as it does a written one's, and its output
schema from the Tool's `data` (gpuops.mcp.answers).
"""

import inspect
from typing import Callable

from .. import surface
from ..surface.model import named


def made(tool: str) -> Callable:
    """The function of `tool`, made from its description."""
    spec = surface.tool(tool)
    verb = surface.verb(spec.verb)
    args = surface.args(tool)
    own = [a.name for a in args if a.param is None]
    if own or not spec.data:
        raise TypeError(f"{tool}: a made tool takes only its verb's params (not {own}) and says what its answer "
                        "holds (Tool.data)")
    param_of = {a.name: a.param for a in args}

    def call(**given) -> dict:
        asked = {param_of[name]: value for name, value in given.items()}
        if verb.connects and asked.get("host") is not None:
            from ..ops.hosts import one_host

            asked["host"] = one_host(verb.name, asked["host"])
        return named(verb.op)(**asked)

    call.__name__ = call.__qualname__ = tool
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # read by inspect.signature
        [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY) for a in args])
    return call
