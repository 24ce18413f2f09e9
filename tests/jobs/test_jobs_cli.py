"""The job verbs as a user runs them: `gpuops` and `inv`, real sshd, real processes."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.jobs.helpers import meta_of, wait_for

SECRET = "s3cr3t-Zq9-VALUE"


def run(*args, env=None, prog=("-m", "gpuops"), timeout=60):
    return subprocess.run([sys.executable, *prog, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env or os.environ.copy())


def inv(*args, **kw):
    return run(*args, prog=("-m", "invoke", "--search-root", str(ROOT)), **kw)


def j(proc):
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def test_secret_reaches_the_job_but_no_argv_file_or_output(jobs_box, jobs_dir):
    env = dict(os.environ, TRAIN_TOKEN=SECRET)
    cmd = 'test "$TRAIN_TOKEN" = "$(cat "$GPUOPS_JOB_DIR/../expect")" && echo token-ok; sleep 2'
    jobs_dir.mkdir()
    (jobs_dir / "expect").write_text(SECRET)  # the job compares against a file the test wrote
    p = run("launch", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--cmd", cmd,
            "--secret-env", "TRAIN_TOKEN", "--json", env=env)
    assert p.returncode == 0, p.stderr
    job = j(p)["data"]["job"]["job_id"]
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    (jobs_dir / "expect").unlink()
    status = run("status", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--job", job, "--json", env=env)
    assert wait_for(lambda: "token-ok" in (jobs_dir / job / "log").read_text(), timeout=5)
    assert meta_of(jobs_dir, job)["secret_env_names"] == ["TRAIN_TOKEN"]
    for f in (jobs_dir / job).iterdir():
        assert SECRET.encode() not in f.read_bytes(), f"secret found in {f.name}"
        assert f.stat().st_mode & 0o077 == 0, f"{f.name} is readable by others"
    for text in (ps, p.stdout, p.stderr, status.stdout, status.stderr, jobs_box.log.read_text(errors="replace")):
        assert SECRET not in text
    missing = run("launch", "--host", jobs_box.spec, "--cmd", "true", "--secret-env", "NOT_SET_ANYWHERE")
    assert missing.returncode == 2 and "NOT_SET_ANYWHERE is not set" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_names_and_commands_run_exactly_as_given(jobs_box, jobs_dir):
    name = "it's \"quoted\" $(whoami) `id` ünïcødé  two  spaces"
    cmd = ("printf '[%s]' \"a  b\" 'it'\"'\"'s' \"$(echo sub shell)\" ünïcødé '$HOME' \"tab\there\"; "
           "echo; echo \"$0\" | grep -c cmd")
    expected = subprocess.run(["bash", "-c", cmd.replace('"$0"', "cmd")], capture_output=True, text=True).stdout
    p = run("launch", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--cmd", cmd, "--name", name, "--json")
    assert p.returncode == 0, p.stderr
    job = j(p)["data"]["job"]["job_id"]
    meta = meta_of(jobs_dir, job)
    assert meta["name"] == name and meta["command"] == cmd
    assert (jobs_dir / job / "cmd").read_text() == cmd + "\n"
    assert wait_for(lambda: (jobs_dir / job / "exit.json").exists())
    assert (jobs_dir / job / "log").read_text() == expected
    by_name = j(run("status", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--job", name, "--json"))
    assert by_name["data"]["jobs"][0]["job_id"] == job


def test_session_launch_drop_status_follow_stop_from_gpuops_and_inv(jobs_box, jobs_dir):
    common = ("--host", jobs_box.spec, "--jobs-dir", str(jobs_dir))
    p = run("launch", *common, "--name", "demo", "--label", "exp=a",
            "--cmd", "i=0; while :; do i=$((i+1)); echo \"completed step: $i\"; sleep 0.2; done")
    assert p.returncode == 0 and "started" in p.stdout, p.stderr
    job = next(p.name for p in jobs_dir.iterdir() if (p / "meta.json").exists())
    jobs_box.kill_session_children()
    listed = inv("status", *common, "--label", "exp=a", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = j(listed)["data"]["jobs"]
    assert [(r["job_id"], r["state"]) for r in rows] == [(job, "RUNNING")]
    assert j(inv("status", *common, "--label", "exp=b", "--json"))["data"]["jobs"] == []
    tail = run("logs", *common, "--job", "demo", "--tail", "2")
    assert tail.returncode == 0 and tail.stdout.count("\n") == 2 and tail.stderr == ""  # a page says nothing more
    follower = subprocess.Popen([sys.executable, "-m", "gpuops", "logs", *common, "--job", job, "--follow"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert follower.stdout.readline().startswith("completed step:")  # streaming has begun
        stopped = run("stop", *common, "--job", job, "--grace", "2", "--yes")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
        out, err = follower.communicate(timeout=20)
    finally:
        follower.kill()
    assert out.endswith("\n") and "completed step:" in out and follower.returncode == 1
    assert re.search(r"^gpuops: demo KILLED \(SIGTERM\) after \d+s$", err, re.M) and "offset" not in err, err
    final = run("status", *common, "--job", job, "--json")
    assert final.returncode == 1 and j(final)["data"]["jobs"][0]["signal"] == "SIGTERM"


def test_unreachable_host_is_reported_as_such_never_dead(rig, jobs_box, jobs_dir, tmp_path):
    env = dict(os.environ, GPUOPS_STATE_DIR=str(tmp_path / "state"))
    common = ("--jobs-dir", str(jobs_dir))
    p = run("launch", "--host", jobs_box.spec, *common, "--cmd", "sleep 30", "--key", "k-unreach", env=env)
    assert p.returncode == 0, p.stderr
    assert run("status", "--host", jobs_box.spec, *common, "--job", "k-unreach", env=env).returncode == 0
    jobs_box.stop()  # the box stops answering; the job itself is untouched
    try:
        p = run("status", "--host", jobs_box.spec, *common, "--job", "k-unreach", "--json", env=env)
        human = run("status", "--host", jobs_box.spec, *common, "--job", "k-unreach", env=env)
    finally:
        jobs_box.start()
    doc = j(p)
    assert p.returncode == 3 and human.returncode == 3
    row = doc["data"]["jobs"][0]
    assert row["state"] == "UNREACHABLE" and "says nothing about the job" in row["hint"]
    assert "last seen RUNNING" in human.stderr and human.stderr.count("\n") == 1


def test_usage_errors_are_one_line_with_exit_2(jobs_box, tmp_path):
    crlf = tmp_path / "win.sh"
    crlf.write_bytes(b"echo hi\r\n")
    for args in (("launch", "--cmd", "x", "--script", "y"), ("launch",), ("launch", "--cmd", "x", "--env", "1=2"),
                 ("launch", "--script", str(crlf)), ("logs",), ("status", "--progress-regex", "(")):
        p = run(*args, "--host", jobs_box.spec)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_script_is_copied_and_its_shebang_honoured(jobs_box, jobs_dir, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("#!/usr/bin/env python3\nimport os, sys\n"
                      "print('py', sys.argv[1:], os.environ['PYTHONUNBUFFERED'], os.getcwd())\n")
    p = run("launch", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--script", str(script),
            "--workdir", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    job = j(p)["data"]["job"]["job_id"]
    script.write_text("print('edited after launch')\n")  # the box keeps its own immutable copy
    assert wait_for(lambda: (jobs_dir / job / "exit.json").exists())
    assert (jobs_dir / job / "log").read_text() == f"py [] 1 {tmp_path}\n"
    assert Path(jobs_dir / job / "cmd").stat().st_mode & 0o777 == 0o500
