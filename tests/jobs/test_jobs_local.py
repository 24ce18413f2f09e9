"""The on-box pieces on this machine (no SSH): thread caps from the cgroup quota, record shapes,
spawn failures, and the growth samples that date progress lines."""

import json
import os

import pytest

from gpuops import errors
from gpuops.ops import joblogs, jobs as op
from gpuops.remote.local import LocalTarget
from tests.conftest import FIXTURES
from tests.jobs.helpers import kill_everything, meta_of, wait_for

QUOTA_ROOT = FIXTURES / "jobs" / "cgroup-quota"


@pytest.fixture
def local_jobs(tmp_path):
    d = tmp_path / "jobs"
    yield d
    kill_everything(d)


def test_thread_caps_default_to_the_cgroup_cpu_quota(monkeypatch, local_jobs):
    monkeypatch.setenv("GPUOPS_ROOT", str(QUOTA_ROOT))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    t = LocalTarget()
    doc = op.launch(t, command='echo "$OMP_NUM_THREADS $MKL_NUM_THREADS"', jobs_dir=str(local_jobs))
    job = doc["data"]["job"]["job_id"]
    meta = meta_of(local_jobs, job)
    assert meta["thread_caps"] == {"values": {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
                                   "cgroup_quota_cores": 2.5}
    assert meta["oom_kills_at_launch"] == 2
    # a value the user set wins over the cap
    doc2 = op.launch(t, command='echo "$OMP_NUM_THREADS $MKL_NUM_THREADS"', env={"OMP_NUM_THREADS": "8"},
                     jobs_dir=str(local_jobs))
    job2 = doc2["data"]["job"]["job_id"]
    assert wait_for(lambda: (local_jobs / job / "exit.json").exists() and (local_jobs / job2 / "exit.json").exists())
    assert (local_jobs / job / "log").read_text() == "2 2\n"
    assert (local_jobs / job2 / "log").read_text() == "8 2\n"


def test_records_have_the_documented_fields_and_private_modes(local_jobs):
    doc = op.launch(LocalTarget(), command="echo hi; exit 5", name="shape", labels={"k": "v"}, key="K1",
                    jobs_dir=str(local_jobs))
    job = doc["data"]["job"]["job_id"]
    d = local_jobs / job
    assert wait_for(lambda: (d / "exit.json").exists())
    meta = json.loads((d / "meta.json").read_text())
    for field in ("job_id", "name", "labels", "command", "workdir", "env_names", "host", "launched_at", "pid",
                  "pgid", "start_ticks", "boot_id", "oom_kills_at_launch", "parent_job_id", "key", "log"):
        assert field in meta, field
    assert meta["log"] == str(d / "log") and meta["key"] == "K1" and meta["labels"] == {"k": "v"}
    exit_rec = json.loads((d / "exit.json").read_text())
    assert exit_rec["exit_code"] == 5 and exit_rec["signal"] is None and exit_rec["ended_at"] >= meta["launched_at"]
    assert os.stat(local_jobs).st_mode & 0o777 == 0o700 and os.stat(d).st_mode & 0o777 == 0o700
    assert not list(d.glob("*.tmp.*")), "atomic writes leave no temp files behind"
    samples = [line.split() for line in (d / "growth").read_text().splitlines()]
    assert samples and int(samples[-1][1]) == (d / "log").stat().st_size


def test_missing_workdir_is_a_usage_error_and_starts_nothing(local_jobs):
    with pytest.raises(errors.UsageError):
        op.launch(LocalTarget(), command="true", workdir="/no/such/dir", jobs_dir=str(local_jobs))
    assert not list(local_jobs.glob("*/cmd"))


def test_missing_script_interpreter_is_refused_before_anything_starts(local_jobs, tmp_path):
    script = tmp_path / "bad.sh"
    script.write_text("#!/usr/bin/env no-such-interpreter-xyz\necho never\n")
    with pytest.raises(errors.UsageError) as e:
        op.launch(LocalTarget(), script=str(script), jobs_dir=str(local_jobs))
    assert "no-such-interpreter-xyz" in e.value.message
    assert not list(local_jobs.glob("*/cmd"))


def test_a_job_that_cannot_be_spawned_is_recorded_as_failed_127(local_jobs):
    from gpuops.onbox.host import jobrecord
    from gpuops.onbox.run import wrapper

    d = local_jobs / "20200101-000000-000000"
    d.mkdir(parents=True)
    meta = wrapper.start(str(d), ["/no/such/program"], dict(os.environ), "/", {"job_id": d.name})
    assert meta["pid"] is None and "No such file" in meta["spawn_error"]
    assert jobrecord.read_json(str(d / "exit.json"))["exit_code"] == 127
    row = op.status(LocalTarget(), job=d.name, jobs_dir=str(local_jobs))["data"]["jobs"][0]
    assert (row["state"], row["exit_code"]) == ("FAILED", 127) and "No such file" in row["reason"]


def test_logs_page_from_an_offset_and_save_resumes(local_jobs, tmp_path):
    t = LocalTarget()
    job = op.launch(t, command="printf 'a%.0s' $(seq 1 3000); echo; echo end", jobs_dir=str(local_jobs))[
        "data"]["job"]["job_id"]
    assert wait_for(lambda: (local_jobs / job / "exit.json").exists())
    log = (local_jobs / job / "log").read_bytes()
    page = joblogs.logs(t, job=job, from_offset=2990, jobs_dir=str(local_jobs))
    assert page["data"]["text"].encode() == log[2990:] and page["data"]["next_offset"] == len(log)
    save = tmp_path / "saved"
    (save / job).mkdir(parents=True)
    (save / job / "log").write_bytes(log[:1000])  # an earlier, interrupted copy
    doc = joblogs.logs(t, job=job, save=str(save), jobs_dir=str(local_jobs))
    assert (save / job / "log").read_bytes() == log
    assert json.loads((save / job / "meta.json").read_text())["job_id"] == job
    assert (save / job / "exit.json").exists() and doc["data"]["start_offset"] == 1000


def test_cancelled_queue_starts_no_further_line_and_resumes_when_sent_again(local_jobs, tmp_path):
    t = LocalTarget()
    go = tmp_path / "go"
    content = f"while [ ! -e {go} ]; do sleep 0.05; done\necho second\n"
    op.queue(t, name="cq", content=content, jobs_dir=str(local_jobs))
    # the cancel comes while the first line runs (on a loaded machine the runner starts it a moment later)
    def first_runs():
        return op.queue(t, name="cq", jobs_dir=str(local_jobs))["data"]["entries"][0]["state"] == "RUNNING"

    assert wait_for(first_runs)
    doc = op.queue(t, name="cq", cancel=True, jobs_dir=str(local_jobs))
    assert doc["data"]["entries"][0]["state"] == "RUNNING"
    go.touch()
    done = wait_for(lambda: (d := op.queue(t, name="cq", jobs_dir=str(local_jobs))["data"])["done"] and d)
    assert done["done"]["cancelled"] and [e["state"] for e in done["entries"]] == ["COMPLETED", "PENDING"]
    resumed = op.queue(t, name="cq", content=content, wait=10, jobs_dir=str(local_jobs))
    assert resumed["ok"] and [e["state"] for e in resumed["data"]["entries"]] == ["COMPLETED", "COMPLETED"]


def test_unknown_job_or_queue_is_not_found(local_jobs):
    with pytest.raises(errors.NotFound):
        joblogs.logs(LocalTarget(), job="nope", jobs_dir=str(local_jobs))
    with pytest.raises(errors.NotFound):
        op.status(LocalTarget(), job="nope", jobs_dir=str(local_jobs))
    with pytest.raises(errors.NotFound):
        op.queue(LocalTarget(), name="nope", jobs_dir=str(local_jobs))


def _oldest_python3():
    import glob

    # a real interpreter, not a version-manager shim that may pick another version
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6")))
    system = [p for p in ("/usr/bin/python3.6", "/usr/local/bin/python3.6") if os.path.exists(p)]
    return next(iter(pyenv + system), None)


@pytest.mark.skipif(not _oldest_python3(), reason="no python3.6 on this machine to play an old box")
def test_the_on_box_side_runs_on_python_3_6(monkeypatch, local_jobs, tmp_path):
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").symlink_to(_oldest_python3())
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    t = LocalTarget()
    job = op.launch(t, command="echo completed step: 1; sleep 30", jobs_dir=str(local_jobs))["data"]["job"]["job_id"]
    wrapper_exe = os.readlink(f"/proc/{meta_of(local_jobs, job)['wrapper_pid']}/exe")
    assert "3.6" in wrapper_exe
    assert wait_for(lambda: joblogs.logs(t, job=job, jobs_dir=str(local_jobs))["data"]["text"] == "completed step: 1\n")
    assert op.stop(t, job=job, grace=1, yes=True, jobs_dir=str(local_jobs))["data"]["state"] == "KILLED"
    assert op.queue(t, name="old", content="echo a\n", wait=10, jobs_dir=str(local_jobs))["ok"]


def test_retry_asks_for_the_parents_secrets_again(local_jobs):
    t = LocalTarget()
    cmd = 'test "$TOK" = again && echo same-secret || echo other-secret'
    parent = op.launch(t, command=cmd, secrets={"TOK": "first"}, jobs_dir=str(local_jobs))["data"]["job"]["job_id"]
    assert wait_for(lambda: (local_jobs / parent / "exit.json").exists())
    with pytest.raises(errors.UsageError) as e:
        op.retry(t, job=parent, jobs_dir=str(local_jobs))
    assert "TOK" in e.value.message
    child = op.retry(t, job=parent, secrets={"TOK": "again"}, jobs_dir=str(local_jobs))["data"]["job"]["job_id"]
    assert wait_for(lambda: (local_jobs / child / "exit.json").exists())
    assert (local_jobs / child / "log").read_text() == "same-secret\n"
    assert meta_of(local_jobs, child)["secret_env_names"] == ["TOK"]


def test_a_log_bigger_than_one_answer_is_mirrored_and_followed_whole(monkeypatch, local_jobs, tmp_path):
    """The output cap that keeps a lying box from filling memory (remote.base.OUTPUT_BYTES) also
    cut the log stream: `logs --save` of an 80 MB log stopped at 64 MiB with exit 3. A stream is
    handed on as it comes and kept nowhere, so its size is the log's."""
    from gpuops.remote import base

    monkeypatch.setattr(base, "OUTPUT_BYTES", 1 << 20)
    t = LocalTarget()
    doc = op.launch(t, command="head -c 3145728 /dev/urandom | od -An -v -tx1 | head -c 3145728",
                    jobs_dir=str(local_jobs))
    job = doc["data"]["job"]["job_id"]
    assert wait_for(lambda: (local_jobs / job / "exit.json").exists())
    want = (local_jobs / job / "log").read_bytes()
    assert len(want) == 3 << 20

    saved = joblogs.logs(t, job=job, save=str(tmp_path / "save"), jobs_dir=str(local_jobs))
    assert saved["ok"], saved["summary"]
    assert (tmp_path / "save" / job / "log").read_bytes() == want

    got = bytearray()
    followed = joblogs.logs(t, job=job, follow=True, from_offset=0, sink=got.extend, jobs_dir=str(local_jobs))
    assert followed["ok"] and bytes(got) == want


def test_a_page_longer_than_asked_for_is_refused():
    """A page is bounded by what was asked, not by what the box chooses to send."""
    import struct

    def frame(kind, body):
        return kind + struct.pack(">I", len(body)) + body

    kept = bytearray()
    s = joblogs._Stream(kept.extend, "box", limit=100)
    s.on_chunk(frame(b"H", b'{"start": 0, "size": 1000}') + frame(b"D", b"x" * 100))
    assert bytes(kept) == b"x" * 100
    with pytest.raises(errors.BadAnswer, match="more than the 100 bytes"):
        s.on_chunk(frame(b"D", b"y"))
    assert len(kept) == 100


def _session_root(root, session, oom_kill):
    """A cgroup v2 view from inside SSH session `session` (systemd gives each its own scope)."""
    (root / "proc" / "self").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "self" / "mountinfo").write_text(
        "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n")
    (root / "proc" / "self" / "cgroup").write_text(f"0::/user.slice/user-0.slice/session-{session}.scope\n")
    scope = root / "sys" / "fs" / "cgroup" / "user.slice" / "user-0.slice" / f"session-{session}.scope"
    scope.mkdir(parents=True, exist_ok=True)
    (scope / "memory.events").write_text(f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {oom_kill}\n")
    (root / "sys" / "fs" / "cgroup" / "memory.events").write_text("oom 0\noom_kill 0\n")


def test_an_ended_jobs_oom_kills_are_read_from_the_cgroup_its_launch_recorded(monkeypatch, local_jobs, tmp_path):
    """The job's meta named no cgroup, so once its process was gone the counter of the session
    cgroup it ran (and was OOM-killed) in was never read: preflight from a new SSH session said ok."""
    from gpuops.onbox.host import cgroup

    root = tmp_path / "root"
    _session_root(root, 7, 0)
    monkeypatch.setenv("GPUOPS_ROOT", str(root))
    monkeypatch.setenv("GPUOPS_JOBS_DIR", str(local_jobs))
    doc = op.launch(LocalTarget(), command="exit 137", jobs_dir=str(local_jobs))
    job = doc["data"]["job"]["job_id"]
    assert wait_for(lambda: (local_jobs / job / "exit.json").exists())
    assert meta_of(local_jobs, job)["cgroups"] == {"": "/user.slice/user-0.slice/session-7.scope"}

    _session_root(root, 7, 1)   # the kernel counted the kill in the job's session cgroup...
    _session_root(root, 8, 0)   # ...and preflight now runs from a fresh session, which reads 0
    counters = cgroup.facts()["memory"]["oom_counters"]
    assert {"scope": "session", "oom_kills": 0} == {k: counters[0][k] for k in ("scope", "oom_kills")}
    [mine] = [c for c in counters if c["scope"] == "job"]
    assert mine["job_id"] == job and mine["oom_kills"] == 1
    assert mine["dir"].endswith("/user.slice/user-0.slice/session-7.scope")
