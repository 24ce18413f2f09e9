"""State derivation is pure: facts in, one state out. Every state and its edges, no box needed."""

import pytest

from gpuops.jobs import states, statusrow

NOW = 1_000_000.0


def facts(**kw):
    meta = {"job_id": "j1", "name": "n", "pid": 42, "start_ticks": 7, "boot_id": "b", "launched_at": NOW - 100}
    meta.update(kw.pop("meta", {}))
    base = {"job_id": "j1", "now": NOW, "meta": meta, "liveness": "alive", "exit": None, "wrapper_alive": True,
            "pid_reused": False, "log_size": 100, "log_mtime": NOW - 1, "progress": {"events": []}}
    base.update(kw)
    return base


def ev(step, at=None, seconds=None, end=50):
    return {"step": step, "at": at, "seconds": seconds, "end": end, "text": f"completed step: {step}"}


@pytest.mark.parametrize("exit_rec,expect", [
    ({"exit_code": 0, "signal": None, "ended_at": NOW}, ("COMPLETED", 0, None)),  # it was null beside a 0
    ({"exit_code": 3, "signal": None, "ended_at": NOW}, ("FAILED", 3, None)),
    ({"exit_code": None, "signal": "SIGKILL", "ended_at": NOW}, ("KILLED", None, "SIGKILL")),
    ({"exit_code": None, "signal": "SIGHUP", "ended_at": NOW}, ("KILLED", None, "SIGHUP")),
])
def test_exit_record_decides_terminal_state(exit_rec, expect):
    row = statusrow.derive(facts(exit=exit_rec, liveness="gone"))
    assert (row["state"], row["exit_code"], row["signal"]) == expect
    assert row["duration_s"] == pytest.approx(100)


def test_exit_record_wins_over_a_stale_liveness_reading():
    row = statusrow.derive(facts(exit={"exit_code": 0, "signal": None, "ended_at": NOW}, liveness="alive"))
    assert row["state"] == "COMPLETED"


def test_shell_style_signal_codes_get_a_hint():
    row = statusrow.derive(facts(exit={"exit_code": 137, "signal": None, "ended_at": NOW}, liveness="gone"))
    assert row["state"] == "FAILED" and row["exit_code"] == 137
    assert "SIGKILL" in row["hint"] and "OOM" in row["hint"]
    assert statusrow.code_hint(1) is None and statusrow.code_hint(255) is None


def test_rebooted_box_means_vanished_even_if_the_pid_exists():
    row = statusrow.derive(facts(liveness="rebooted"))
    assert row["state"] == "VANISHED" and "boot_id" in row["reason"]


def test_pid_reuse_is_vanished_not_running():
    row = statusrow.derive(facts(liveness="gone", pid_reused=True))
    assert row["state"] == "VANISHED" and "reused" in row["reason"]


def test_gone_without_exit_record_is_vanished_with_a_reason():
    assert "supervisor" in statusrow.derive(facts(liveness="gone", wrapper_alive=False))["reason"]
    assert "gpuops stop" in statusrow.derive(facts(liveness="gone", stop={"signals": []}))["reason"]


def test_missing_meta_is_starting_then_vanished():
    assert statusrow.derive({"job_id": "j", "meta": None, "dir_age_s": 1.0, "now": NOW})["state"] == "STARTING"
    old = statusrow.derive({"job_id": "j", "meta": None, "dir_age_s": 3600.0, "now": NOW})
    assert old["state"] == "VANISHED" and "meta.json" in old["reason"]


def test_running_with_fresh_progress():
    events = [ev(10, at=NOW - 12, seconds=2.0), ev(11, at=NOW - 10, seconds=2.0)]
    row = statusrow.derive(facts(progress={"events": events}), stall_factor=10, stall_min_s=5)
    assert row["state"] == "RUNNING"
    assert row["progress"]["last"]["step"] == 11 and row["progress"]["step_time_s"] == 2.0


def test_stalled_when_silent_longer_than_factor_times_step_time():
    events = [ev(10, at=NOW - 32, seconds=2.0), ev(11, at=NOW - 30, seconds=2.0)]
    row = statusrow.derive(facts(progress={"events": events}), stall_factor=10, stall_min_s=5)
    assert row["state"] == "STALLED" and "30s" in row["reason"]
    # the floor keeps a checkpoint pause from reading as a stall
    assert statusrow.derive(facts(progress={"events": events}), stall_factor=10, stall_min_s=60)["state"] == "RUNNING"


def test_step_time_from_line_times_when_lines_carry_no_seconds():
    events = [ev(0, at=NOW - 40), ev(4, at=NOW - 32), ev(5, at=NOW - 30)]
    assert statusrow.step_time(events) == pytest.approx(2.0)
    row = statusrow.derive(facts(progress={"events": events}), stall_factor=5, stall_min_s=1)
    assert row["state"] == "STALLED"


def test_lines_without_step_numbers_count_one_step_each():
    events = [{"step": None, "at": NOW - 30 + i, "seconds": None, "end": i, "text": "tick"} for i in range(5)]
    assert statusrow.step_time(events) == pytest.approx(1.0)


def test_without_a_step_time_the_bar_is_half_an_hour_as_in_triage():
    """status once never called such a job stalled while triage called it hanging after 30 min."""
    quiet = statusrow.derive(facts(progress={"events": [ev(3, at=NOW - 1700)]}), stall_factor=1, stall_min_s=0)
    assert quiet["state"] == "RUNNING" and quiet["progress"]["stall_after_s"] == 1800
    row = statusrow.derive(facts(progress={"events": [ev(3, at=NOW - 9999)]}), stall_factor=1, stall_min_s=0)
    assert row["state"] == "STALLED" and "step time unknown" in row["reason"]


def test_last_line_without_growth_sample_uses_log_mtime():
    events = [ev(1, seconds=1.0, end=99), ev(2, seconds=1.0, end=100)]
    row = statusrow.derive(facts(progress={"events": events}, log_size=100, log_mtime=NOW - 50), stall_factor=2,
                       stall_min_s=1)
    assert row["state"] == "STALLED" and row["progress"]["silent_s"] == pytest.approx(50)


def test_dead_supervisor_of_a_live_job_is_flagged():
    row = statusrow.derive(facts(wrapper_alive=False))
    assert row["state"] == "RUNNING" and "supervisor" in row["hint"]


def test_survivors_still_alive_are_reported():
    row = statusrow.derive(facts(exit={"exit_code": 0, "signal": None, "ended_at": NOW}, survivors_alive=[5, 6]))
    assert row["survivors"] == [5, 6] and "gpuops stop" in row["hint"]


def test_unreachable_is_not_dead():
    row = statusrow.unreachable("j1", "no route", last_seen={"state": "RUNNING", "seen_at": NOW})
    assert row["state"] == "UNREACHABLE" and row["state"] not in states.TERMINAL
    assert row["last_seen"]["state"] == "RUNNING"


def test_last_seen_state_is_kept_per_host_and_job(monkeypatch, tmp_path):
    from gpuops.jobs import lastseen

    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path))
    lastseen.remember("boxA", [{"job_id": "j1", "state": "RUNNING", "key": "k1"},
                               {"job_id": "j2", "state": "UNREACHABLE"}])
    lastseen.remember("boxB", [{"job_id": "j1", "state": "FAILED", "exit_code": 2}])
    assert lastseen.recall("boxA", "j1")["state"] == "RUNNING"
    assert lastseen.recall("boxA", "k1")["job_id"] == "j1"
    assert lastseen.recall("boxA", "j2") is None, "UNREACHABLE is not a job state worth remembering"
    assert lastseen.recall("boxB", "j1")["exit_code"] == 2
    assert (tmp_path / "jobs-last-seen.json").stat().st_mode & 0o077 == 0


def test_a_job_whose_supervisor_was_lost_at_launch_says_so_when_it_vanishes():
    lost = "the job's gpuops supervisor ended before it recorded the start (a job that kills its parent kills it)"
    row = statusrow.derive(facts(liveness="gone", wrapper_alive=None, meta={"supervisor_lost": lost, "wrapper_pid": None}))
    assert row["state"] == "VANISHED" and row["reason"].startswith(lost)


def test_a_run_saving_a_checkpoint_is_not_stalled_and_a_training_one_still_is():
    """Its supervisor sees the checkpoint directory change (gpuops.onbox.progress): the save is a
    phase, however long; the status rule's silence alone does not make it STALLED."""
    events = [ev(10, at=NOW - 32, seconds=2.0), ev(11, at=NOW - 30, seconds=2.0)]
    run = {"id": "j1", "attempt": 1, "max_attempts": 2, "phase": "running", "ended": False}
    saving = dict(run, activity={"phase": "saving checkpoint", "since": NOW - 25, "step": 11})
    row = statusrow.derive(facts(progress={"events": events}, run=saving), stall_factor=10, stall_min_s=5)
    assert row["state"] == "RUNNING" and "checkpoint is being written" in row["reason"]
    assert row["run"]["activity"]["phase"] == "saving checkpoint"
    training = dict(run, activity={"phase": "training", "since": NOW - 300, "step": 11})
    assert statusrow.derive(facts(progress={"events": events}, run=training), stall_factor=10,
                        stall_min_s=5)["state"] == "STALLED"


def test_a_run_policy_s_stall_after_is_the_threshold_status_shows_and_judges_by():
    """job_launch echoed stall_after_s 1800 (the no-step-time bar) for a run whose policy said 20:
    the supervisor stops the attempt after 20 s of silence, so that is when it is stalled."""
    policy = {"stall_after_s": 20.0, "max_retries": 1}
    quiet = state.derive(facts(meta={"policy": policy}, progress={"events": [ev(3, at=NOW - 15)]}), stall_factor=1,
                         stall_min_s=0)
    assert quiet["state"] == "RUNNING" and quiet["progress"]["stall_after_s"] == 20
    silent = state.derive(facts(meta={"policy": policy}, progress={"events": [ev(3, at=NOW - 25)]}))
    assert silent["state"] == "STALLED" and "stall_after" in silent["reason"] and "threshold 20s" in silent["reason"]
    unset = state.derive(facts(meta={"policy": {"max_retries": 1}}, progress={"events": [ev(3, at=NOW - 25)]}))
    assert unset["state"] == "RUNNING" and unset["progress"]["stall_after_s"] == 1800
