"""The run policy's flags as a user gives them to `gpuops launch`, real sshd and real processes: a
policy that cannot work is exit 2 with nothing started, the run's id is what launch prints, and
every verb given that id speaks of the run's current attempt; --env and --secret-env reach every
attempt, the secret never on disk or in argv."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SECRET = "s3cr3t-run-Zq9"


def gpuops(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gpuops", *args], capture_output=True, text=True, timeout=180,
                          cwd=ROOT, env=env or os.environ.copy())


def doc_of(proc):
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("flags,said", [
    (["--checkpoint-dir", "ck", "--resume-arg", "--resume last.ckpt"], "--resume-arg must say where the checkpoint goes"),
    (["--stall-after", "10x"], "--stall-after takes a duration (90, 15s, 10m, 1h30m) from 1s to 366d, not '10x'"),
    (["--max-runtime", "-5"], "--max-runtime takes a duration"),
    (["--max-retries", "1000"], "--max-retries takes a whole number from 0 to 100, not '1000'"),
    (["--retry-on", "python-exception,bogus"], "--retry-on: 'bogus' is not a failure class"),
    (["--retry-on", "timeout"], "--retry-on: timeout is never retried"),
    (["--keep-checkpoints", "2"], "--resume-arg, --keep-checkpoints, --keep-best, --share-checkpoint-dir and"),
    (["--checkpoint-dir", "ck:..*"], "a checkpoint glob matches names in the checkpoint directory"),
    (["--checkpoint-dir", "/etc/hostname/ckpt"], "the job cannot write checkpoints there (/etc/hostname is not a "
                                                 "directory)"),
])
def test_a_policy_that_cannot_work_is_exit_2_before_anything_starts(jobs_box, jobs_dir, flags, said):
    p = gpuops("launch", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--cmd", "touch started", *flags)
    assert p.returncode == 2 and said in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not list(jobs_dir.glob("*/cmd")), "nothing was started"


def test_launch_prints_the_runs_id_and_every_verb_follows_it_to_the_current_attempt(jobs_box, jobs_dir, tmp_path):
    env = dict(os.environ, TRAIN_TOKEN=SECRET)
    marker, expect = tmp_path / "failed-once", tmp_path / "expect"
    expect.write_text(SECRET)  # the job compares against a file the test wrote: the command holds no secret
    cmd = (f'echo "attempt $GPUOPS_ATTEMPT of $GPUOPS_RUN_ID: $LR $([ "$TRAIN_TOKEN" = "$(cat {expect})" ] && '
           f'echo token-ok)"; if [ -e {marker} ]; then echo fine; else touch {marker}; kill -9 $$; fi')
    where = ["--host", jobs_box.spec, "--jobs-dir", str(jobs_dir)]
    p = gpuops("launch", *where, "--cmd", cmd, "--max-retries", "2", "--env", "LR=3e-4", "--secret-env",
               "TRAIN_TOKEN", "--json", env=env)
    launched = doc_of(p)
    run = launched["data"]["job"]["job_id"]
    assert launched["data"]["meta"]["run"] == {"id": run, "attempt": 1}
    assert f"run {run}, up to 2 retries" in launched["summary"]
    waited = doc_of(gpuops("wait", *where, "--job", run, "--timeout", "1m", "--json"))
    assert waited["data"]["state"] == "COMPLETED", waited["summary"]
    second = waited["data"]["job"]["job_id"]  # the attempt that completed; the answer names the run
    assert waited["data"]["job_id"] == run and second != run and waited["data"]["job"]["run"]["attempt"] == 2
    shown = gpuops("status", *where, "--job", run)
    assert f"attempt 2/3 of run {run}; last event: completed" in shown.stdout, shown.stdout
    logs = gpuops("logs", *where, "--job", run)
    assert logs.stdout.splitlines()[1:] == [f"attempt 2 of {run}: 3e-4 token-ok", "fine"], logs.stdout
    first = (jobs_dir / run / "log").read_text()
    assert first == f"attempt 1 of {run}: 3e-4 token-ok\n"  # --env and the secret reached both attempts
    assert gpuops("logs", *where, "--job", run, "--attempt", "1", "--raw").stdout == first
    assert f"attempt 1 {run}: KILLED SIGKILL" in gpuops("status", *where, "--all").stdout
    rows = doc_of(gpuops("status", *where, "--all", "--json"))["data"]["jobs"]
    assert [(r["job_id"], [e["job_id"] for e in r["earlier"]]) for r in rows] == [(second, [run])], rows
    diagnosed = doc_of(gpuops("diagnose", *where, "--job", run, "--json"))
    assert diagnosed["data"]["job"] == second
    # ...and it speaks of the attempt that failed, as its supervisor judged it
    # (in words, the class after them: "ended hang" read as jargon, issue 34)
    assert [e for e in diagnosed["data"]["evidence"] if e.startswith(f"run: attempt 1 ({run}) ended")
            and e.endswith("(class unknown-death); retried")], diagnosed["data"]["evidence"]
    for path in jobs_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), f"the secret is in {path}"


@pytest.mark.parametrize("cmd,said", [
    ("python3 train.py  # sweep", "it ends in a comment"),
    ("python3 train.py | tee out.log", "it has a pipe"),
])
def test_a_resume_arg_appended_where_it_would_miss_the_program_is_exit_2(jobs_box, jobs_dir, cmd, said):
    """Issue 34: appended to `... # sweep` or `... | tee out.log`, the resume argument never reached
    the trainer, and every retry started from step 1."""
    p = gpuops("launch", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--cmd", cmd, "--checkpoint-dir", "ck",
               "--resume-arg", "--resume {checkpoint}")
    assert p.returncode == 2 and said in p.stderr and "Put {checkpoint} in --cmd" in p.stderr, p.stderr
    assert not list(jobs_dir.glob("*/cmd")), "nothing was started"


def test_a_second_run_on_a_live_runs_checkpoint_directory_is_exit_2_unless_both_share(jobs_box, jobs_dir, tmp_path):
    """Issue 34: two runs on one checkpoint directory resumed from and pruned each other's checkpoints."""
    where = ["--host", jobs_box.spec, "--jobs-dir", str(jobs_dir)]
    ck = str(tmp_path / "ck")

    def launch(*extra):
        return gpuops("launch", *where, "--cmd", "sleep 600", "--checkpoint-dir", ck, "--keep-checkpoints", "2",
                      *extra, "--json")

    first = doc_of(launch())["data"]["job"]["job_id"]
    p = launch("--share-checkpoint-dir")
    assert p.returncode == 2 and f"run {first} is using {ck}" in p.stdout, p.stdout  # the --json envelope
    assert len(list(jobs_dir.glob("*/cmd"))) == 1
    assert gpuops("stop", *where, "--job", first, "--yes").returncode == 0
    shared = doc_of(launch("--share-checkpoint-dir"))["data"]["job"]["job_id"]
    assert launch("--share-checkpoint-dir").returncode == 0, "both said they share"
    assert shared != first
