"""The reaper's pure rules: who is protected, which job a process belongs to, the class order, the envelope."""

import os

import pytest

from gpuops import errors
from gpuops.onbox.host import procs
from gpuops.onbox.reaper import holders
from gpuops.onbox.reaper import reap_rules as rules
from gpuops.ops import reap as op

TICK = 100  # start ticks below are in units of 1/100 s
QUIET = {"window_s": 10.0, "cpu_s": 0.0, "io_bytes": 0, "cpu_total_s": 75.5, "processes": 1}
PTS_3 = (136 << 8) | 3  # tty_nr of /dev/pts/3


def proc(pid=500, **kw):
    f = {"pid": pid, "start_ticks": 50 * TICK, "ppid": 1, "pgid": pid, "sid": pid, "state": "S", "comm": "python3",
         "argv0": "python3", "command": "python3 train.py", "uid": 1000, "user": "alice", "age_s": 3600.0,
         "unit": None, "devices": ["/dev/nvidia0", "/dev/nvidiactl"], "minors": [0], "gpus": [0], "gpu_mem_mib": {},
         "threads": None, "tty_nr": 0, "activity": QUIET}
    f.update(kw)
    return f


def ctx(**kw):
    c = {"uid": 1000, "ancestry": {4000, 4001}, "sid": 4000, "pgid": 4000, "table": {}, "jobs": [],
         "util": {0: 0, 1: 0}, "min_age": 600, "idle_window": 10}
    c.update(kw)
    return c


def job(job_id="j1", pid=300, start=40 * TICK, running=False, ended_ticks=None, exit=None):
    return {"id": job_id, "pid": pid, "pgid": pid, "sid": None, "start_ticks": start, "running": running,
            "exit": exit, "ended_ticks": ended_ticks}


@pytest.mark.parametrize("comm,argv0,expected", [
    ("nvidia-persiste", "", "nvidia-persistenced"),   # comm is cut to 15 characters by the kernel
    ("sleep", "nvidia-persistenced", "nvidia-persistenced"),
    ("nvidia_gpu_expo", "nvidia_gpu_exporter", "nvidia_gpu_exporter"),
    ("sshd-session", "sshd-session", "sshd-session"),
    ("python3", "python3", None),
    ("Xorgish", "Xorgish", None),
])
def test_daemon_names(comm, argv0, expected):
    assert rules.daemon_name({"comm": comm, "argv0": argv0}) == expected


@pytest.mark.parametrize("overrides,reason", [
    ({"pid": 1}, "PID 1"),
    ({"kthread": True}, "kernel thread"),
    ({"pid": 4001}, "own process chain"),
    ({"sid": 4000}, "own session"),
    ({"comm": "nv-hostengine", "argv0": "nv-hostengine"}, "nv-hostengine"),
    ({"unit": "vllm.service"}, "systemd service vllm.service"),
    ({"uid": 0, "user": "root"}, "belongs to user root"),
    ({"uid": None}, "owner unknown"),
])
def test_protected(overrides, reason):
    cls, why, _ = rules.classify(proc(**overrides), ctx())
    assert cls == "protected" and reason in why


def test_kernel_threads_are_told_by_their_task_flag():
    kthreadd = [pid for pid in (2,) if (procs.stat(pid) or {}).get("comm") == "kthreadd"]  # none in a container
    assert [holders.kernel_thread(pid) for pid in kthreadd] == [True] * len(kthreadd)
    assert holders.kernel_thread(os.getpid()) is False
    assert rules.classify(proc(ppid=2), ctx())[0] != "protected"  # in a container pid 2 is just a process


def test_service_unit_ignores_login_sessions(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_ROOT", str(tmp_path))
    cases = {
        900001: ("0::/system.slice/nvidia-dcgm.service\n", "nvidia-dcgm.service"),
        900002: ("0::/system.slice/ssh.service\n", None),  # sshd without pam_systemd keeps sessions in its unit
        900003: ("0::/user.slice/user-1000.slice/session-4.scope\n", None),
        900004: ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service\n", "jupyter.service"),
        900005: ("12:memory:/docker/abc\n0::/\n", None),
    }
    for pid, (text, _) in cases.items():
        (tmp_path / "proc" / str(pid)).mkdir(parents=True)
        (tmp_path / "proc" / str(pid) / "cgroup").write_text(text)
    assert dict((pid, holders.service_unit(pid)) for pid in cases) == dict((p, u) for p, (_, u) in cases.items())


def test_job_match_by_group_needs_the_process_to_fall_inside_the_job():
    ended = job(ended_ticks=60 * TICK, exit={"exit_code": 0})
    inside = proc(pgid=300, start_ticks=45 * TICK)
    assert rules.job_of(inside, [ended], {}) is ended
    # The group id came back after the job ended: a newcomer started later is not the job's.
    assert rules.job_of(proc(pgid=300, start_ticks=70 * TICK), [ended], {}) is None
    # Nor is anything older than the job.
    assert rules.job_of(proc(pgid=300, start_ticks=30 * TICK), [ended], {}) is None
    # A running job also owns what descends from its recorded process, in another group.
    running = job(running=True)
    table = {300: {"pid": 300, "ppid": 1, "start_ticks": 40 * TICK}, 310: {"pid": 310, "ppid": 300, "start_ticks": 41 * TICK},
             500: {"pid": 500, "ppid": 310, "start_ticks": 50 * TICK}}
    assert rules.job_of(proc(pgid=500, sid=500), [running], table) is running
    assert rules.job_of(proc(pgid=500, sid=500), [running], {500: table[500]}) is None


def test_job_match_by_exit_record_survivors_and_by_supervisor():
    # The exit record names the processes still in the job's group when it ended: an exact match.
    ended = dict(job(ended_ticks=60 * TICK, exit={"exit_code": 0}), survivors={(500, 50 * TICK)})
    assert rules.job_of(proc(pgid=999, sid=999), [ended], {}) is ended
    assert rules.job_of(proc(pgid=999, sid=999, start_ticks=51 * TICK), [ended], {}) is None
    # A running job's supervisor adopts what the job orphans (setsid'd daemons): those are the job's too.
    running = dict(job(running=True), wrapper_pid=299, wrapper_start_ticks=39 * TICK)
    table = {299: {"pid": 299, "ppid": 1, "start_ticks": 39 * TICK}}
    assert rules.job_of(proc(ppid=299), [running], table) is running
    stale = {299: {"pid": 299, "ppid": 1, "start_ticks": 80 * TICK}}  # pid 299 is someone else now
    assert rules.job_of(proc(ppid=299), [running], stale) is None


def test_class_order():
    busy = ctx(util={0: 40})
    running = [job(running=True)]
    member = proc(pgid=300)
    # A running job is live even with an idle GPU and a zombie leader.
    assert rules.classify(dict(member, state="Z", threads=2), ctx(jobs=running))[0] == "live"
    # A zombie with live threads outside any running job is defunct, busy GPU or not.
    assert rules.classify(proc(state="Z", threads=2), busy)[0] == "defunct"
    # A busy GPU beats a finished job: a leftover that still computes is left alone.
    done = [job(ended_ticks=90 * TICK, exit={"signal": "SIGKILL"})]
    assert rules.classify(member, ctx(jobs=done, util={0: 40}))[:2] == ("live", "GPU 0 busy (up to 40% over the 10s window)")
    assert rules.classify(member, ctx(jobs=done))[:2] == ("finished-job", "left behind by gpuops job j1, which ended "
                                                                          "(killed by SIGKILL)")
    assert rules.classify(proc(gpus=[], minors=[], devices=["/dev/nvidiactl"]), ctx())[0] == "live"
    assert "not provably idle" in rules.classify(proc(), ctx(util={0: None}))[1]
    assert "younger than --min-age" in rules.classify(proc(age_s=30.0), ctx())[1]
    assert rules.classify(proc(), ctx())[0] == "orphan"
    table = {77: {"pid": 77, "comm": "tini", "ppid": 0}}
    assert rules.classify(proc(ppid=77), ctx(table=table))[1].startswith("reparented to subreaper 77 (tini)")
    table = {77: {"pid": 77, "comm": "jupyter-lab", "ppid": 1}}
    assert rules.classify(proc(ppid=77), ctx(table=table))[0] == "idle"


def test_a_cpu_phase_process_on_an_idle_gpu_is_not_idle_and_says_what_it_did():
    tokenising = dict(QUIET, cpu_s=9.2, processes=5)
    cls, why, _ = rules.classify(proc(ppid=77, activity=tokenising), ctx(table={77: {"pid": 77, "comm": "bash", "ppid": 1}}))
    assert cls == "live" and why == ("GPU 0 at 0% over the 10s window, but its processes used 9.2s of CPU over 10.0s: "
                                     "a CPU phase (data loading, tokenising, checkpointing)")
    assert rules.last_activity(proc(activity=tokenising), ctx()) == "now (CPU 9.2s in 10.0s)"
    checkpointing = dict(QUIET, cpu_s=0.05, io_bytes=3 << 30)
    cls, why, _ = rules.classify(proc(activity=checkpointing), ctx())
    assert cls == "live" and "moved 3.0 GiB of I/O over 10.0s" in why
    assert rules.classify(proc(activity=dict(QUIET, cpu_s=0.1, io_bytes=600 << 10)), ctx())[0] == "orphan", \
        "a heartbeat's worth of CPU and I/O is quiet"
    assert rules.last_activity(proc(), ctx()) == "none in 10.0s (GPU 0 0%, CPU 0s, I/O 0 B); 75.5s CPU since it started"


@pytest.mark.parametrize("activity,why", [
    (None, "CPU time over the window could not be read"),
    (dict(QUIET, io_bytes=None), "own I/O (/proc/PID/io) could not be read"),
])
def test_unmeasured_activity_is_not_idle(activity, why):
    cls, reason, _ = rules.classify(proc(activity=activity), ctx())
    assert cls == "live" and why in reason and "not provably idle" in reason


def test_a_process_in_a_live_interactive_session_is_never_idle():
    shell = {"pid": 600, "comm": "bash", "ppid": 590, "sid": 600, "tty_nr": PTS_3, "state": "S"}
    table = {600: shell}
    cls, why, _ = rules.classify(proc(ppid=600, sid=600, pgid=610, tty_nr=PTS_3), ctx(table=table))
    assert (cls, why) == ("live", "GPU 0 at 0% over the 10s window, but in a live interactive session: it has "
                                  "terminal pts/3, whose session leader 600 (bash) still runs")
    # A notebook server started in that shell: its kernel left the session (setsid) but descends from it.
    table[700] = {"pid": 700, "comm": "jupyter-lab", "ppid": 600, "sid": 600, "tty_nr": PTS_3, "state": "S"}
    cls, why, _ = rules.classify(proc(ppid=700), ctx(table=table))
    assert cls == "live" and "its ancestor 700 (jupyter-lab) has terminal pts/3" in why
    # The shell is gone (the SSH connection dropped): nothing interactive is left to protect.
    del table[600]
    assert rules.classify(proc(ppid=700), ctx(table=table))[0] == "idle"
    # The reaper's own session (4000) is where the walk stops: a process that setsid'd out of it is judged alone.
    table[700].update(sid=4000)
    table[4000] = dict(shell, pid=4000, sid=4000)
    assert rules.classify(proc(ppid=700), ctx(table=table))[0] == "idle"


def facts(holders=(), actions=(), applied=False, gpus=None, **kw):
    doc = {"gpu": None, "applied": applied, "holders": list(holders), "actions": list(actions), "gpus": gpus or [],
           "gpu_error": None, "unreadable": 0, "nvml_unverified": [], "nested_pid_namespace": False}
    doc.update(kw)
    return doc


def holder(pid, cls, action=None, outcome=None):
    return dict(proc(pid), **{"class": cls, "reason": "r", "action": action, "outcome": outcome, "job": None,
                              "last_activity": "none in 10.0s"})


def gpu_row(index=0, used=300, attributed=0, holders=(), freed=None):
    return {"index": index, "util_peak_pct": 0, "memory_used_mib": used, "memory_total_mib": 81559,
            "attributed_mib": attributed, "holders": list(holders), "memory_after_mib": None, "freed_mib": freed}


def test_envelope_exit_codes():
    nothing = op.build(facts(), rerun=["gpuops", "reap", "--yes"])
    assert nothing["ok"] and nothing["summary"] == "no process holds an NVIDIA device"
    kept = op.build(facts([holder(1, "live"), holder(2, "protected")]), rerun=["x"])
    assert kept["ok"] and kept["summary"] == "2 GPU holder(s), none to reap (live 1, protected 1)"
    pending = op.build(facts([holder(1, "orphan", action="SIGTERM..."), holder(2, "live")]),
                       rerun=["gpuops", "reap", "--yes"])
    assert pending["exit_code_hint"] == errors.REFUSED and [s["argv"] for s in pending["next"]] == [
        ["gpuops", "reap", "--yes"]]
    stuck = op.build(facts([holder(1, "idle", action="SIGTERM...", outcome="stuck")], applied=True,
                           actions=[{"pid": 1, "signals": ["SIGTERM to pid 1", "SIGKILL to pid 1"], "outcome": "stuck",
                                     "why": "D"}], gpus=[gpu_row(holders=[1], freed=0)]), rerun=["x"])
    assert stuck["exit_code_hint"] == errors.CHECK_FAILED and "1 stuck" in stuck["summary"]
    assert stuck["findings"][0]["id"] == "reap.stuck" and "nvidia-smi -r -i 0" in stuck["findings"][0]["fix"]


def test_memory_no_process_here_holds_is_flagged_once_it_is_large():
    doc = op.build(facts(gpus=[gpu_row(0, used=20000), gpu_row(1, used=900), gpu_row(2, used=20000, holders=[5])],
                         nested_pid_namespace=True), rerun=["x"])
    flagged = [f for f in doc["findings"] if f["id"] == "reap.unattributed-memory"]
    assert [f["evidence"]["gpu"] for f in flagged] == [0]
    assert flagged[0]["gotcha"] == "U11" and doc["ok"]
