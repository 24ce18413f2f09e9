"""A run's events file and its --notify command (gpuops.onbox.run.runevents): real shell commands,
real process groups."""

import json
import os
import shutil
import time

import pytest

from gpuops.onbox.run import runevents


def _appender(path):
    """The issue's proof: a notify script that appends its stdin to a file."""
    return "cat >> '%s'" % path


def test_notify_hears_every_event_in_order_and_the_record_has_them_too(tmp_path):
    heard = tmp_path / "heard.jsonl"
    events = runevents.Events(str(tmp_path), run="20260101-000000-abcdef")
    notifier = runevents.Notifier(events, _appender(heard))
    kinds = ["attempt-failed", "retrying", "resumed", "stalled", "retrying", "disk-low", "completed"]
    for n, kind in enumerate(kinds):
        notifier.publish(kind, attempt=n // 2 + 1, job="job-%d" % n, checkpoint="/ckpt/step-%d" % n)
    got = [json.loads(line) for line in heard.read_text().splitlines()]
    assert [e["kind"] for e in got] == kinds and [e["seq"] for e in got] == list(range(1, 8))
    assert got[2]["checkpoint"] == "/ckpt/step-2" and got[0]["run"] == "20260101-000000-abcdef"
    assert runevents.read(str(tmp_path)) == got


def test_routine_events_are_recorded_but_do_not_wake_anyone(tmp_path):
    heard = tmp_path / "heard.jsonl"
    notifier = runevents.Notifier(runevents.Events(str(tmp_path)), _appender(heard))
    notifier.publish("attempt-started", attempt=1)
    notifier.publish("checkpoint-skipped", name="step-9\n.pt", why="a control character in its name")
    notifier.publish("gave-up", attempt=1)
    assert [json.loads(line)["kind"] for line in heard.read_text().splitlines()] == ["gave-up"]
    assert [e["kind"] for e in runevents.read(str(tmp_path))] == ["attempt-started", "checkpoint-skipped", "gave-up"]


def test_the_event_reaches_the_command_on_stdin_never_in_argv_or_env(tmp_path):
    """`ps` shows every user of the box the argv of every process: an event (paths, reasons) must
    not be there, nor in the environment a child could dump."""
    marker = "ckpt-marker-4f9e"
    script = ("cat > '{d}/stdin'; tr '\\0' ' ' < /proc/$$/cmdline > '{d}/argv'; env > '{d}/env'"
              .format(d=tmp_path))
    event = runevents.make("resumed", 1, checkpoint="/data/" + marker)
    assert runevents.notify(script, event) is None
    assert marker in (tmp_path / "stdin").read_text()
    assert marker not in (tmp_path / "argv").read_text() and marker not in (tmp_path / "env").read_text()


def test_a_hanging_notify_command_is_killed_with_its_group_at_the_bound(tmp_path, real_processes):
    """The bug this prevents: `curl` to an unreachable host hangs for minutes while the run it
    reports on waits (or a stall kill waits) behind it."""
    pidfile = tmp_path / "bg.pid"
    started = time.time()
    failed = runevents.notify("sleep 300 & echo $! > '%s'; sleep 300" % pidfile, runevents.make("stalled", 5),
                              timeout_s=1.0)
    took = time.time() - started
    assert took < 1.0 + runevents.KILL_WAIT_S + 1.0
    assert failed["why"] == "the notify command ran past 1s and was killed" and failed["for_seq"] == 5
    bg = int(pidfile.read_text())
    deadline = time.time() + 5
    while time.time() < deadline and os.path.exists("/proc/%d" % bg):
        time.sleep(0.05)
    assert not os.path.exists("/proc/%d" % bg), "the command's background child outlived the bound"


def test_nothing_a_successful_command_left_behind_outlives_it(tmp_path, real_processes):
    pidfile = tmp_path / "bg.pid"
    assert runevents.notify("sleep 300 & echo $! > '%s'" % pidfile, runevents.make("completed", 1)) is None
    bg = int(pidfile.read_text())
    deadline = time.time() + 5
    while time.time() < deadline and os.path.exists("/proc/%d" % bg):
        time.sleep(0.05)
    assert not os.path.exists("/proc/%d" % bg)


def test_a_failing_notify_command_is_an_event_and_is_not_itself_notified(tmp_path):
    heard = tmp_path / "heard"
    events = runevents.Events(str(tmp_path))
    notifier = runevents.Notifier(events, "cat >> '%s'; echo 'no route to host' >&2; exit 7" % heard)
    notifier.publish("attempt-failed", attempt=1, why="SIGKILL")
    notifier.publish("gave-up", attempt=1)
    recorded = runevents.read(str(tmp_path))
    assert [e["kind"] for e in recorded] == ["attempt-failed", "notify-failed", "gave-up", "notify-failed"]
    failed = recorded[1]
    assert (failed["for_seq"], failed["for_kind"], failed["exit_code"]) == (1, "attempt-failed", 7)
    assert failed["output"] == "no route to host" and failed["why"] == "the notify command exited 7"
    assert len(heard.read_text().splitlines()) == 2, "a notify-failed event is recorded, not notified (no loop)"


def test_a_notify_command_that_cannot_start_is_reported(tmp_path):
    failed = runevents.notify("true", runevents.make("completed", 1), cwd=str(tmp_path / "missing"))
    assert failed["why"].startswith("the notify command could not start")


def test_a_chatty_notify_command_keeps_only_the_tail_of_its_output(tmp_path):
    failed = runevents.notify("yes | head -c 5000000; echo LAST; exit 1", runevents.make("completed", 1))
    assert failed["exit_code"] == 1 and len(failed["output"]) <= runevents.OUTPUT_MAX
    assert failed["output"].endswith("LAST")


def test_a_command_that_never_reads_its_stdin_does_not_block_the_supervisor():
    big = runevents.make("stalled", 1, evidence=["x" * 1500] * 40)
    started = time.time()
    assert runevents.notify("exit 0", big) is None and time.time() - started < 2


def test_a_command_killed_by_a_signal_says_so():
    failed = runevents.notify("kill -9 $$", runevents.make("completed", 1))
    assert failed["exit_code"] == -9 and failed["why"] == "the notify command was killed by signal 9"


def test_an_unknown_event_kind_is_refused():
    with pytest.raises(ValueError):
        runevents.make("exploded", 1)


def test_box_strings_in_an_event_are_bounded():
    event = runevents.make("checkpoint-skipped", 1, name="n" * 10000, nested={"a": [list(range(100))] * 100},
                           raw=b"\xff\x00ok")
    assert len(event["name"]) <= runevents.TEXT_MAX + 3 and len(event["nested"]["a"]) == 50
    assert event["raw"] == "\ufffd\x00ok"
    huge = runevents.make("stalled", 2, **{"k%d" % i: "v" * 1900 for i in range(20)})
    assert len(json.dumps(huge)) <= runevents.EVENT_MAX and huge["kind"] == "stalled" and huge["truncated"]


def test_a_restarted_supervisor_goes_on_counting(tmp_path):
    first = runevents.Events(str(tmp_path), run="r")
    for _ in range(3):
        first.emit("retrying")
    again = runevents.Events(str(tmp_path), run="r")
    assert again.emit("completed")["seq"] == 4
    assert [e["seq"] for e in runevents.read(str(tmp_path), after_seq=2)] == [3, 4]
    assert runevents.last(str(tmp_path))["kind"] == "completed"


def test_a_disk_that_refuses_the_event_does_not_stop_its_notification(tmp_path):
    heard = tmp_path / "heard"
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    events = runevents.Events(str(job_dir))
    shutil.rmtree(job_dir)
    event = runevents.Notifier(events, _appender(heard)).publish("disk-low", free_bytes=0)
    assert "No such file" in event["unrecorded"] and events.error
    assert json.loads(heard.read_text())["kind"] == "disk-low"


def test_the_events_file_stays_bounded_and_shows_what_it_dropped(tmp_path):
    events = runevents.Events(str(tmp_path), max_bytes=8192, max_rows=40)
    for n in range(500):
        events.emit("disk-low", free_bytes=n)
    kept = runevents.read(str(tmp_path))
    assert os.path.getsize(tmp_path / runevents.FILE) <= 8192 and len(kept) <= 40
    assert kept[-1]["seq"] == 500 and kept[0]["seq"] > 1, "a follower sees the gap in seq"


def test_events_a_disk_refused_are_written_in_order_once_it_takes_them(tmp_path):
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    events = runevents.Events(str(job_dir))
    events.emit("attempt-started")
    shutil.rmtree(job_dir)  # the write fails as on a full disk: the file cannot be opened
    refused = [events.emit("attempt-failed"), events.emit("retrying")]
    assert all(e.get("unrecorded") for e in refused) and len(events.pending) == 2
    job_dir.mkdir()
    events.emit("completed")
    assert [(e["seq"], e["kind"]) for e in runevents.read(str(job_dir))] == [
        (2, "attempt-failed"), (3, "retrying"), (4, "completed")]
    assert events.pending == [] and events.error is None
