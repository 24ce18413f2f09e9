"""What tools/list advertises: each tool's output schema (the envelope, with the `data` keys an
agent acts on typed: gpuops.mcp.answers) and the finishing touches on its input schema (profile
enums, log_triage's oneOf, no null defaults).

Every listed tool costs an agent its definition on every turn, so an output schema says what a
model branches on, with each closed vocabulary as an enum (states, verdicts, classes, severities),
and no more (error kinds are said once, in the server's instructions: an error is an is_error
result, which clients do not check against this schema, and 16 kinds on every tool cost 4,000
characters a turn): other keys are allowed (consumers ignore keys they do not know, the
envelope's own rule), none is required but the envelope's own (the budget may drop a data key:
gpuops.mcp.clientfit). Clients validate a successful result against it (the official client does);
tests/test_mcp_contract.py holds each tool's answers to every key it may carry (answers.known()).
"""

from .. import surface
from ..findings import SEVERITIES
from . import clientfit, vocab
from .answers import advertised

_S = {"type": "string"}
FAR = 100_000  # a maximum past this (a year of seconds) says nothing a model needs
FINDING = {"properties": {"id": _S, "severity": vocab.enum(SEVERITIES)}}


def output_schema(tool) -> dict:
    """The envelope as `tool` returns it."""
    props: dict = {"data": {"properties": advertised(tool)}}
    if surface.tool(tool).findings:  # the others' findings list is always empty
        props["findings"] = {"type": "array", "items": FINDING}
    return {"type": "object", "required": ["summary", "ok", "command"], "properties": props}


def input_schema(tool, schema, profile_names):
    """What a tool's arguments look like to a caller: without pydantic's titles and null defaults
    (an omitted optional is simply absent), profile names as an enum, and log_triage's rule."""
    out = clientfit.lean_schema(schema)
    for prop in out["properties"].values():
        if prop.get("default", 0) is None:
            del prop["default"]
        if prop.get("type") == "object":  # its values' types are the call's to check, not worth a turn's words
            prop.pop("additionalProperties", None)
        if prop.get("items") == {"type": "string"}:  # an array's items are text unless an enum says otherwise
            del prop["items"]
        if prop.get("maximum", 0) > FAR:  # as far as a model need care (a call is still held to it)
            del prop["maximum"]
    if "profile" in out["properties"]:
        out["properties"]["profile"]["enum"] = list(profile_names)
    if tool == "profiles_show":
        out["properties"]["name"]["enum"] = list(profile_names)
    if tool == "log_triage":
        out["oneOf"] = [{"required": ["path"], "not": {"required": ["host"]}}, {"required": ["job"]}]
    out["additionalProperties"] = False
    return out
