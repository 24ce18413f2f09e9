"""Every engine's own flags on the job verbs that take them (launch, retry, queue).

Invoke reads a verb's flags from its function's parameters, and the fast path (gpuops.cli.lite)
from its code object. So each engine's flags (gpuops.engines: an engine lists its own) become
parameters of a function made here around the verb's body, which receives the given ones in one
dict, `engine_flags`: an engine added to the registry brings its flags to every verb that takes
them, and no verb names one. Also --torchrun's settings, for an engine that runs torchrun itself.
"""

from .. import engines
from ..errors import UsageError


def takes(verb_name: str, note=""):
    """Decorate a verb whose body ends with `engine_flags=None` (after @verb)."""

    def make(body):
        helps, defaults = {}, {}
        for e in engines.each():
            for key, text in e.flags_for(verb_name).items():
                helps[key] = text + note
                defaults[key] = False if key in e.switches else None
        code = body.__code__
        own = code.co_varnames[1:code.co_argcount]
        if own[-1] != "engine_flags":
            raise TypeError(f"{body.__name__}: a verb taking engine flags ends with engine_flags=None")
        names = list(own[:-1]) + list(defaults)
        values = list(body.__defaults__[:-1]) + list(defaults.values())
        src = (f"def {body.__name__}(c, " + ", ".join(f"{n}=_d[{i}]" for i, n in enumerate(names)) + "):\n"
               "    return _body(c, " + "".join(f"{n}={n}, " for n in own[:-1])
               + "engine_flags={" + ", ".join(f"{k!r}: {k}" for k in defaults) + "})\n")
        space = {"_body": body, "_d": values}
        exec(compile(src, f"<engine flags of {body.__name__}>", "exec"), space)
        made = space[body.__name__]
        made.__doc__, made.__module__, made.__qualname__ = body.__doc__, body.__module__, body.__qualname__
        made.task_options = dict(body.task_options, help=dict(body.task_options["help"], **helps))
        return made

    return make


def given(flags):
    """{parameter: value} of the engine flags that were given."""
    return {k: v for k, v in (flags or {}).items() if v not in (None, False, "")}


def chosen(engine, profile, flags):
    """The engine --engine names (or the profile's), checked against the engine flags given: a flag
    of another engine is a usage error saying which --engine it needs."""
    eng = engines.get(engine) if engine else engines.for_profile(profile)
    engines.refuse_foreign(eng, given(flags))
    return eng


def torchrun(on, nproc_per_node, rdzv_port):
    """--torchrun's settings (parsed: gpuops.cli.flags) for an engine that runs it, or None; its
    companions without it are a mistake worth saying."""
    if not on:
        if nproc_per_node or rdzv_port:
            raise UsageError("--nproc-per-node and --rdzv-port go with --torchrun")
        return None
    return {"nproc_per_node": nproc_per_node, "port": rdzv_port}
