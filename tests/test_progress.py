"""What counts as progress for a run's supervisor (gpuops.onbox.run.progress), the escapes removed
before it reads a line (gpuops.onbox.triage.escapes), and the checkpoint directory's samples
(gpuops.onbox.run.savewatch). The corpus of shapes (tests/fixtures/progress/shapes.py, built from the
libraries' own format strings) replayed on a virtual clock: no process starts here."""

import os

import pytest

from gpuops.onbox.triage import escapes
from gpuops.onbox.run import progress, savewatch
from tests.fixtures.progress import shapes, simulate

LIMIT = 6.0


@pytest.mark.parametrize("name", sorted(shapes.HEALTHY))
def test_a_healthy_shape_is_never_stalled_under_a_six_second_limit(name):
    got = simulate.replay(name, LIMIT)
    assert got["stalled_at"] is None, got["phases"]
    assert progress.TRAINING in [p for _, p in got["phases"]]


@pytest.mark.parametrize("name", sorted(shapes.HANGS))
def test_a_hung_shape_is_stalled_within_the_limit_and_two_rounds(name):
    got = simulate.replay(name, LIMIT)
    assert got["stalled_at"] is not None, got["phases"]
    assert got["hang_at"] < got["stalled_at"] <= got["hang_at"] + LIMIT + 2 * simulate.ROUND_S


def test_a_checkpoint_save_longer_than_the_limit_is_a_phase_and_the_silence_after_it_a_stall():
    saved = simulate.replay("hf-checkpoint-save", LIMIT)
    assert [p for _, p in saved["phases"]] == [progress.TRAINING, progress.SAVING, progress.TRAINING]
    after = simulate.replay("silent-after-save", LIMIT)
    assert [p for _, p in after["phases"]] == [progress.TRAINING, progress.SAVING, progress.STALLED]


def test_without_the_checkpoint_directory_the_same_save_is_a_stall():
    writes, saves, _, end = simulate.timeline(shapes.shape("hf-checkpoint-save"))
    tracker = progress.Tracker(0.0, LIMIT, 300.0)
    data = b"".join(w for t, w in writes if t < saves[0][0])
    tracker.read(data[:data.rfind(b"\r") + 1], saves[0][0])
    assert tracker.check(saves[0][0] + LIMIT + 1) == (progress.STALLED, True)


def _judge(chunks, user=None):
    judge = progress.Judge(user)
    return [judge.feed(c, t) for t, c in enumerate(chunks)], judge


def test_a_bar_redrawn_with_the_same_count_is_not_progress():
    draw = shapes.tqdm_draw(12, 100, 3.0)
    moved, judge = _judge([shapes.tqdm_draw(11, 100, 2.9), draw, shapes.tqdm_draw(12, 100, 4.0), draw + draw])
    assert moved == [False, True, False, False] and judge.max_step == 12


def test_a_warning_repeated_with_the_same_number_is_not_progress_and_a_first_line_is_not_either():
    moved, _ = _judge([b"Resuming from checkpoint at step 25\n", b"warning: iteration 1234 still waiting\n" * 3])
    assert moved == [False, False]


def test_colours_and_backspace_redraws_are_read_through():
    loguru = b"\x1b[32m2026-11-28\x1b[0m | \x1b[1mINFO    \x1b[0m | \x1b[36mm\x1b[0m - \x1b[1mstep %d loss 1\x1b[0m\n"
    moved, judge = _judge([loguru % 5, loguru % 6])
    assert moved == [False, True] and judge.max_step == 6
    keras = shapes.keras_progbar()
    draws = b"".join(a[1] for a in keras if a[0] == "out")
    assert b"\x08" in draws and progress.Judge().feed(draws, 0)


def test_a_later_stronger_form_takes_over_and_a_weaker_ones_noise_is_held_off():
    # plain step lines, then a bar: the bar is judged (the old rule locked the log to the first form)
    moved, judge = _judge([b"step 25\nstep 26\n", shapes.tqdm_draw(27, 100, 1.0), shapes.tqdm_draw(28, 100, 1.2)])
    assert moved == [True, False, True] and judge.max_step == 28
    # once MaxText's steps move, a rising `iteration N` of a busy-wait warning is noise
    noise = b"(raylet) rccl busy wait, iteration %d\n"
    moved, _ = _judge([b"completed step: 1, seconds: 1\ncompleted step: 2, seconds: 1\n", noise % 1, noise % 2])
    assert moved == [True, False, False]


def test_a_bar_that_ran_to_its_total_holds_nothing():
    moved, _ = _judge([shapes.tqdm_draw(9, 10, 1.0), shapes.tqdm_draw(10, 10, 1.1), b"step 1\n", b"step 2\n"])
    assert moved == [False, True, False, True]


def test_a_validation_bar_counts_apart_from_the_training_bar_it_interrupts():
    train = shapes.tqdm_draw(40, 60, 10.0)
    moved, judge = _judge([shapes.tqdm_draw(39, 60, 9.8), train, shapes.tqdm_draw(1, 8, 0.5),
                           shapes.tqdm_draw(2, 8, 1.0), train, shapes.tqdm_draw(41, 60, 10.2)])
    assert moved == [False, True, False, True, False, True]
    assert judge.max_step == 41  # the bare evaluation bar's count is no step number of training


@pytest.mark.parametrize("line", [
    b" %d/100 [=>............................] - ETA: 1s - loss: 0.1\r",  # Keras 2's Progbar
    b'{"train/global_step": %d, "loss": 0.5}\n',
    b"[Rank 0] step=%d, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]\n",
    b" [2026-11-28 12:00:00] iteration %8d/     300 | consumed samples: 2560 |\n",
    "Working... ━━━━━━━━━━╺━━━━━━━━━ %3d%% 0:00:03\r".encode("utf-8"),
    b"%dit [00:05, 24.60it/s]\r",
])
def test_each_shape_moves_with_its_count_and_only_with_it(line):
    moved, _ = _judge([line % 5, line % 6, line % 6])
    assert moved == [False, True, False]


def test_a_user_pattern_without_a_number_counts_every_match():
    moved, _ = _judge([b"heartbeat ok\n", b"heartbeat ok\n"], user=r"heartbeat ok")
    assert moved == [True, True]


def test_the_series_remembered_are_bounded():
    judge = progress.Judge()
    judge.feed(b"".join(shapes.tqdm_draw(1, total, 1.0) for total in range(2, 2 + 3 * progress.SERIES_MAX)), 0)
    assert len(judge.counts) == progress.SERIES_MAX


@pytest.mark.parametrize("raw, plain", [
    (b"\x1b[1m 5/30\x1b[0m \x1b[32m\xe2\x94\x81\x1b[0m", b" 5/30 \xe2\x94\x81"),
    (b"\r\x1b[2K\x1b[1A\x1b[2Kdone", b"\rdone"),
    (b"\x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\ \x1b(B\x07ok", b"link ok"),
    (b"ab\x08\x08cd", b"ab\r\rcd"),
])
def test_escapes_are_removed_and_line_controls_kept(raw, plain):
    assert escapes.plain(raw) == plain


def test_the_phase_before_the_first_move_waits_the_startup_limit():
    assert progress.phase(100.0, 0.0, None, 6.0, 300.0) == (progress.STARTING, False)
    assert progress.phase(301.0, 0.0, None, 6.0, 300.0) == (progress.STALLED, True)
    assert progress.phase(301.0, 0.0, 296.0, 6.0, 300.0) == (progress.TRAINING, False)
    assert progress.phase(400.0, 0.0, 296.0, None, 300.0) == (progress.TRAINING, False)  # no limit: never stalled
    assert progress.phase(310.0, 0.0, 296.0, 6.0, 300.0, saving_at=305.0) == (progress.SAVING, False)
    assert progress.phase(310.0, 0.0, 296.0, 6.0, 300.0, saving_at=290.0) == (progress.STALLED, True)  # before the move


def test_a_checkpoint_directory_growing_is_seen_between_two_samples(tmp_path):
    watch = savewatch.Watch(str(tmp_path / "ckpt"))
    assert watch.sample(0.0) is None  # not made yet
    (tmp_path / "ckpt").mkdir()
    old = tmp_path / "ckpt" / "checkpoint-5"
    old.mkdir()
    (old / "model.safetensors").write_bytes(b"x")
    assert watch.sample(0.5) is None and watch.sample(1.5) == 1.5  # made: a change; 0.5 is too soon to look
    assert watch.sample(3.0) == 1.5  # nothing changed since
    new = tmp_path / "ckpt" / "checkpoint-10"
    new.mkdir()
    (new / "model.safetensors").write_bytes(b"y" * 10)
    assert watch.sample(4.0) == 4.0
    with open(new / "model.safetensors", "ab") as f:  # a file growing in the newest directory
        f.write(b"z" * 10)
    os.utime(new / "model.safetensors", ns=(0, 0))  # an mtime that says nothing: the size still does
    assert watch.sample(5.0) == 5.0
