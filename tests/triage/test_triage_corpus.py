"""Every fixture log against its expected verdict, exactly, with both scan engines.

The fixtures cover every status and every failure class of the procedure (plus the torchrun /
HF / DeepSpeed extensions), cascades, restored runs and runs that never reached a checkpoint.
expected.json was computed by plain arithmetic from how each log was written (step times,
timestamps, periods), not by running triage.
"""

import json

import pytest

from gpuops.onbox.triage import signatures as S
from gpuops.onbox.triage.logtriage import triage_file

from tests.triage.helpers import EXPECTED, FIXTURES, log, now_of, state_of

NAMES = sorted(EXPECTED)


@pytest.mark.parametrize("engine", ["python", "grep"])
@pytest.mark.parametrize("name", NAMES)
def test_fixture_verdict(name, engine):
    result = triage_file(log(name), now=now_of(name), slurm_state=state_of(name), engine=engine)
    data = result.data
    assert tuple(data) == S.DATA_KEYS
    assert tuple(data["progress"]) == S.PROGRESS_KEYS
    expect = EXPECTED[name]["expect"]
    assert {k: data[k] for k in expect} == expect
    for needle in EXPECTED[name].get("next_contains", []):
        said = data["advice"] + [" ".join(s["argv"]) for s in data["next"]]  # prose, and the commands to run
        assert any(needle in text for text in said), (needle, said)


@pytest.mark.parametrize("name", NAMES)
def test_evidence_points_at_real_lines(name):
    data = triage_file(log(name), now=now_of(name), slurm_state=state_of(name)).data
    lines = log(name).read_bytes().split(b"\n")
    assert len(data["evidence"]) <= S.EVIDENCE_MAX
    for item in data["evidence"]:
        text = item["text"]
        assert len(text) <= S.EVIDENCE_CHARS
        assert text.rstrip(".").encode() in lines[item["line"] - 1]


def test_corpus_covers_every_class_and_status():
    """With the frameworks' own logs (test_triage_frameworks.py): launch-fail is a plain script's; and the
    shapes of issue 41 (test_triage_shapes.py): driver-too-old is torch's own line."""
    frameworks = json.loads((FIXTURES / "frameworks" / "expected.json").read_text())
    shapes = json.loads((FIXTURES / "shapes" / "expected.json").read_text())
    primaries = {e["expect"]["primary"] for e in list(EXPECTED.values()) + list(frameworks.values())
                 + list(shapes.values())}
    seen = primaries | {c for e in EXPECTED.values() for c in e["expect"]["also"]}
    assert seen >= set(S.CLASS_NAMES)
    assert {e["expect"]["status"] for e in EXPECTED.values()} == set(S.STATUSES)
    assert None in primaries  # completed and healthy running jobs have no primary failure
