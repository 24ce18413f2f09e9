"""The job engines, on this side: who runs a job, and the one interface every verb asks.

A job runs on one engine: the box's own supervisor (`box`, the default), Slurm, ... Each engine
is a module here holding `ENGINE` (a gpuops.engines.base.Engine): its state rule (the engine's
facts -> a row of gpuops.states), its resource flags and their checks, and what diagnose,
triage and stop may ask of it. Its box half is gpuops.onbox.engines.registry' entry of the same name. A
gang (gpuops.jobs.gang) is a composition of engine jobs, not an engine.

A new engine is its modules (named after it, here and in gpuops.onbox) plus one line in ENGINES
below and one in gpuops.onbox.engines.registry: nothing else branches on which engine a job has
(tests/test_layout.py holds that).
"""

import importlib
from typing import TYPE_CHECKING

from ..errors import BadAnswer, UsageError

if TYPE_CHECKING:
    from .seam import WorkstationHalf

# engine name (meta["engine"], --engine's word) -> its module under gpuops.engines
ENGINES = {"box": "box", "slurm": "slurm", "ray": "ray"}
DEFAULT = "box"


def names() -> tuple[str, ...]:
    return tuple(ENGINES)


def get(name: str | None = None) -> "WorkstationHalf":
    """The engine `name` (None: the default); a name no engine has is the caller's mistake."""
    name = name or DEFAULT
    if name not in ENGINES:
        raise UsageError(f"--engine takes {', '.join(ENGINES)}, not {name!r}")
    return importlib.import_module(f"{__name__}.{ENGINES[name]}").ENGINE


def of_record(record: dict | None, host: str = "the box") -> "WorkstationHalf":
    """The engine of a job's record or status row (one without the field is the default's); a
    name this gpuops does not know is a box's answer that is not gpuops's."""
    name = (record or {}).get("engine") or DEFAULT
    if not isinstance(name, str) or name not in ENGINES:
        raise BadAnswer(f"{host}: the box's answer is not gpuops's: engine {str(name)[:40]!r}")
    return get(name)


def each() -> list["WorkstationHalf"]:
    return [get(name) for name in ENGINES]


def phases():
    """{engine: {its state word: phase}}: what the box's engine code compares, since it may spell
    no state itself (gpuops.onbox.host.jobrecord.phases)."""
    return {e.name: e.phases() for e in each() if e.states}


def job_id_keys() -> tuple:
    """The keys the engines' rows carry their own job ids under (slurm_job_id ...), in registry order."""
    return tuple(e.job_id_key for e in each() if e.job_id_key)


def runs_detach(detach) -> bool:
    """Whether an engine runs the jobs of a profile whose launch.detach is `detach`."""
    return any(e.detach == detach for e in each() if e.detach)


def for_profile(profile):
    """The engine a platform profile's jobs run on (its launch.detach names one), else the default."""
    detach = profile.launch.detach if profile is not None else None
    return next((e for e in each() if e.detach and e.detach == detach), get())


def flags():
    """{flag parameter: help} of every engine's own flags, for the verbs that take them."""
    out = {}
    for e in each():
        out.update(e.flags)
    return out


def owner_of_flags(asked: dict) -> "WorkstationHalf | None":
    """The engine whose flags `asked` uses (None when none is given); flags of two engines at
    once are a usage error."""
    owners = {e.name: e for e in each() for k in asked if k in e.flags}
    if len(owners) > 1:
        named = " and ".join(flag_of(k) for k in sorted(asked))
        raise UsageError(f"{named} belong to different engines ({', '.join(sorted(owners))}): give one engine's")
    return next(iter(owners.values()), None)


def refuse_foreign(engine: "WorkstationHalf", asked: dict, verb: "str | None" = None) -> None:
    """The usage error for a flag given that `engine` does not take (on `verb`, when named): another
    engine's says which --engine it needs. The one refusal of an engine's flags, for the CLI's
    flags and a tool's `resources` alike (the server rewords the flags)."""
    takes = engine.flags if verb is None else engine.flags_for(verb)
    for key in sorted(asked):
        if key not in takes:
            other = owner_of_flags({key: asked[key]})
            if other is None:
                raise UsageError(f"{flag_of(key)}: no engine takes it")
            if other is engine:
                raise UsageError(f"{flag_of(key)}: {engine.title} does not take it on {verb}")
            raise UsageError(f"{flag_of(key)} is asked of {other.title}: add --engine {other.name}")


def flag_of(key):
    return "--" + key.replace("_", "-")


def help_text():
    """--engine's help: each engine and what it runs on."""
    return "who runs the job: " + "; ".join(f"'{e.name}' ({e.help})" for e in each())
