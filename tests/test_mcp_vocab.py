"""The closed vocabularies the output schemas enumerate (gpuops.mcp.vocab): complete, since a client
validates every answer and a word an enum lacks would turn an answer into an error; and advertised,
since `verdict`, `state` and the triage class were free strings an agent had to guess at."""

import ast
from pathlib import Path

import pytest

from gpuops import errors, surface
from gpuops import states
from gpuops.mcp import vocab

ROOT = Path(__file__).resolve().parent.parent
VERDICT_WRITERS = ("gpuops/diagnose/verdict.py", "gpuops/engines/slurm_diagnose.py", "gpuops/engines/ray_diagnose.py")


def _verdicts_written(path):
    """Every literal verdict a module's `out(verdict, confidence, ...)` calls write."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "out" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
            elif isinstance(first, ast.IfExp):
                found.update(x.value for x in (first.body, first.orelse) if isinstance(x, ast.Constant))
    return found


@pytest.mark.parametrize("path", VERDICT_WRITERS)
def test_every_verdict_a_diagnosis_writes_is_in_the_enum(path):
    written = _verdicts_written(path)
    assert written and written <= set(vocab.VERDICTS), sorted(written - set(vocab.VERDICTS))


def test_the_other_vocabularies_are_their_tables():
    assert vocab.STATES == states.NAMES and {"running", "stalled", "paused", "pending"} <= set(vocab.VERDICTS)
    assert set(vocab.ERROR_KINDS) == set(errors.KINDS) | {"internal"} and "busy" in vocab.ERROR_KINDS


@pytest.mark.anyio
async def test_output_schemas_enumerate_states_verdicts_classes_severities_and_instructions_error_kinds():
    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from mcp import Client

    from gpuops.mcp import server

    async with Client(server.build(toolsets="all"), raise_exceptions=True) as c:
        tools = {t.name: t.output_schema for t in (await c.list_tools()).tools}

    def data(tool):
        return tools[tool]["properties"]["data"]["properties"]

    assert data("job_status")["jobs"]["items"]["properties"]["state"]["enum"] == list(states.NAMES)
    assert data("job_wait")["state"]["enum"] == list(states.NAMES)
    assert data("job_diagnose")["verdict"]["enum"] == list(vocab.VERDICTS)
    assert data("log_triage")["primary"]["enum"] == list(vocab.CLASSES) + [None]
    assert data("log_triage")["status"]["enum"] == list(vocab.TRIAGE_STATUSES)
    assert data("gang_status")["state"]["enum"] == list(states.NAMES)
    severity = tools["host_preflight"]["properties"]["findings"]["items"]["properties"]["severity"]["enum"]
    assert severity == ["ok", "info", "warn", "fail"]
    for name, schema in tools.items():  # said once, in the instructions: an error result is not checked against it
        assert "error" not in schema["properties"], name
    assert "error.kind is one of: " + ", ".join(vocab.ERROR_KINDS) in server.instructions(surface.TOOLSETS)
