"""The framework tables (gpuops/onbox/triage/frameworks.py, framework_advice.py) against logs written from
each framework's own source strings: tests/fixtures/triage/frameworks/<framework>/<case>.log, with
the status, class, progress and advice expected of each in expected.json there.

Every framework has at least a completed run, a failed one and one cut off mid-training; none of
these logs was copied from a public issue thread (issue 27 keeps such logs aside to measure triage
on logs it has never seen).
"""

import json
import re
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest

from gpuops.onbox.triage import frameworks as FW
from gpuops.onbox.triage import framework_advice
from gpuops.onbox.triage.logtriage import triage_file
from tests.triage.helpers import FIXTURES

ROOT = FIXTURES / "frameworks"
EXPECTED = json.loads((ROOT / "expected.json").read_text())
FRAMEWORKS = ("torch", "deepspeed", "accelerate", "lightning", "hf", "megatron", "nemo", "keras", "jax", "fairseq",
              "mmengine", "ultralytics", "vllm", "colossalai", "submitit", "modelscope", "plain")
PROGRESS = ("first_step", "last_step", "total_steps")


@pytest.mark.parametrize("engine", ["python", "grep"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_framework_log_reads_as_its_source_says(name, engine):
    e = EXPECTED[name]
    data = triage_file(ROOT / f"{name}.log", now=datetime.fromisoformat(e["now"]), slurm_state=e["slurm_state"],
                       engine=engine).data
    got = {"status": data["status"], "primary": data["primary"], "progress": {k: data["progress"][k] for k in PROGRESS}}
    if "also" in e["expect"]:
        got["also"] = data["also"]
    assert got == e["expect"]
    for needle in e.get("advice_contains", []):
        assert any(needle in a for a in data["advice"]), (needle, data["advice"])


def test_every_framework_has_a_completed_a_failed_and_a_cut_off_run():
    by = defaultdict(list)
    for e in EXPECTED.values():
        by[e["framework"]].append(e["expect"]["status"])
    assert set(by) == set(FRAMEWORKS)
    for fw, statuses in by.items():
        assert len(statuses) >= 3 and "completed" in statuses and "failed" in statuses, fw
        assert "unknown" in statuses, fw  # cut off mid-training: no end in the log, no death claimed


def test_a_cut_off_run_claims_no_death_and_no_class():
    for name, e in EXPECTED.items():
        if e["expect"]["status"] == "unknown":
            assert e["expect"]["primary"] is None, name


_CITATION = re.compile(r"#\s+[\w.-]+/[\w.-]+ [\w./+-]+\.(?:py|cpp|cc|c|rst|yaml|yml)\b")


@pytest.mark.parametrize("module", [FW, framework_advice])
def test_every_table_entry_cites_the_file_its_string_comes_from(module):
    """Each entry is backed by the framework's own source: the comment block right above it names
    the repository and the file (owner/repo path)."""
    lines = Path(module.__file__).read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"\s+(?:_e\(|\(\"[\w-]+\", \"[\w-]+\"\): \()", line)]
    assert len(starts) >= (len(FW.ENTRIES) if module is FW else len(framework_advice.ADVICE))
    for i in starts:
        j = i - 1
        block = []
        while j >= 0 and lines[j].strip().startswith("#"):
            block.append(lines[j])
            j -= 1
        if not block and lines[i - 1].strip().startswith("_e("):  # a pair printed by one file shares its comment
            continue
        assert any(_CITATION.search(line) for line in block), lines[i]


def test_the_framework_a_log_shows():
    assert FW.shown({}) is None
    assert FW.shown({"torch": 40, "deepspeed": 3}) == "deepspeed"  # the most specific of the family
    assert FW.shown({"torch": 3, "jax": 1}) == "torch"
    assert FW.shown({"torch": 1, "jax": 1}) == "torch"  # a tie goes to torch, the default
    assert FW.shown({"torch": 2}, jax_steps=True) == "jax"  # MaxText's own step lines
    assert FW.shown({"keras": 5, "torch": 1}) == "keras"
