"""The corpus of output shapes (tests/fixtures/progress/shapes.py, from the libraries' own format
strings) run as jobs under `--stall-after 6s` on a real sshd box, one run a shape, all at once:
no healthy shape is stopped, and every hung one is stopped within the limit and 30 s of the moment
it began to hang (the time its player wrote down just before)."""

import json

from gpuops.ops import wait as waiting
from tests.fixtures.progress import shapes
from tests.jobs.helpers import launch_shape, run_record

LIMIT_S, SLACK_S = 6.0, 30.0


def _launch(box, jobs_dir, tmp_path, name):
    return launch_shape(box, jobs_dir, tmp_path, name, LIMIT_S)


def _ended(box, jobs_dir, runs, timeout=240):
    """{name: (state, events)} once every run has ended."""
    out = {}
    for name, run in runs.items():
        doc = waiting.wait(box, job=run, jobs_dir=str(jobs_dir), timeout_s=timeout, after_event=0)
        out[name] = (doc["data"]["state"], doc["data"].get("events") or [])
    return out


def test_no_healthy_shape_is_stopped_under_a_six_second_limit(box, jobs_dir, tmp_path):
    runs = {name: _launch(box, jobs_dir, tmp_path, name) for name in sorted(shapes.HEALTHY)}
    ended = _ended(box, jobs_dir, runs)
    stopped = {name: [e.get("why") for e in events if e["kind"] == "stalled"] for name, (_, events) in ended.items()}
    assert not any(stopped.values()), stopped
    assert {name: state for name, (state, _) in ended.items()} == {name: "COMPLETED" for name in runs}
    # the save was a phase of its own while it lasted, and the run says which phase it was in last
    activity = run_record(jobs_dir, runs["hf-checkpoint-save"]).get("activity") or {}
    assert activity.get("phase") == "training" and activity.get("job") == runs["hf-checkpoint-save"]


def test_every_hung_shape_is_stopped_within_the_limit_and_thirty_seconds(box, jobs_dir, tmp_path):
    runs = {name: _launch(box, jobs_dir, tmp_path, name) for name in sorted(shapes.HANGS)}
    ended = _ended(box, jobs_dir, runs)
    late = {}
    for name, (state, events) in ended.items():
        stall = next((e for e in events if e["kind"] == "stalled"), None)
        assert stall is not None, (name, state, [(e["kind"], e.get("why")) for e in events])
        hang_at = float((tmp_path / ("hang-at-" + name)).read_text())
        took = stall["at"] - hang_at
        if not 0 < took <= LIMIT_S + SLACK_S:
            late[name] = took
        rec = run_record(jobs_dir, runs[name])
        assert rec["final"]["class"] == "hang" and rec["activity"]["phase"] == "stalled"
    assert not late, late
    exit_doc = json.loads((jobs_dir / runs["sigstop"] / "exit.json").read_text())
    assert exit_doc["ended_by"] == "stall"
