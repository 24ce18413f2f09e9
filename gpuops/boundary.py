"""The trust boundary: what a box answers is bounded, parsed and checked here before gpuops uses it.

A box is untrusted input. Its output is read only up to a bound (gpuops.remote.base); here it
must be one JSON object (not garbage, not nested deeper than any answer of ours), and the fields a
verb reads must have the types gpuops' own on-box code writes. Anything else is BadAnswer (exit 3)
quoting what came instead: a broken or hostile box, never a crash on this side. Paths and ids from
the box are checked where they are used (gpuops.sync.plan for manifest entries, gpuops.engines.answers
for job records).
"""

import json
import math

from .errors import BadAnswer

QUOTE_BYTES = 80


def answer(data: bytes, host: str) -> dict:
    """One JSON object from the box's bytes, or BadAnswer quoting what came instead."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than any answer of ours
        doc = None
    if not isinstance(doc, dict):
        raise BadAnswer(f"{host}: the box's answer is not gpuops's: {quote(data)}")
    return doc


def quote(data: bytes) -> str:
    """The first bytes of an answer, printable, for an error message."""
    head = repr(data[:QUOTE_BYTES].decode("utf-8", "replace"))
    return head + (" ..." if len(data) > QUOTE_BYTES else "") + f" ({len(data)} bytes)"


def expect(doc: dict, fields: dict, host: str, what: str = "answer") -> dict:
    """`doc` when each of `fields` ({key: type or tuple of types}) is there with its type; else
    BadAnswer naming the first field that is not. None in a tuple allows null; a bool never
    passes for a number."""
    for key, kind in fields.items():
        kinds = kind if isinstance(kind, tuple) else (kind,)
        value = doc.get(key)
        if value is None:
            ok = type(None) in kinds
        else:
            ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if not ok:
            got = "missing" if value is None else f"a {type(value).__name__}"
            raise BadAnswer(f"{host}: the box's {what} is not gpuops's: {key!r} is {got}")
    return doc


def optional(doc, fields: dict, host: str, what: str):
    """A record the box may not have (None stays None), else `doc` checked by `expect` as an object."""
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise BadAnswer(f"{host}: the box's {what} is not gpuops's: a {type(doc).__name__}")
    return expect(doc, fields, host, what)


def shaped(doc, fields: dict, host: str, what: str) -> dict:
    """`doc` checked by `expect` (an object first), with every nullable key it left out present
    as None, so the caller reads each field without a default."""
    if not isinstance(doc, dict):
        raise BadAnswer(f"{host}: the box's {what} is not gpuops's: a {type(doc).__name__}, not an object")
    expect(doc, fields, host, what)
    for key in fields:
        doc.setdefault(key, None)
    return doc


def bounded(value, low, high, host: str, what: str, answer: str = "answer"):
    """`value` when it is None or a finite number in [low, high]; else BadAnswer naming it."""
    if value is not None and not (math.isfinite(value) and low <= value <= high):
        raise BadAnswer(f"{host}: the box's {answer} is not gpuops's: {what} is {value!r}")
    return value
