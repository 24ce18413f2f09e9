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
