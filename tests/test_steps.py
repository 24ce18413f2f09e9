"""The progress policy (gpuops.onbox.steps) that status, diagnose and triage share."""

import pytest

from gpuops.onbox import steps

T = 1_000_000.0


def test_stall_bar_is_ten_step_times_but_at_least_ten_minutes():
    assert steps.stalled(T, 2.0, T + 599) is False
    assert steps.stalled(T, 2.0, T + 601) is True
    assert steps.stalled(T, 120.0, T + 1199) is False and steps.stalled(T, 120.0, T + 1201) is True
    assert steps.stalled(T, None, T + 1799) is False and steps.stalled(T, None, T + 1801) is True
    assert steps.stalled(None, 2.0, T) is None


def test_a_caller_may_move_the_bar_but_not_below_the_unknown_step_time_rule():
    assert steps.stall_after(2.0, factor=3, floor=1) == 6.0
    assert steps.stall_after(None, factor=3, floor=1) == steps.STALL_NO_STEP_TIME_S
    assert steps.stall_after(None, floor=3600) == 3600


def test_step_time_leaves_out_warm_up_and_prefers_the_lines_own_seconds():
    events = [(s, 9.0 if s < 5 else 2.0, None) for s in range(10)]
    assert steps.step_time(events, first_step=0) == pytest.approx(2.0)
    assert steps.step_time(events[:5], first_step=0) is None  # only warm-up steps: unknown
    assert steps.step_time(events[:5]) == pytest.approx(9.0)  # the first step unknown: nothing is warm-up


def test_step_time_from_line_times_counts_unnumbered_lines_as_one_step_each():
    assert steps.step_time([(0, None, 100.0), (4, None, 108.0), (5, None, 110.0)]) == pytest.approx(2.0)
    assert steps.step_time([(None, None, 100.0 + i) for i in range(5)]) == pytest.approx(1.0)
    assert steps.step_time([(3, None, 100.0)]) is None


def test_only_the_most_recent_thousand_steps_count():
    old = [(s, 10.0, None) for s in range(10, 510)]
    recent = [(s, 1.0, None) for s in range(510, 1510)]
    assert steps.step_time(old + recent, first_step=0) == pytest.approx(1.0)


def test_step_lines_and_their_seconds():
    rx = steps.compile_patterns()
    line = b"completed step: 120, seconds: 2.250, TFLOP/s/device: 400.1"
    m = rx[0].search(line)
    assert int(m.group(1)) == 120 and steps.seconds_on(line, m.end()) == 2.25
    assert rx[1].search(b"global_step=77").group(1) == b"77"
    assert steps.compile_patterns(r"epoch (\d+)")[0].search(b"epoch 3").group(1) == b"3"
