"""The tasks of the verbs whose description names their operation and renderer (gpuops.surface:
Verb.op, Verb.render), so that no function is written for them.

Each is made the way gpuops.cli.flags.verb makes a written one (its flags, their parsing and
bounds), around a body that calls the operation with the flags by name and hands the envelope to
`run`: JSON under --json, else the renderer, given the flags that say how it is drawn (Param.shows).
The operation and the renderer are imported when the verb runs, and the renderer only when a person
reads the answer, so a made verb loads no more than a written one did (gpuops.cli.lite).
"""

import functools

from .. import surface
from ..surface.model import named
from .common import run
from .flags import task


@functools.lru_cache(maxsize=None)
def made(name: str):
    """The task of verb `name`, made from its description (once, as a module's TASKS are)."""
    spec = surface.verb(name)
    if spec.engine_flags or not (spec.op and spec.render):
        raise TypeError(f"{name}: a made verb names its op and render and takes no engine flags")
    shown = {p.name: p.shows for p in spec.params if p.shows}
    asked = [p.name for p in spec.params if p.name != "json" and not p.shows]

    def body(c, **given) -> None:
        def human(doc, con) -> None:
            named(spec.render)(doc, con, **{keyword: given[p] for p, keyword in shown.items()})

        run(name, bool(given.get("json")), lambda: named(spec.op)(**{p: given[p] for p in asked}), human)

    return task(spec, body, name.replace("-", "_"), spec.doc, __name__)
