"""The closed vocabularies an answer uses, as output schemas enumerate them: job states, diagnose
verdicts and their confidence, triage statuses and classes, finding severities, error kinds.

Each comes from the table that defines it where one exists (gpuops.states, gpuops.onbox.triage,
gpuops.findings, gpuops.errors). Diagnose verdicts are spread over the engines' own reasoning
(gpuops.diagnose.verdict, gpuops.engines.*_diagnose), so they are listed here, and
tests/test_mcp_vocab.py holds the list to every verdict those modules can write: a client
validates each result against its schema, and a word the enum lacks would turn an answer into
an error.
"""

from .. import errors
from .. import states
from ..onbox.triage.signatures import CLASS_NAMES, STATUSES

STATES = states.NAMES
# a job still in its system is diagnosed as its state, in lower case
VERDICTS = tuple(sorted({
    "completed", "crashed", "disk-full", "failed-exit", "gpu-fault", "killed-by-signal", "oom-kill", "reboot",
    "sighup", "stopped", "unknown", "cancelled", "failed-to-start", "never-runs", "node-failure", "preempted",
    "timeout", "unreachable", "vanished",
} | {s.lower() for s in states.NAMES if states.STATES[s].alive or s == states.PAUSED}))
CONFIDENCE = ("high", "medium", "low")
TRIAGE_STATUSES = STATUSES
CLASSES = CLASS_NAMES
ERROR_KINDS = tuple(errors.KINDS) + (errors.GpuopsError.kind,)
REQUEST_STATES = ("running", "cancelled", "failed")  # a copy's request before its own answer (gpuops.mcp.requests)


def enum(values, nullable=False) -> dict:
    return {"enum": list(values) + ([None] if nullable else [])}
