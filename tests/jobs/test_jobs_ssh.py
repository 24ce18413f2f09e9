"""Detached jobs against a real sshd: survival, exit records, liveness, logs, stop, retry, queue."""

import os
import signal
import subprocess
import threading
import time

import pytest

from gpuops.ops import joblogs, jobs as op
from gpuops.remote.targets import target_for
from tests.jobs.helpers import meta_of, wait_for


def job_state(box, jobs_dir, job, **kw):
    doc = op.status(box, job=job, jobs_dir=str(jobs_dir), **kw)
    return doc["data"]["jobs"][0]


def launched(box, jobs_dir, command, **kw):
    doc = op.launch(box, command=command, jobs_dir=str(jobs_dir), **kw)
    assert doc["data"]["meta"].get("pid"), doc["summary"]  # started (a quick one may have ended already)
    return doc["data"]["job"]["job_id"]


def ended(box, jobs_dir, job, timeout=10):
    return wait_for(lambda: (r := job_state(box, jobs_dir, job))["state"] not in ("RUNNING", "STARTING") and r,
                    timeout=timeout)


def test_job_survives_the_ssh_connection_being_cut(box, jobs_box, jobs_dir):
    go = jobs_dir.parent / "go"
    job = launched(box, jobs_dir, f"echo started; while [ ! -e {go} ]; do sleep 0.05; done; echo finished")
    meta = meta_of(jobs_dir, job)
    # launch returned only after the start record existed, with a live pid in its own session
    assert os.getsid(meta["pid"]) == meta["pid"] == meta["pgid"]
    assert os.getsid(meta["wrapper_pid"]) != os.getsid(0)
    # A second call leaves a live connection behind (paramiko's, or the OpenSSH control master).
    assert job_state(box, jobs_dir, job)["state"] == "RUNNING"
    cut = jobs_box.kill_session_children()
    assert cut, "there was a live SSH connection to cut"
    box.close()
    assert job_state(box, jobs_dir, job)["state"] == "RUNNING"
    go.touch()
    row = ended(box, jobs_dir, job)
    assert row["state"] == "COMPLETED"
    assert (jobs_dir / job / "log").read_text() == "started\nfinished\n"


def test_nonzero_exit_is_failed_with_its_code(box, jobs_dir):
    job = launched(box, jobs_dir, "echo about to fail; exit 3")
    row = ended(box, jobs_dir, job)
    assert (row["state"], row["exit_code"]) == ("FAILED", 3)
    doc = op.status(box, job=job, jobs_dir=str(jobs_dir))
    assert doc["ok"] is False and "FAILED (exit 3)" in doc["summary"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_killed_by_signal_records_the_signal_name(box, jobs_dir, sig):
    job = launched(box, jobs_dir, "sleep 30")
    os.kill(meta_of(jobs_dir, job)["pid"], sig)
    row = ended(box, jobs_dir, job)
    assert (row["state"], row["signal"], row["exit_code"]) == ("KILLED", sig.name, None)


def test_idempotency_key_returns_the_existing_job(box, jobs_dir):
    first = op.launch(box, command="sleep 5", key="train-42", jobs_dir=str(jobs_dir))
    second = op.launch(box, command="sleep 5", key="train-42", jobs_dir=str(jobs_dir))
    assert second["data"]["existing"] is True and first["data"]["existing"] is False
    assert second["data"]["job"]["job_id"] == first["data"]["job"]["job_id"]
    assert len(list(jobs_dir.glob("*/meta.json"))) == 1
    assert job_state(box, jobs_dir, "train-42")["job_id"] == first["data"]["job"]["job_id"]


def test_follow_resumes_after_a_cut_without_losing_or_repeating_bytes(box, jobs_box, jobs_dir):
    # long enough to outlast the launch's one-second look and a slow connect: the cut lands mid-stream
    job = launched(box, jobs_dir, "for i in $(seq 1 120); do echo \"line $i ünï\"; sleep 0.05; done")
    got, notices = bytearray(), []
    result = {}

    def follow():
        t = target_for(jobs_box.spec)
        try:
            result["doc"] = joblogs.logs(t, job=job, follow=True, from_offset=0, jobs_dir=str(jobs_dir),
                                    sink=got.extend, reconnect_s=20, notice=notices.append)
        finally:
            t.close()

    th = threading.Thread(target=follow)
    th.start()
    assert wait_for(lambda: b"line 5 " in got, timeout=10)
    jobs_box.kill_session_children()
    th.join(timeout=30)
    doc = result["doc"]
    assert notices and doc["data"]["reconnects"] >= 1
    log = (jobs_dir / job / "log").read_bytes()
    assert bytes(got) == log and log.count(b"\n") == 120
    assert doc["data"]["next_offset"] == len(log)
    assert doc["data"]["state"] == "COMPLETED" and doc["ok"]


def _alive(pid):
    from gpuops.onbox.host import procs

    return procs.alive(pid)


def test_stop_kills_the_group_escaped_children_and_gpu_holders(box, jobs_box, boot_root, jobs_dir):
    # a child in the group, a grandchild that left the group with setsid and holds the (fake) GPU
    # device open while ignoring SIGTERM, and the leader itself
    cmd = ("sleep 300 & "
           f"setsid sh -c 'trap \"\" TERM; exec 3<{boot_root}/dev/nvidia0; while :; do sleep 0.1; done' & "
           "sleep 301")
    job = launched(box, jobs_dir, cmd)
    assert wait_for(lambda: len(op.stop(box, job=job, jobs_dir=str(jobs_dir))["data"]["targets"]) >= 4)
    dry = op.stop(box, job=job, jobs_dir=str(jobs_dir))
    assert dry["ok"] is False and dry["exit_code_hint"] == 5
    argv = dry["next"][0]["argv"]
    assert argv[argv.index("--plan") + 1] == dry["data"]["plan"]["plan_id"] and "--yes" in argv
    targets = dry["data"]["targets"]
    assert any(t["gpu"] for t in targets), targets
    assert all(t["cmd"] is not None for t in targets), "a process that exited mid-scan is no target"
    # the loop forks a 0.1 s sleep every tick, so a listed pid may be gone by now without any
    # signal; the four long-lived processes must all still be there
    def survives(match):
        return any(_alive(t["pid"]) for t in targets if t["cmd"] and match(t["cmd"]))

    assert survives(lambda c: c == "sleep 300") and survives(lambda c: c == "sleep 301"), \
        "a dry run must not signal anything"
    assert survives(lambda c: job in c), "the dry run must leave the leader alone"
    assert survives(lambda c: c.startswith("sh -c trap")), "the dry run must leave the GPU holder alone"

    doc = op.stop(box, job=job, grace=1.0, yes=True, jobs_dir=str(jobs_dir))
    assert doc["ok"], (doc["summary"], doc["data"]["remaining"], doc["data"]["signals"])
    # The GPU holder's loop forks a sleep every tick until SIGKILL lands: one forked after the
    # last scan gets a SIGKILL round of its own (signals.KILL_SWEEPS), so "still alive" is not
    # reported for a child born during the stop (a CI flake under load).
    names = [s["signal"] for s in doc["data"]["signals"]]
    assert names[0] == "SIGTERM" and set(names[1:]) == {"SIGKILL"} and len(names) <= 4, names
    assert not any(_alive(t["pid"]) for t in targets)
    assert doc["data"]["gpu_holders_left"] == []
    assert doc["data"]["state"] == "KILLED" and doc["data"]["after"]["signal"] == "SIGTERM"
    again = op.stop(box, job=job, yes=True, jobs_dir=str(jobs_dir))
    assert again["ok"] and "nothing to stop" in again["summary"]


def test_grace_zero_kills_at_once_instead_of_waiting_the_default(box, jobs_dir):
    """`--grace 0` was read as "unset" on the box and a TERM-ignoring job got the default 10 s."""
    job = launched(box, jobs_dir, "trap '' TERM; while :; do sleep 0.1; done")
    doc = op.stop(box, job=job, grace=0, yes=True, jobs_dir=str(jobs_dir))
    assert doc["ok"], (doc["summary"], doc["data"]["remaining"], doc["data"]["signals"])
    term, kill = doc["data"]["signals"][:2]
    assert (term["signal"], kill["signal"]) == ("SIGTERM", "SIGKILL")
    assert kill["at"] - term["at"] < 5, "the KILL waited out a grace nobody asked for"


def test_a_reused_pid_is_not_the_job(box, jobs_dir):
    from gpuops.onbox.host import jobrecord, procs

    stranger = subprocess.Popen(["sleep", "30"])
    try:
        job_id = "20200101-000000-abcdef"
        d = jobs_dir / job_id
        d.mkdir(parents=True)
        (d / "cmd").write_text("sleep 30\n")
        st = procs.stat(stranger.pid)
        jobrecord.write_json(str(d / "meta.json"), {
            "job_id": job_id, "name": "old", "pid": stranger.pid, "pgid": stranger.pid,
            "start_ticks": st["start_ticks"] - 1, "boot_id": procs.boot_id(), "launched_at": time.time() - 60})
        row = job_state(box, jobs_dir, job_id)
        assert row["state"] == "VANISHED" and "reused" in row["reason"]
        doc = op.stop(box, job=job_id, yes=True, jobs_dir=str(jobs_dir))
        assert doc["data"]["targets"] == [] and stranger.poll() is None, "stop must never touch the stranger"
    finally:
        stranger.kill()
        stranger.wait()


def test_a_job_read_while_its_supervisor_writes_the_exit_is_not_vanished(box, jobs_dir):
    """2 of 8 `launch --cmd true` envelopes said VANISHED: the status read landed after the job
    ended and before its supervisor wrote exit.json."""
    from gpuops.onbox.host import jobrecord, procs

    job_id = "20200101-000000-fedcba"
    d = jobs_dir / job_id
    d.mkdir(parents=True)
    (d / "cmd").write_text("true\n")
    gone = subprocess.Popen(["true"])
    gone.wait()
    exit_json = d / "exit.json"
    supervisor = subprocess.Popen(["sh", "-c", f"sleep 1; printf '%s' '{{\"exit_code\": 0, \"signal\": null, "
                                   f"\"ended_at\": 1}}' > {exit_json}.tmp; mv {exit_json}.tmp {exit_json}"])
    try:
        jobrecord.write_json(str(d / "meta.json"), {
            "job_id": job_id, "name": "quick", "pid": gone.pid, "pgid": gone.pid, "start_ticks": 1,
            "boot_id": procs.boot_id(), "launched_at": time.time(), "wrapper_pid": supervisor.pid,
            "wrapper_start_ticks": procs.stat(supervisor.pid)["start_ticks"]})
        assert job_state(box, jobs_dir, job_id)["state"] == "COMPLETED"
    finally:
        supervisor.kill()
        supervisor.wait()


def test_changed_boot_id_means_vanished(box, boot_root, jobs_dir):
    job = launched(box, jobs_dir, "sleep 30")
    assert job_state(box, jobs_dir, job)["state"] == "RUNNING"
    (boot_root / "proc/sys/kernel/random/boot_id").write_text("00000000-0000-4000-8000-000000000000\n")
    row = job_state(box, jobs_dir, job)
    assert row["state"] == "VANISHED" and "rebooted" in row["reason"]


def test_stalled_when_progress_stops_but_output_continues(box, jobs_dir):
    cmd = ("for i in 1 2 3 4 5 6 7 8; do echo \"completed step: $i, seconds: 0.1\"; sleep 0.1; done; "
           "while :; do echo 'NCCL WARN still waiting'; sleep 0.2; done")
    job = launched(box, jobs_dir, cmd)
    assert job_state(box, jobs_dir, job, stall_factor=3, stall_min_s=2)["state"] == "RUNNING"
    row = wait_for(lambda: (r := job_state(box, jobs_dir, job, stall_factor=3, stall_min_s=2))["state"]
                   == "STALLED" and r, timeout=8, every=0.5)
    assert row, "the job never read as STALLED"
    assert row["progress"]["last"]["step"] == 8 and row["progress"]["step_time_s"] == pytest.approx(0.1)
    custom = job_state(box, jobs_dir, job, progress_regex=r"still (waiting)", stall_factor=3, stall_min_s=2)
    assert custom["state"] == "RUNNING", "a user progress regex that matches the live lines clears the stall"


def test_queue_runs_every_line_even_when_an_entry_reads_stdin(box, jobs_dir):
    content = ("read x; echo \"first got [$x]\"\n"
               "cat; echo second\n"
               "# a comment\n"
               "exit 4\n"
               "echo fourth\n")
    doc = op.queue(box, name="q1", content=content, wait=15, jobs_dir=str(jobs_dir))
    d = doc["data"]
    assert d["done"] is not None and [e["state"] for e in d["entries"]] == ["COMPLETED", "COMPLETED", "FAILED",
                                                                            "COMPLETED"]
    assert doc["ok"] is False and d["failed_lines"] == [4] and "lines 4" in doc["summary"]
    logs = {e["line"]: (jobs_dir / e["job_id"] / "log").read_text() for e in d["entries"]}
    assert logs[1] == "first got []\n" and logs[2] == "second\n" and logs[5] == "fourth\n"


def test_queue_appends_while_running_and_resumes_after_its_runner_dies(box, jobs_dir):
    first = "sleep 0.6; echo one\nsleep 30; echo two\n"
    doc = op.queue(box, name="q2", content=first, jobs_dir=str(jobs_dir))
    assert doc["data"]["runner_started"]
    op.queue(box, name="q2", content=first + "echo three\n", jobs_dir=str(jobs_dir))  # append while running
    running = wait_for(lambda: (e := op.queue(box, name="q2", jobs_dir=str(jobs_dir))["data"]["entries"])[1][
        "state"] == "RUNNING" and e, timeout=10)
    import json
    runner = json.loads((jobs_dir / ".queues/q2/runner.json").read_text())
    os.kill(runner["pid"], signal.SIGKILL)  # the runner dies; line 2 keeps running
    os.kill(meta_of(jobs_dir, running[1]["job_id"])["pid"], signal.SIGTERM)
    refused = None
    try:
        op.queue(box, name="q2", content="echo different\n", jobs_dir=str(jobs_dir))
    except Exception as e:
        refused = e
    assert refused is not None and "appended" in str(refused)
    doc = op.queue(box, name="q2", content=first + "echo three\n", wait=10, jobs_dir=str(jobs_dir))
    entries = doc["data"]["entries"]
    assert [e["state"] for e in entries] == ["COMPLETED", "KILLED", "COMPLETED"]
    assert entries[0]["job_id"] == running[0]["job_id"], "a finished line is never run twice"
    assert len(list(jobs_dir.glob("*/meta.json"))) == 3
    assert doc["data"]["done"] and doc["ok"] is False


def test_retry_makes_a_child_from_the_immutable_command(box, jobs_dir):
    parent = launched(box, jobs_dir, "echo args:", env={"LR": "0.1"}, name="train")
    ended(box, jobs_dir, parent)
    blocked = launched(box, jobs_dir, "sleep 30", name="busy")
    with pytest.raises(Exception) as e:
        op.retry(box, job=blocked, jobs_dir=str(jobs_dir))
    assert "still running" in str(e.value)
    doc = op.retry(box, job=parent, resume_arg="--resume 'last ckpt'", env={"LR": "0.05"}, jobs_dir=str(jobs_dir))
    child = doc["data"]["job"]["job_id"]
    meta = meta_of(jobs_dir, child)
    assert meta["parent_job_id"] == parent and meta["name"] == "train" and meta["env"] == {"LR": "0.05"}
    ended(box, jobs_dir, child)
    assert (jobs_dir / child / "log").read_text() == "args: --resume last ckpt\n"
    assert (jobs_dir / parent / "cmd").read_text() == "echo args:\n", "the parent's copy is never rewritten"


@pytest.mark.parametrize("kept", [True, False], ids=["kept-master", "own-connection"])
def test_follow_recovers_from_a_half_open_link(box, jobs_box, jobs_dir, monkeypatch, kept):
    """The server side freezes (no FIN, no RST): only the stream's silence gives it away. On a kept
    master the silence used to be noticed and nothing done about it: the master holds the
    channel's pipes, so the follow hung until the master's keepalives gave out."""
    if not kept:
        monkeypatch.setenv("GPUOPS_SSH_PERSIST", "0")
    monkeypatch.setattr(joblogs, "STREAM_IDLE_S", 1.5)
    job = launched(box, jobs_dir, "for i in $(seq 1 60); do echo \"line $i\"; sleep 0.05; done")
    got, result = bytearray(), {}

    def follow():
        t = target_for(jobs_box.spec)
        try:
            result["doc"] = joblogs.logs(t, job=job, follow=True, from_offset=0, jobs_dir=str(jobs_dir),
                                    sink=got.extend, reconnect_s=20)
        finally:
            t.close()

    th = threading.Thread(target=follow)
    th.start()
    assert wait_for(lambda: b"line 3\n" in got, timeout=10)
    frozen = [int(p) for p in subprocess.run(["pgrep", "-P", str(jobs_box.proc.pid)], capture_output=True,
                                             text=True).stdout.split()]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        th.join(timeout=30)
    finally:
        for pid in frozen:
            for sig in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
    doc = result["doc"]
    assert doc["data"]["reconnects"] >= 1 and doc["data"]["state"] == "COMPLETED"
    assert bytes(got) == (jobs_dir / job / "log").read_bytes()


def test_jobs_dir_defaults_to_home_and_follows_the_box_environment(rig, tmp_path):
    from tests.jobs.helpers import kill_everything

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    plain = rig.box("jobs-home", env={"HOME": str(home)})
    moved = rig.box("jobs-env", env={"HOME": str(home), "GPUOPS_JOBS_DIR": str(elsewhere)})
    try:
        for b, where in ((plain, home / ".gpuops" / "jobs"), (moved, elsewhere)):
            t = target_for(b.spec)
            try:
                job = op.launch(t, command="true")["data"]["job"]["job_id"]
                assert (where / job / "meta.json").exists()
                assert op.status(t)["data"]["jobs_dir"] == str(where)
            finally:
                t.close()
                kill_everything(where)
    finally:
        plain.stop()
        moved.stop()


def test_a_job_that_kills_its_own_supervisor_is_vanished_and_launch_says_so(box, jobs_dir, launch_confirms):
    """`launch --cmd 'kill -9 $PPID'` exited 70 ("supervisor did not report a start within 30s",
    after 1-2 s) in two of three runs; status then showed the job STARTING and diagnose crashed."""
    from gpuops.ops import diagnose

    # The job races its supervisor's start record: either may win, and when the record wins, the
    # launch's watch (launch_confirms) is what sees the supervisor go.
    for _ in range(6):
        doc = op.launch(box, command="kill -9 $PPID", jobs_dir=str(jobs_dir))
        job = doc["data"]["job"]["job_id"]
        assert doc["ok"] is False and doc["summary"].startswith(f"{job}: VANISHED: "), doc["summary"]
        assert "supervisor" in doc["summary"]
        row = job_state(box, jobs_dir, job)
        assert row["state"] == "VANISHED" and "supervisor" in row["reason"], row
        assert not list((jobs_dir / job).glob("meta.json.tmp.*")), "nothing half-written is left"
        verdict = diagnose.diagnose(box, job=job, jobs_dir=str(jobs_dir))["data"]
        assert verdict["verdict"] == "unknown" and verdict["exit_code"] is None, verdict

    doc = op.launch(box, command="kill -9 $PPID; sleep 30", jobs_dir=str(jobs_dir))
    job = doc["data"]["job"]["job_id"]
    assert doc["ok"] is False and "its gpuops supervisor is gone" in doc["summary"], doc["summary"]
    assert doc["data"]["meta"]["pid"] and job_state(box, jobs_dir, job)["state"] == "RUNNING"
    # VANISHED once no process of the job lives: its `sleep 30` outlives the shell, so the whole group
    os.killpg(doc["data"]["meta"]["pgid"], signal.SIGKILL)
    assert ended(box, jobs_dir, job)["state"] == "VANISHED"


@pytest.mark.parametrize("age_s", [0, 3600])
def test_no_verb_tracebacks_on_a_launch_that_left_no_start_record(box, jobs_dir, age_s):
    """What a supervisor killed before its start record left (cmd and log, no meta.json):
    `diagnose --job` crashed on it with TypeError (exit 70)."""
    from gpuops.ops import diagnose, wait

    job = "20260101-000000-abcdef"
    d = jobs_dir / job
    d.mkdir(parents=True)
    (d / "cmd").write_text("kill -9 $PPID\n")
    (d / "log").write_text("")
    os.utime(d, (time.time() - age_s,) * 2)
    state = "STARTING" if age_s < 60 else "VANISHED"
    assert job_state(box, jobs_dir, job)["state"] == state
    verdict = diagnose.diagnose(box, job=job, jobs_dir=str(jobs_dir))
    assert verdict["data"]["verdict"] == "unknown" and "start record" in verdict["summary"], verdict["summary"]
    assert verdict["data"]["state"] == state
    assert joblogs.logs(box, job=job, jobs_dir=str(jobs_dir))["data"]["text"] == ""
    assert op.stop(box, job=job, yes=True, jobs_dir=str(jobs_dir))["summary"].endswith("none of its processes is alive")
    waited = wait.wait(box, job=job, timeout_s=1, jobs_dir=str(jobs_dir))
    assert waited["data"]["state"] == state


def test_a_completed_jobs_row_says_exit_code_0_as_its_exit_record_does(box, jobs_dir):
    """A COMPLETED job's row had `exit_code: null` while its exit record said 0."""
    import json

    job = launched(box, jobs_dir, "true")
    row = ended(box, jobs_dir, job)
    record = json.loads((jobs_dir / job / "exit.json").read_text())
    assert (row["state"], row["exit_code"], record["exit_code"]) == ("COMPLETED", 0, 0)
    assert op.status(box, job=job, jobs_dir=str(jobs_dir))["summary"].startswith(f"{job}: COMPLETED")
