"""The progress policy (gpuops.onbox.triage.steps) that status, diagnose and triage share."""

import pytest

from gpuops.onbox.triage import steps

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


def _first(line, user=None):
    form = steps.pick(line, steps.compile_patterns(user))
    found = form.first(line)
    return form.name, found.step, found.total, found.seconds


@pytest.mark.parametrize("line, expected", [
    (b"completed step: 120, seconds: 2.250, TFLOP/s/device: 400.1", ("maxtext", 120, None, 2.25)),
    (b"global_step=77", ("step", 77, None, None)),
    (b"Step 100/1000 | loss 2.31", ("step", 100, 1000, None)),
    (b"STEP 4 loss 1.0", ("step-upper", 4, None, None)),
    (b"epoch 0 iter 10 loss 7.9", ("iter", 10, None, None)),
    # HF Trainer / Accelerate bars count steps done; the rate is the step time
    (b" 10%|# | 20/200 [00:02<00:18,  5.00it/s]", ("tqdm", 20, 200, 0.2)),
    (b" 10%|# | 20/200 [00:40<06:00,  2.00s/it]", ("tqdm", 20, 200, 2.0)),
    # Lightning's bar restarts every epoch: the step counts the epochs before it
    (b"Epoch 2: 45%|####5     | 450/1000 [01:23<01:40, 5.00it/s, v_num=1, loss=0.5]", ("tqdm", 2450, None, 0.2)),
    (b"{'loss': 1.23, 'grad_norm': 0.9, 'learning_rate': 2e-05, 'epoch': 0.5}", ("hf-log", None, None, None)),
])
def test_step_forms_and_their_seconds(line, expected):
    assert _first(line) == expected


@pytest.mark.parametrize("line", [
    b"Loading checkpoint shards: 100%|##########| 2/2 [00:05<00:00,  2.50s/it]",
    b"Validation DataLoader 0: 100%|##########| 50/50 [00:03<00:00, 15.1it/s]",
    b"PASSTHROUGH_ARGS=steps=100 enable_checkpointing=true",
])
def test_bars_of_other_work_and_step_counts_are_not_steps(line):
    assert steps.pick(line) is None


def test_a_log_is_judged_by_the_first_form_it_prints():
    log = b"completed step: 4, seconds: 1.5\n 10%|# | 20/200 [00:02<00:18]\n(raylet) busy wait, iteration 99\n"
    assert steps.pick(log).name == "maxtext"
    assert [s.step for s in steps.pick(log).scan(log)] == [4]


def test_a_user_pattern_comes_first():
    assert _first(b"epoch 3", r"epoch (\d+)") == ("user", 3, None, None)
