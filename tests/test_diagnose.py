"""diagnose against the real sshd rig with real jobs: each cause of death leaves its own evidence.

The box runs with a GPUOPS_ROOT overlay holding boot_id, a cgroup v2 view with a fake OOM
counter and a kern.log, so a test can stage an OOM kill, an Xid or a reboot around a real process.
"""

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gpuops.diagnose import verdict
from gpuops.ops import diagnose as op
from gpuops.ops import jobs
from gpuops.remote.targets import target_for
from tests.jobs.helpers import kill_everything, wait_for

REAL_BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text()


@pytest.fixture(scope="module")
def droot(tmp_path_factory):
    root = tmp_path_factory.mktemp("diag-root")
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("0::/gpuops-test\n")
    (root / "proc/self/mountinfo").write_text("30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    (root / "sys/fs/cgroup/gpuops-test").mkdir(parents=True)
    (root / "var/log").mkdir(parents=True)
    return root


@pytest.fixture(scope="module")
def dbox(rig, droot, tmp_path_factory):
    jobs_dir = tmp_path_factory.mktemp("diag-jobs")
    box = rig.box("diagbox", env={"GPUOPS_ROOT": str(droot), "GPUOPS_JOBS_DIR": str(jobs_dir)})
    t = target_for(box.spec)
    yield t
    t.close()
    kill_everything(jobs_dir)


@pytest.fixture(autouse=True)
def fresh_state(droot):
    (droot / "proc/sys/kernel/random/boot_id").write_text(REAL_BOOT_ID)
    (droot / "sys/fs/cgroup/gpuops-test/memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    (droot / "var/log/kern.log").write_text("")


def kern(droot, text):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    with open(droot / "var/log/kern.log", "a") as f:
        f.write(f"{stamp} gpubox kernel: {text}\n")


def launch(t, command, **kw):
    doc = jobs.launch(t, command=command, **kw)
    assert doc["data"]["meta"].get("pid"), doc["summary"]  # started (a quick one may have ended already)
    return doc["data"]["job"]["job_id"], doc["data"]["meta"]["pid"]


def ended(t, job_id):
    def done():
        d = op.diagnose(t, job=job_id)
        return d if d["data"]["verdict"] != "running" else None
    return wait_for(done, timeout=15, every=0.2)


def test_oom_kill_named_by_the_kernel_and_the_cgroup_counter(dbox, droot):
    job_id, pid = launch(dbox, "sleep 60")
    (droot / "sys/fs/cgroup/gpuops-test/memory.events").write_text("oom 1\noom_kill 1\n")
    kern(droot, f"Memory cgroup out of memory: Killed process {pid} (sleep) total-vm:1000kB")
    os.kill(pid, signal.SIGKILL)
    d = ended(dbox, job_id)["data"]
    assert (d["verdict"], d["confidence"], d["signal"]) == ("oom-kill", "high", "SIGKILL")
    assert any(str(pid) in line for line in d["evidence"])
    assert d["oom_kills"] == {"at_launch": 0, "now": 1}
    assert d["gotcha"] == "U9, U3"  # the verdict names the catalog entries it is an instance of
    assert any("gpuops gotcha U9 / U3" in a for a in ended(dbox, job_id)["advice"])


def test_sigkill_without_oom_evidence_is_not_called_oom(dbox, droot):
    kern(droot, "Memory cgroup out of memory: Killed process 999999 (other) long before launch")
    time.sleep(2.1)  # kernel stamps have whole seconds; this line must predate the launch
    job_id, pid = launch(dbox, "sleep 60")
    os.kill(pid, signal.SIGKILL)
    d = ended(dbox, job_id)["data"]
    assert d["verdict"] == "killed-by-signal"
    oom = next(r for r in d["ruled_out"] if r["cause"] == "oom-kill")
    assert "unchanged (0 -> 0)" in oom["why"]


def test_hangup(dbox):
    job_id, pid = launch(dbox, "sleep 60")
    os.kill(pid, signal.SIGHUP)
    d = ended(dbox, job_id)["data"]
    assert (d["verdict"], d["gotcha"]) == ("sighup", "U3")


def test_reboot_beats_everything(dbox, droot):
    job_id, pid = launch(dbox, "sleep 60")
    (droot / "proc/sys/kernel/random/boot_id").write_text("00000000-0000-4000-8000-000000000000\n")
    d = op.diagnose(dbox, job=job_id)["data"]
    assert (d["verdict"], d["confidence"]) == ("reboot", "high")
    os.kill(pid, signal.SIGKILL)


def test_xid_after_launch_is_a_gpu_fault(dbox, droot):
    kern(droot, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.")  # before: ignored
    job_id, pid = launch(dbox, "sleep 60")
    time.sleep(1.1)
    kern(droot, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.")
    os.kill(pid, signal.SIGKILL)
    d = ended(dbox, job_id)["data"]
    assert d["verdict"] == "gpu-fault"
    assert any("Xid" in line and "79" in line for line in d["evidence"])


def test_xid_from_before_launch_is_ruled_out(dbox, droot):
    kern(droot, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.")
    time.sleep(1.1)
    job_id, _ = launch(dbox, "exit 3")
    d = ended(dbox, job_id)["data"]
    assert (d["verdict"], d["exit_code"]) == ("failed-exit", 3)


def test_completed(dbox):
    job_id, _ = launch(dbox, "echo fine")
    assert ended(dbox, job_id)["data"]["verdict"] == "completed"


@pytest.fixture
def tiny_fs(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=64", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a test tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


def test_disk_full(dbox, tiny_fs):
    job_id, _ = launch(dbox, "cat /dev/zero > fill", workdir=str(tiny_fs))
    d = ended(dbox, job_id)["data"]
    assert d["verdict"] == "disk-full", d
    assert any("No space left on device" in line for line in d["evidence"])


def test_a_segfault_is_a_crash_named_with_the_core_it_left_in_the_jobs_cwd(dbox, tmp_path):
    # A real SIGSEGV with cores on (kernel.core_pattern is "core" here): the kernel writes
    # <cwd>/core, and diagnose names it with the gdb line that opens it.
    cwd = tmp_path / "run"
    cwd.mkdir()
    job_id, _ = launch(dbox, "ulimit -c unlimited; exec python3 -c 'import os, signal; os.kill(os.getpid(), "
                             "signal.SIGSEGV)'", workdir=str(cwd))
    d = ended(dbox, job_id)
    cores = d["data"]["cores"]
    if cores["pattern"] != "core":
        pytest.skip(f"this kernel writes cores through {cores['pattern']!r}, not into the cwd")
    assert (d["data"]["verdict"], d["data"]["confidence"], d["data"]["signal"]) == ("crashed", "high", "SIGSEGV")
    assert [f["path"] for f in cores["files"]] == [str(cwd / "core")] and cores["cwd"] == str(cwd)
    assert d["data"]["evidence"][-2] == "the program died of SIGSEGV, a crash in native code"
    assert d["data"]["evidence"][-1].startswith(f"core file {cwd / 'core'} (") and "-ex bt" in d["data"]["evidence"][-1]
    assert any("PYTHONFAULTHANDLER=1" in a for a in d["advice"])


def test_a_run_whose_wandb_went_offline_says_where_its_curves_are(dbox):
    from tests.test_trackers import OFFLINE

    job_id, _ = launch(dbox, "printf '%s' " + shlex.quote(OFFLINE) + "; for i in $(seq 1 2000); do echo step $i; done")
    d = ended(dbox, job_id)
    assert d["data"]["verdict"] == "completed"
    assert d["data"]["trackers"]["wandb"]["state"] == "offline"  # read from the log's head, 2000 lines back
    assert any("wandb sync /root/run/wandb/offline-run-" in a for a in d["advice"])


@pytest.mark.parametrize("command, code, words, said", [
    ("pythn train.py", 127, "command not found", "pythn: command not found"),
    ("./notexec.sh", 126, "not executable", "Permission denied"),
])
def test_exit_127_and_126_are_named_in_words_with_the_line_that_says_why(dbox, tmp_path, command, code, words, said):
    """Issue 27: diagnose said "the program exited with code 127" where launch had already shown
    "pythn: command not found"; the shell's own codes mean something, and the log says which."""
    (tmp_path / "notexec.sh").write_text("#!/bin/sh\necho never\n")
    job_id, _ = launch(dbox, command, workdir=str(tmp_path))
    d = ended(dbox, job_id)["data"]
    assert (d["verdict"], d["exit_code"]) == ("failed-exit", code)
    assert words in d["evidence"][-2] and said in d["error_line"] and said in d["evidence"][-1], d["evidence"]


def test_unknown_job_is_not_found(dbox):
    from gpuops import errors

    with pytest.raises(errors.NotFound):
        op.diagnose(dbox, job="no-such-job")


def test_cli_json_envelope_and_exit_code(rig, dbox, cli):
    job_id, pid = launch(dbox, "sleep 60")
    os.kill(pid, signal.SIGTERM)
    ended(dbox, job_id)
    r = cli("diagnose", "--host", "diagbox", "--job", job_id, "--json", env=rig.env())
    import json

    doc = json.loads(r.stdout)
    assert r.returncode == 1
    assert doc["data"]["verdict"] == "killed-by-signal" and doc["data"]["signal"] == "SIGTERM"


def test_cli_usage_error(cli):
    r = cli("diagnose", "--pid", "abc")
    assert r.returncode == 2 and "--pid" in r.stderr and "Traceback" not in r.stderr


# Pure ladder cases that the rig cannot stage cheaply.

def test_exit_137_alone_is_never_oom():
    v = verdict.decide({"exit": {"exit_code": 137, "signal": None}, "kernel_readable": False,
                        "oom_kills_now": None})
    assert v["verdict"] == "killed-by-signal" and v["confidence"] == "low"


def test_clean_dmesg_does_not_rule_out_oom_in_a_container():
    v = verdict.decide({"exit": {"exit_code": None, "signal": "SIGKILL"}, "kernel_readable": True,
                        "oom_kills_at_launch": 2, "oom_kills_now": 3})
    assert (v["verdict"], v["confidence"]) == ("oom-kill", "medium")


def test_a_torchrun_worker_killed_by_hand_is_not_advised_as_a_host_oom():
    """A gang node whose worker got kill -9 was diagnosed failed-exit with the OOM killer ruled out,
    then advised to lower num_workers: torchrun's 'Signal 9 (SIGKILL)' line triages as oom-host."""
    triaged = {"primary": "oom-host", "status": "failed", "advice": ["Lower the DataLoader's num_workers."]}
    ev = {"exit": {"exit_code": 1, "signal": None}, "kernel_readable": True, "oom_kills_at_launch": 0,
          "oom_kills_now": 0, "disks": []}
    lines = verdict.triage_advice(triaged, ev, verdict.decide(ev)["ruled_out"])
    assert len(lines) == 1 and "OOM killer is ruled out (cgroup OOM-kill counter unchanged (0 -> 0)" in lines[0]
    # where the OOM killer cannot be ruled out (no kernel log in a container), the triage's advice stands
    ev.update(kernel_readable=False)
    lines = verdict.triage_advice(triaged, ev, verdict.decide(ev)["ruled_out"])
    assert lines == ["By its log's tail, triage finds oom-host (failed).", "Lower the DataLoader's num_workers."]
    assert verdict.triage_advice({"primary": None}, {}, []) == []


def test_vanished_without_any_evidence_is_unknown():
    v = verdict.decide({"exit": None, "alive": False, "kernel_readable": True, "oom_kills_at_launch": 0,
                        "oom_kills_now": 0, "disks": []})
    assert v["verdict"] == "unknown"
    assert {r["cause"] for r in v["ruled_out"]} >= {"reboot", "oom-kill", "gpu-fault", "disk-full"}


def _cores(files=(), entries=(), limit=-1, pattern="core", available=False, error=None):
    return {"pattern": pattern, "limit": limit, "cwd": "/root/run", "files": list(files),
            "coredumpctl": {"available": available, "error": error, "entries": list(entries)}}


def test_a_core_signal_is_a_crash_and_says_why_no_core_was_kept():
    base = {"kernel_readable": True, "oom_kills_at_launch": 0, "oom_kills_now": 0, "disks": [], "pid": 4242}
    v = verdict.decide(dict(base, exit={"exit_code": 134, "signal": None}, cores=_cores(limit=0)))
    assert (v["verdict"], v["signal"]) == ("crashed", "SIGABRT")
    assert v["evidence"][-1].startswith("no core dump: the core size limit is 0 here (ulimit -c)")
    v = verdict.decide(dict(base, exit={"exit_code": None, "signal": "SIGSEGV"},
                            cores=_cores(pattern="|/usr/lib/systemd/systemd-coredump %P %u %g %s %t %c %h")))
    assert v["evidence"][-1] == ("no core file: kernel.core_pattern hands cores to /usr/lib/systemd/systemd-coredump, "
                                 "and coredumpctl is not here")
    # a plain error exit stays a failed exit, with the core a worker left as evidence
    v = verdict.decide(dict(base, exit={"exit_code": 1, "signal": None}, cores=_cores(
        entries=[{"time": 1.79e9, "pid": 4250, "sig": "SIGSEGV", "corefile": "present", "exe": "/usr/bin/python3.10",
                  "size": 9000}], available=True)))
    assert v["verdict"] == "failed-exit" and v["evidence"][-1] == (
        "coredumpctl: pid 4250 (/usr/bin/python3.10) dumped core on SIGSEGV, core present: coredumpctl debug 4250")


def test_a_vanished_run_whose_own_pid_dumped_core_is_a_crash_and_anothers_core_is_not():
    base = {"exit": None, "alive": False, "kernel_readable": True, "oom_kills_at_launch": 0, "oom_kills_now": 0,
            "disks": [], "pid": 4242}
    core = {"path": "/root/run/core.4242", "size": 1 << 20, "mtime": 1.79e9}
    v = verdict.decide(dict(base, cores=_cores(files=[core])))
    assert (v["verdict"], v["confidence"]) == ("crashed", "high") and v["evidence"][-2] == "pid 4242 left a core dump"
    v = verdict.decide(dict(base, cores=_cores(files=[dict(core, path="/root/run/core.977")])))
    assert v["verdict"] == "unknown"
    assert verdict.decide(dict(base, cores=None))["verdict"] == "unknown"


def test_a_stop_record_names_gpuops_stop_unless_the_job_had_already_ended():
    """A job stopped with `gpuops stop --yes` was called "terminated by SIGTERM from outside"."""
    stop = {"requested_at": 100.0, "signals": [{"signal": "SIGTERM", "pids": [5], "at": 100.0},
                                               {"signal": "SIGKILL", "pids": [6], "at": 110.0}]}

    def decide(ended_at, record):
        return verdict.decide({"exit": {"exit_code": None, "signal": "SIGKILL", "ended_at": ended_at},
                               "job": {"stop": record}, "kernel_readable": True, "oom_kills_now": 0,
                               "oom_kills_at_launch": 0})

    stopped = decide(111.0, stop)
    assert (stopped["verdict"], stopped["confidence"]) == ("stopped", "high")
    assert "SIGTERM to 1 process(es), then SIGKILL to 1 process(es)" in stopped["evidence"][-1]
    steps, advice = verdict.next_steps("stopped", "box", "j1")
    assert [s["argv"] for s in steps] == [["gpuops", "retry", "--host", "box", "--job", "j1"]] and not advice
    # without a job (diagnose --pid) no step names one: what cannot be run exactly is left out
    steps, advice = verdict.next_steps("reboot", "box", None)
    assert [s["argv"] for s in steps] == [["gpuops", "preflight", "--host", "box"]] and advice
    assert decide(99.0, stop)["verdict"] == "killed-by-signal"  # it ended before anyone asked
    assert decide(111.0, dict(stop, signals=[{"signal": "SIGTERM", "pids": [], "at": 100.0}]))["verdict"] == \
        "killed-by-signal"  # the stop found nothing to signal


@pytest.mark.parametrize("ended_by,said", [("stall", "stalled"), ("max-runtime", "timeout")])
def test_a_signal_the_runs_own_supervisor_sent_is_not_called_from_outside(ended_by, said):
    # Found on a --stall-after run on the GPU: diagnose said "terminated by SIGTERM from outside".
    v = verdict.decide({"exit": {"exit_code": None, "signal": "SIGTERM", "ended_by": ended_by,
                                 "stall_evidence": "stall-1.json" if ended_by == "stall" else None},
                        "kernel_readable": True, "boot_id_then": "b", "boot_id_now": "b"})
    assert v["verdict"] == said and v["confidence"] == "high"
    assert not any("from outside" in line for line in v["evidence"])
    assert verdict.decide({"exit": {"exit_code": None, "signal": "SIGTERM"}, "kernel_readable": True})[
        "verdict"] == "killed-by-signal"


@pytest.mark.parametrize("ev, verdict_, gotcha", [
    ({"boot_changed": True}, "reboot", "U3"),
    ({"exit": {"exit_code": None, "signal": "SIGKILL"}, "kernel_readable": True, "oom_kills_at_launch": 0,
      "oom_kills_now": 1}, "oom-kill", "U9, U3"),
    ({"exit": {"exit_code": 1, "signal": None}, "log_tail": "OSError: [Errno 28] No space left on device",
      "disks": [{"path": "/data", "free_bytes": 0, "free_inodes": 0}]}, "disk-full", "U6, U7"),
    ({"exit": {"exit_code": 1, "signal": None}, "log_tail": "OSError: [Errno 28] No space left on device",
      "disks": [{"path": "/data", "free_bytes": 0, "free_inodes": 900}]}, "disk-full", "U6"),
    ({"exit": {"exit_code": None, "signal": "SIGKILL"}, "kernel_readable": True, "oom_kills_at_launch": 0,
      "oom_kills_now": 0}, "killed-by-signal", "U3"),
    ({"exit": {"exit_code": 0, "signal": None}}, "completed", None),
    ({"exit": {"exit_code": 1, "signal": None}}, "failed-exit", None),
])
def test_a_verdict_names_the_gotcha_it_is_an_instance_of(ev, verdict_, gotcha):
    """Issue 41: the ladder cited no catalog ids; each verdict that is a catalog entry now names it,
    and one that is not (a plain exit 1) names none."""
    v = verdict.decide(ev)
    assert (v["verdict"], v["gotcha"]) == (verdict_, gotcha)
    said = verdict.gotcha_advice(v)
    assert said == ([f"The catalog's entry: gpuops gotcha {gotcha.replace(', ', ' / ')}."] if gotcha else [])


def test_an_earlier_attempt_reads_in_words_with_its_class_after_them():
    """Issue 34: diagnose's evidence said 'attempt 1 ... ended hang' for a one-process run."""
    from gpuops.jobs import rows

    lines = rows.earlier_attempts([{"job": "J1", "attempt": 1, "class": "hang", "step": 25, "retry": True,
                                    "why": "no progress for the --stall-after limit: gpuops stopped it"},
                                   {"job": "J2", "attempt": 2, "class": "hang", "why": "x"}], "J2")
    assert lines == ["run: attempt 1 (J1) ended at step 25: no progress for the --stall-after limit: gpuops "
                     "stopped it (class hang); retried"]
