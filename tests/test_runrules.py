"""The run supervisor's rules (gpuops.onbox.run.runrules), pure: no process, no clock, no disk."""

import pytest

from gpuops.onbox.triage import retrypolicy
from gpuops.onbox.run import runevents, runrules


@pytest.mark.parametrize("klass,kind", [(None, "completed"), ("cancelled", "stopped"), ("timeout", "timed-out"),
                                        ("hang", "gave-up"), ("python-exception", "gave-up")])
def test_a_runs_end_is_named_by_its_last_class(klass, kind):
    assert runrules.end_kind(klass) == kind and kind in runevents.KINDS


def test_the_deadline_is_on_the_clock_it_is_given():
    assert runrules.deadline(1000.0, 10) == 1010.0
    assert runrules.deadline(1000.0, None) is None and runrules.deadline(1000.0, 0) is None


def test_a_watch_round_does_the_first_thing_that_protects_the_run():
    every = dict(stop=True, peer_lost="node 1 lost", now=20.0, run_deadline=10.0, stalled=True, checkpoint_due=True)
    order = [("stop", False), ("peer_lost", None), ("run_deadline", None), ("stalled", False),
             ("checkpoint_due", False)]
    got = []
    facts = dict(every)
    for key, off in order:
        got.append(runrules.watch_action(**facts))
        facts[key] = off
    got.append(runrules.watch_action(**facts))
    assert got == [retrypolicy.STOP, retrypolicy.PEER_LOST, retrypolicy.MAX_RUNTIME, retrypolicy.STALL,
                   runrules.CHECKPOINTS, None]


def test_the_time_limit_is_reached_at_its_deadline_not_before():
    quiet = dict(stop=False, peer_lost=None, stalled=False, checkpoint_due=False)
    assert runrules.watch_action(now=9.999, run_deadline=10.0, **quiet) is None
    assert runrules.watch_action(now=10.0, run_deadline=10.0, **quiet) == retrypolicy.MAX_RUNTIME
    assert runrules.watch_action(now=1e9, run_deadline=None, **quiet) is None


def test_no_attempt_starts_after_a_stop_even_with_time_left():
    ended = runrules.handover(True, 5.0, 100.0)
    assert ended["class"] == "cancelled" and runrules.end_kind(ended["class"]) == "stopped"
    assert runrules.handover(True, 5.0, None)["class"] == "cancelled"


def test_a_hand_over_past_the_deadline_ends_the_run_as_timed_out():
    assert runrules.handover(False, 100.0, 100.0)["class"] == "timeout"
    assert runrules.handover(False, 99.0, 100.0) is None and runrules.handover(False, 1e9, None) is None


@pytest.mark.parametrize("best,streak,reached,progressed,want", [
    (None, 0, 40, True, {"went_on": True, "best": 40, "streak": 1, "progressed_to": 40}),      # the first attempt
    (40, 1, 90, True, {"went_on": True, "best": 90, "streak": 1, "progressed_to": 90}),        # past the best
    (90, 1, 60, True, {"went_on": False, "best": 90, "streak": 2, "progressed_to": None}),     # short of it
    (90, 2, 90, True, {"went_on": False, "best": 90, "streak": 3, "progressed_to": None}),     # the same step
    (None, 0, None, True, {"went_on": True, "best": None, "streak": 1, "progressed_to": True}),  # no numbers
    (None, 3, None, False, {"went_on": False, "best": None, "streak": 4, "progressed_to": None}),  # nothing
    (90, 1, None, True, {"went_on": True, "best": 90, "streak": 1, "progressed_to": True}),
])
def test_the_streak_restarts_only_after_an_attempt_that_went_past_the_best(best, streak, reached, progressed, want):
    assert runrules.progress_account(best, streak, reached, progressed) == want
