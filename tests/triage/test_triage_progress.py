"""The projection's arithmetic, exactly as the procedure defines it."""

import pytest

from gpuops.onbox.triage import progress as P
from gpuops.onbox.triage import signatures as S

T = 1_700_000_000.0


def project(**kw):
    args = dict(first_step=0, last_step=None, total_steps=None, period=None, step_time=None, last_step_epoch=None,
                now_epoch=None, completed=False)
    args.update(kw)
    return P.project(**args)


def test_fresh_run_past_two_periods():
    p = project(first_step=0, last_step=450, total_steps=1000, period=200, step_time=2.5, last_step_epoch=T,
                now_epoch=T + 100)
    assert p == {"first_step": 0, "last_step": 450, "total_steps": 1000, "checkpoint_period": 200,
                 "last_periodic_ckpt": 400, "steps_lost": 50, "step_time_s": 2.5, "expected_step_now": 490,
                 "eta_s": 1372.5}


def test_never_reached_the_period_loses_every_step_of_the_run():
    p = project(first_step=0, last_step=150, period=200, step_time=2.0)
    assert p["last_periodic_ckpt"] is None
    assert p["steps_lost"] == 151  # steps 0..150; the step-0 checkpoint is the starting state


def test_restored_from_the_initial_checkpoint_starts_at_one():
    p = project(first_step=1, last_step=150, period=200)
    assert p["last_periodic_ckpt"] is None and p["steps_lost"] == 150


def test_restored_run_counts_from_the_highest_multiple():
    p = project(first_step=201, last_step=350, period=200)
    assert p["last_periodic_ckpt"] == 200 and p["steps_lost"] == 150


def test_exactly_on_a_period_loses_nothing():
    assert project(first_step=0, last_step=400, period=200)["steps_lost"] == 0


def test_completed_run_has_nothing_lost_or_left():
    p = project(first_step=0, last_step=999, total_steps=1000, period=200, step_time=2.0, last_step_epoch=T,
                now_epoch=T + 86400, completed=True)
    assert p["last_periodic_ckpt"] == 800
    assert p["steps_lost"] is None and p["expected_step_now"] is None and p["eta_s"] is None


def test_a_healthy_running_job_has_lost_nothing():
    p = project(first_step=0, last_step=450, total_steps=1000, period=200, step_time=2.0, last_step_epoch=T,
                now_epoch=T + 10, failed=False)
    assert p["steps_lost"] is None and p["last_periodic_ckpt"] == 400
    assert p["expected_step_now"] == 455 and p["eta_s"] == 1098.0


def test_expected_step_rounds_down_and_ignores_clock_skew():
    assert project(last_step=10, step_time=3.0, last_step_epoch=T, now_epoch=T + 8.9)["expected_step_now"] == 12
    assert project(last_step=10, step_time=3.0, last_step_epoch=T, now_epoch=T - 60)["expected_step_now"] == 10


def test_unknowns_stay_null():
    p = project(first_step=None, last_step=None, total_steps=500)
    assert p == dict(dict.fromkeys(S.PROGRESS_KEYS), first_step=None, total_steps=500)
    q = project(first_step=0, last_step=40)  # no period, no step time: nothing to project
    assert q["steps_lost"] is None and q["expected_step_now"] is None and q["eta_s"] is None


@pytest.mark.parametrize("cfg, arg, enabled, expected", [
    (500, 300, True, 500),     # the config dump wins
    (None, 300, True, 300),    # then checkpoint_period= in PASSTHROUGH_ARGS
    (None, None, True, 200),   # enable_checkpointing=true alone: the default period
    (None, None, None, None),  # no checkpointing known
    (None, None, False, None),
])
def test_checkpoint_period_sources(cfg, arg, enabled, expected):
    assert P.checkpoint_period(cfg, arg, enabled, S.DEFAULT_CHECKPOINT_PERIOD) == expected


# ---------------------------------------------------------------- issue 27: the projection's numbers

def test_a_fresh_run_that_counts_from_one_is_no_restore():
    """`Step 1/100` first: the framework counts steps done; it was "restored from checkpoint step 0"
    and counted `8 / 100` after `Step 7/100`."""
    from gpuops.onbox.triage.logtriage import triage_bytes

    log = b"".join(b"[2025-03-02 10:00:%02d] Step %d/100 loss 2.0\n" % (i, i) for i in range(1, 8))
    result = triage_bytes(log)
    ctx = next(f.evidence for f in result.findings if f.id == "triage.context")
    assert ctx["restore"] == "fresh start (step 0)"
    p = result.data["progress"]
    assert (p["first_step"], p["last_step"], p["total_steps"]) == (0, 6, 100)  # 7 of 100 done


def test_a_job_that_ended_is_projected_to_its_end_not_to_todays_clock():
    """A failed run from long ago: 'expected step now' was 54,849,375 (today's clock)."""
    from datetime import datetime

    from gpuops.onbox.triage.logtriage import classify_bytes

    log = b"".join(b"[2025-03-02 10:00:%02d] completed step: %d, seconds: 1.000\n" % (i, i) for i in range(0, 20))
    log += b"[2025-03-02 10:00:30] Traceback (most recent call last):\nValueError: bad batch\n"
    data = classify_bytes(log, now=datetime(2026, 11, 1))
    assert data["status"] == "failed" and data["progress"]["expected_step_now"] == 30
