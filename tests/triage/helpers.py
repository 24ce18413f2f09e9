"""Shared bits of the triage tests: the fixture corpus and its expectations."""

import json
from datetime import datetime
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "triage"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def log(name):
    return FIXTURES / f"{name}.log"


def now_of(name):
    value = EXPECTED[name]["now"]
    return datetime.fromisoformat(value) if value else None


def state_of(name):
    return EXPECTED[name]["slurm_state"]


def long_noisy_hanging_log():
    """(head of the log, the rest): status_hanging's log with a config dump that pushes its first
    step past a small head, and more noise after its last step (316) than a small tail holds."""
    fixture = log("status_hanging").read_bytes()
    start = fixture.index(b"0: [2025-03-02 10:01:40] completed step: 0,")
    dump = b"".join(b"0: Config param opt_%d: %d\n" % (i, i) for i in range(2000))
    noise = b"".join(b"0: [2025-03-02 14:00:00] (raylet) rccl busy wait, iteration %d\n" % i for i in range(40_000))
    return fixture[:start] + dump + fixture[start:], noise
