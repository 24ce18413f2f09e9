"""Whether a failed attempt is retried (gpuops.onbox.triage.retrypolicy): the decision from what the
supervisor saw and what triage read, in triage's class vocabulary."""

import pytest

from gpuops.onbox.triage import retrypolicy as rp
from gpuops.onbox.triage.signatures import CLASS_NAMES


def _decide(facts, attempt=1, max_retries=3, **kw):
    return rp.decide(facts, attempt, max_retries, rand=lambda: 0.5, **kw)


def test_every_class_the_policy_names_is_one_triage_knows():
    """One vocabulary: a --retry-on list, triage's report and the supervisor's decision must speak
    of the same classes, or a user's --retry-on names a class the supervisor never produces."""
    assert (rp.OWN | rp.TRANSIENT | rp.NEVER) <= set(CLASS_NAMES)


def test_a_rank_killed_with_sigkill_is_retried_though_the_log_reads_it_as_oom():
    """The issue's first proof: kill -9 one rank. torchrun reports `exitcode: -9`, which triage
    routes to oom-host; the box's OOM counter did not move, so it is a kill from outside."""
    d = _decide({"exit_code": 1, "triage_class": "oom-host", "oom_before": 0, "oom_after": 0, "job_pids": [10, 11]})
    assert d["retry"] is True and d["class"] == "unknown-death" and d["transient"] is True
    assert "counter did not move" in d["why"] and d["backoff_s"] == 10.0


def test_a_sigkill_with_the_oom_counter_risen_is_an_oom_and_not_retried():
    d = _decide({"exit_code": None, "signal": "SIGKILL", "oom_before": 2, "oom_after": 3})
    assert (d["retry"], d["class"]) == (False, "oom-host")
    assert "went from 2 to 3" in d["why"] and "not a failure retried by default" in d["why"]


def test_a_kernel_oom_line_counts_only_when_it_names_one_of_the_jobs_processes():
    ours = {"exit_code": 137, "kernel_readable": True, "kernel_oom": [{"pid": 11, "comm": "python3"}], "job_pids": [10, 11]}
    assert _decide(ours)["class"] == "oom-host"
    neighbour = dict(ours, kernel_oom=[{"pid": 999, "comm": "python3"}])
    d = _decide(neighbour)
    assert (d["class"], d["retry"]) == ("unknown-death", True) and "no kernel OOM line" in d["why"]


def test_a_sigkill_nobody_can_explain_is_retried_saying_so():
    d = _decide({"exit_code": 137})
    assert d["retry"] and d["class"] == "unknown-death" and "could be read" in d["why"]


def test_sigterm_from_outside_is_a_preemption_and_retried():
    for facts in ({"signal": "SIGTERM", "exit_code": None}, {"exit_code": 143}):
        d = _decide(facts)
        assert (d["retry"], d["class"]) == (True, "preempted")


def test_a_launcher_that_turned_an_outside_sigterm_into_exit_1_is_still_preempted():
    """torchrun catches the reclaim's SIGTERM, stops its workers and exits 1 after `got signal: 15`,
    which triage calls cancelled: gpuops did not stop it, so it is a preemption."""
    d = _decide({"exit_code": 1, "triage_class": "cancelled"})
    assert (d["retry"], d["class"]) == (True, "preempted")
    assert _decide({"exit_code": 1, "triage_class": "cancelled", "ended_by": "stop"})["retry"] is False


def test_a_reclaim_the_supervisor_itself_received_is_a_preemption_whatever_the_log_says():
    """torchrun turns SIGTERM into a SignalException traceback and exit 1, which triage may read as
    python-exception; the supervisor got the same SIGTERM (a reclaim signals every process)."""
    d = _decide({"exit_code": 1, "triage_class": "python-exception", "outside_signal": "SIGTERM"})
    assert (d["retry"], d["class"]) == (True, "preempted")


def test_gpuops_stop_ends_the_run_whatever_retry_on_says():
    d = _decide({"ended_by": "stop", "signal": "SIGTERM"}, retry_on=rp.TRANSIENT | {"cancelled"})
    assert (d["retry"], d["class"]) == (False, "cancelled") and "never retried" in d["why"]


def test_max_runtime_is_a_timeout_never_retried():
    d = _decide({"ended_by": "max-runtime", "signal": "SIGKILL"})
    assert (d["retry"], d["class"]) == (False, "timeout")


def test_a_stall_gpuops_killed_is_a_hang_and_retried():
    d = _decide({"ended_by": "stall", "exit_code": 143})
    assert (d["retry"], d["class"]) == (True, "hang")


def test_a_lost_peer_retries_the_survivor_as_node_fail():
    assert _decide({"ended_by": "peer-lost", "exit_code": 143})["class"] == "node-fail"


def test_a_python_exception_is_not_retried():
    d = _decide({"exit_code": 1, "triage_class": "python-exception"})
    assert (d["retry"], d["class"], d["transient"]) == (False, "python-exception", False)


@pytest.mark.parametrize("klass", ["oom-gpu", "model-not-found", "python-exception", "checkpoint-load-fail",
                                   "cuda-error", "nan-divergence"])
def test_failures_that_would_fail_again_are_not_retried_by_default(klass):
    assert _decide({"exit_code": 1, "triage_class": klass})["retry"] is False


@pytest.mark.parametrize("klass", ["nccl-timeout", "heartbeat-timeout", "tpu-worker-lost"])
def test_collective_and_peer_timeouts_are_retried(klass):
    assert _decide({"exit_code": 1, "triage_class": klass})["retry"] is True


def test_a_fatal_xid_after_launch_is_a_gpu_fault_and_retried():
    d = _decide({"exit_code": 1, "triage_class": "python-exception", "xids": [{"code": 79, "kind": "fatal"}]})
    assert (d["retry"], d["class"]) == (True, "gpu-fault") and "Xid 79" in d["why"]


def test_an_application_xid_is_the_programs_fault():
    d = _decide({"exit_code": 1, "xids": [{"code": 31, "kind": "application"}, {"code": 45, "kind": "other"}]})
    assert (d["retry"], d["class"]) == (False, "cuda-error")


def test_a_vanished_process_is_retried():
    assert _decide({"exit_code": None, "vanished": True})["class"] == "unknown-death"


def test_a_crash_signal_and_a_plain_exit_are_not_retried():
    assert _decide({"exit_code": 139})["class"] == "signal-kill"
    assert _decide({"exit_code": 2})["class"] == "subprocess-fail"


def test_a_clean_exit_is_no_failure():
    d = _decide({"exit_code": 0, "signal": None})
    assert (d["retry"], d["class"]) == (False, None) and d["why"] == "completed: it exited 0"


def test_retry_on_replaces_the_default_set():
    on = rp.parse_retry_on("python-exception", known=CLASS_NAMES)
    assert _decide({"exit_code": 1, "triage_class": "python-exception"}, retry_on=on)["retry"] is True
    d = _decide({"exit_code": 143}, retry_on=on)
    assert d["retry"] is False and "by --retry-on" in d["why"]
    assert rp.parse_retry_on("default, oom-gpu") == rp.TRANSIENT | {"oom-gpu"}


@pytest.mark.parametrize("text,message", [
    ("", "names failure classes"),
    ("oom", "'oom' is not a failure class"),
    ("Python Exception", "is not a failure class"),
    ("timeout", "never retried"),
    ("cancelled", "never retried"),
])
def test_a_retry_on_that_cannot_work_is_refused_before_anything_starts(text, message):
    with pytest.raises(ValueError) as e:
        rp.parse_retry_on(text, known=CLASS_NAMES)
    assert message in str(e.value)


def test_retries_run_out():
    assert _decide({"exit_code": 143}, attempt=3, max_retries=3)["retry"] is True
    d = _decide({"exit_code": 143}, attempt=4, max_retries=3)
    assert d["retry"] is False and d["attempts_left"] == 0 and "no retries left of 3" in d["why"]
    assert _decide({"exit_code": 143}, attempt=1, max_retries=0)["retry"] is False


def test_no_retry_when_the_max_runtime_leaves_no_time_for_one():
    d = _decide({"exit_code": 143}, elapsed_s=3595, max_runtime_s=3600)
    assert d["retry"] is False and "--max-runtime leaves no time" in d["why"]
    assert _decide({"exit_code": 143}, elapsed_s=100, max_runtime_s=3600)["retry"] is True


def test_backoff_grows_is_capped_and_spread():
    assert rp.schedule(7) == [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0]
    assert rp.backoff_s(1, rand=lambda: 0.0) == 9.0 and rp.backoff_s(1, rand=lambda: 1.0) == 11.0
    assert _decide({"exit_code": 143}, attempt=3)["backoff_s"] == 40.0


def test_an_attempt_that_made_progress_resets_the_backoff():
    """Three preemptions hours apart must not wait 40 s on the third: only a crash loop slows down."""
    assert _decide({"exit_code": 143}, attempt=3, streak=1)["backoff_s"] == 10.0
    assert _decide({"exit_code": 143}, attempt=3, streak=3)["backoff_s"] == 40.0


@pytest.mark.parametrize("value", [-1, 101, 1.5, "3", True, None])
def test_max_retries_above_a_sane_cap_is_refused(value):
    with pytest.raises(ValueError):
        rp.check_max_retries(value)


@pytest.mark.parametrize("facts,sig", [
    ({"exit_code": 137}, "SIGKILL"), ({"exit_code": 134}, "SIGABRT"), ({"exit_code": -15}, "SIGTERM"),
    ({"signal": "SIGBUS", "exit_code": None}, "SIGBUS"), ({"exit_code": 1}, None), ({"exit_code": 255}, None),
])
def test_the_signal_an_exit_code_stands_for(facts, sig):
    assert rp.ending_signal(facts) == sig


def test_a_retry_after_progress_says_the_backoff_it_waits():
    """The kill of a rank at step 27 said 'retrying in 9.887s ...; so the next attempt starts at
    once' (the first backoff, then the cap appended): the sentence names the wait it keeps."""
    d = _decide({"exit_code": 143}, streak=1, progressed_to=27)
    assert d["backoff_s"] == rp.AFTER_PROGRESS_S
    assert "it made progress (to step 27), so retrying in 1s," in d["why"] and "10s" not in d["why"]
    assert "it made progress, so retrying in 1s" in _decide({"exit_code": 143}, streak=1, progressed_to=True)["why"]
    assert _decide({"exit_code": 143}, streak=1)["backoff_s"] == 10.0
