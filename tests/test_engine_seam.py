"""Every registered engine answers the whole seam (gpuops.engines.seam) on both halves, with
parameters its callers can pass; an engine missing a member, or taking them differently, fails."""

import inspect
import types
from pathlib import Path

import pytest

from gpuops import engines
from gpuops.engines import seam
from gpuops.engines.base import Engine
from gpuops.onbox.engines import registry as on_box
from gpuops.render import engines as words

MISSING = object()


def _members(proto):
    """{name: the protocol's function, or None for a plain attribute} of a typing.Protocol."""
    out = {name: None for name in proto.__annotations__}
    out.update({name: fn for name, fn in vars(proto).items() if inspect.isfunction(fn) and not name.startswith("_")})
    return out


def _callable_as(fn, impl):
    """Whether `impl` takes what the seam's callers pass `fn`: its parameters without a default
    by position, those with one by name."""
    params = list(inspect.signature(fn).parameters.values())[1:]  # without self
    pos = [p.name for p in params if p.default is inspect.Parameter.empty]
    kw = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    try:
        inspect.signature(impl).bind(*pos, **kw)
    except TypeError:
        return False
    return True


def problems(half, proto):
    """What `half` lacks or takes differently of `proto`, one line each ([] when it conforms)."""
    out = []
    for name, fn in _members(proto).items():
        value = getattr(half, name, MISSING)
        if value is MISSING:
            out.append(f"{name}: missing")
        elif fn is not None and not callable(value):
            out.append(f"{name}: not callable")
        elif fn is not None and not _callable_as(fn, value):
            out.append(f"{name}: takes {inspect.signature(value)}, the seam passes {inspect.signature(fn)}")
    if isinstance(half, Engine):
        out += [f"{name}: only the base declares it" for name in seam.DECLARED_ONLY
                if getattr(type(half), name) is getattr(Engine, name)]
    return out


@pytest.mark.parametrize("name", engines.names())
def test_each_engine_answers_this_sides_seam(name):
    eng = engines.get(name)
    assert problems(eng, seam.WorkstationHalf) == []
    assert isinstance(eng.name, str) and eng.name == name


@pytest.mark.parametrize("name", sorted(on_box.ENGINES))
def test_each_engines_box_half_answers_the_box_seam(name):
    half = on_box.ENGINES[name]
    assert problems(half, seam.BoxHalf) == []
    assert half.NAME == name and half.POLL_S > 0 and isinstance(half.INHERITED, tuple)
    assert half.chain is None or callable(half.chain)


def test_an_incomplete_engine_fails_the_seam():
    class Half(Engine):
        name = "half"

        def decide(self, row, facts, meta):
            return row

        def stop_steps(self, host, jid):  # the seam passes four arguments
            raise AssertionError

    found = problems(Half(), seam.WorkstationHalf)
    assert found[0].startswith("stop_steps: takes (host, jid)")
    assert found[1:] == ["diagnosis: only the base declares it"]
    del Half.stop_steps
    assert problems(Half(), seam.WorkstationHalf) == ["diagnosis: only the base declares it"]


def test_an_incomplete_box_half_fails_the_seam():
    complete = {name: getattr(on_box.ENGINES["box"], name) for name in _members(seam.BoxHalf)}
    assert problems(types.SimpleNamespace(**complete), seam.BoxHalf) == []
    without = {k: v for k, v in complete.items() if k not in ("stop", "POLL_S")}
    assert problems(types.SimpleNamespace(**without), seam.BoxHalf) == ["POLL_S: missing", "stop: missing"]
    taking_less = dict(complete, observe=lambda out, jdir: None)
    assert problems(types.SimpleNamespace(**taking_less), seam.BoxHalf)[0].startswith("observe: takes (out, jdir)")


@pytest.mark.parametrize("name", engines.names())
def test_each_engine_has_its_words_taking_what_the_verbs_pass(name):
    """What a person reads of an engine's work is its module of gpuops.render.engines."""
    said = words.of(name)
    assert isinstance(said, words.Words) and problems(said, words.Words) == []


def test_no_engine_words_without_an_engine():
    """A words module is named after a registered engine: one under another name is words no job reads."""
    folder = Path(words.__file__).parent
    assert {p.stem for p in folder.glob("*.py")} - {"__init__", "base"} == set(engines.names())


def test_words_taking_other_parameters_fail_the_check():
    class Terse(words.Words):
        def stopped(self, data):  # the verbs pass the data and whether every target is gone
            return "", []

    assert problems(Terse(), words.Words)[0].startswith("stopped: takes (data)")
