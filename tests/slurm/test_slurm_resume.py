"""A run policy under Slurm (gpuops.onbox.engines.slurm_resume): a job that Slurm requeues (here
`scontrol requeue`, as a preemption or a node failure would) runs again from its newest complete
checkpoint, with the resume argument quoted into its command; a requeue past --max-retries runs
nothing more; status, wait and diagnose say the attempt and the checkpoint. Real Slurm, reached
through the login node's real sshd; the batch script's resume path also runs under a real bash
with no scheduler, and the pure rules on their own."""

import json
import subprocess

import pytest

from gpuops import onbox
from gpuops.engines import slurm as slurm_engine
from gpuops.engines import slurm_state
from gpuops.errors import UsageError
from gpuops.jobs import rows, runpolicy
from gpuops import states
from gpuops.onbox.run import runevents
from gpuops.onbox.engines import slurm_resume, slurm_script
from gpuops.ops import diagnose as diagnose_op
from gpuops.ops import jobs as op
from gpuops.ops import pause
from gpuops.ops import wait
from gpuops.render.jobs import run_line
from tests.jobs.helpers import wait_for
from tests.slurm.conftest import start_requeued

TRAIN = r"""exec python3 - "$@" <<'EOF'
import os, signal, sys, time
signal.signal(signal.SIGUSR1, lambda s, f: print("checkpoint asked", flush=True))  # gpuops pause's signal
ckpt = sys.argv[1]
step = int(sys.argv[sys.argv.index("--resume") + 1].rsplit("-", 1)[1]) if "--resume" in sys.argv else 0
print("start at step %d (restart %s)" % (step, os.environ.get("SLURM_RESTART_COUNT", "0")), flush=True)
while step < 40:
    step += 1
    print("step %d" % step, flush=True)
    if step % 5 == 0:
        os.makedirs(os.path.join(ckpt, ".tmp"), exist_ok=True)
        open(os.path.join(ckpt, ".tmp", "state"), "w").write(str(step))
        os.rename(os.path.join(ckpt, ".tmp"), os.path.join(ckpt, "step-%d" % step))
    time.sleep(0.2)
print("done at step %d" % step, flush=True)
EOF"""


def launched(box, jobs_dir, tmp_path, ckpt, **policy):
    script = tmp_path / "train.sh"
    script.write_text(TRAIN)
    doc = op.launch(box, command=f"bash {script} {ckpt}", engine="slurm", jobs_dir=str(jobs_dir),
                    workdir=str(tmp_path), policy=runpolicy.build(checkpoint_dir=str(ckpt), **policy))
    assert doc["ok"], doc["summary"]
    return doc, doc["data"]["job"]["job_id"], doc["data"]["meta"]["slurm_job_id"]


def requeue(slurm, slurm_id):
    """`scontrol requeue`, as a preemption or a node failure requeues a job, and its start."""
    slurm.run("scontrol", "requeue", slurm_id)
    start_requeued(slurm, slurm_id)


def test_a_requeued_job_resumes_from_its_newest_complete_checkpoint(box, slurm, jobs_dir, tmp_path):
    ckpt = tmp_path / "ckpt"
    doc, job, slurm_id = launched(box, jobs_dir, tmp_path, ckpt, max_retries="2",
                                  resume_arg="--resume {checkpoint}", max_runtime="10m")
    assert "--max-runtime is Slurm's --time=10 (minutes)" in " ".join(doc["advice"])
    assert "TimeLimit=00:10:00" in slurm.run("scontrol", "show", "job", slurm_id).stdout
    assert wait_for(lambda: (ckpt / "step-10").exists(), timeout=60), (jobs_dir / job / "log").read_text()
    # what a run that died mid-save leaves, and names a box must not hand to a command line: each
    # carries a later step than any the job wrote, so resuming from one of them would show
    (ckpt / "step-99.tmp").mkdir()
    (ckpt / "step-98.partial").write_text("half")
    (ckpt / "step-97\x1b[2J").mkdir()
    (ckpt / "step-96..x").mkdir()
    requeue(slurm, slurm_id)
    done = wait.wait(box, job=job, timeout_s=120, jobs_dir=str(jobs_dir))
    log = (jobs_dir / job / "log").read_text()
    assert done["data"]["state"] == states.COMPLETED, log + slurm.log_tail(25)
    assert wait_for(lambda: "done at step 40" in (jobs_dir / job / "log").read_text(), timeout=10)
    log = (jobs_dir / job / "log").read_text()
    first, _, second = log.partition("DUE TO JOB REQUEUE")
    saved = max(int(p.name.split("-")[1]) for p in ckpt.iterdir() if p.name.split("-")[1].isdigit() and
                int(p.name.split("-")[1]) <= int(first.rsplit("step ", 1)[1].split()[0]))
    said = f"[gpuops] requeued by Slurm (restart 1): attempt 2 of at most 3 resumes from checkpoint {ckpt}/step-"
    assert said in second, second
    resumed = int(second.split(said, 1)[1].split()[0])
    assert 10 <= resumed <= saved <= 40
    assert f"start at step {resumed} (restart 1)" in second and "done at step 40" in second
    assert "[gpuops] skipped checkpoint 'step-97\\x1b[2J': a control character in its name" in second
    assert "[gpuops] skipped checkpoint 'step-96..x': '..' in its name" in second
    assert "[gpuops] time limit lowered to 10 minutes" in second
    kinds = [e["kind"] for e in runevents.read(str(jobs_dir / job))]
    assert kinds == ["attempt-started", "checkpoint-skipped", "checkpoint-skipped", "resumed"]
    # status, wait and diagnose say the attempt and where it resumed from, in the envelope and in words
    path = f"{ckpt}/step-{resumed}"
    run = done["data"]["job"]["run"]
    assert (run["attempt"], run["of"], run["resumed_from"], run["ended"]) == (2, 3, path, True)
    row = op.status(box, job=job, jobs_dir=str(jobs_dir))
    assert row["data"]["jobs"][0]["run"]["resumed_from"] == path and row["data"]["jobs"][0]["restarts"] == 1
    assert f"[attempt 2/3 of run {job}, resumed from {path}]" in row["summary"]
    assert f"last event: resumed" in run_line(row["data"]["jobs"][0]["run"]) and path in run_line(run)
    found = diagnose_op.diagnose(box, job=job, jobs_dir=str(jobs_dir))
    assert found["data"]["run"]["resumed_from"] == path and f"resumed from {path}]" in found["summary"]


def test_a_requeue_past_max_retries_runs_nothing_more(box, slurm, jobs_dir, tmp_path):
    ckpt = tmp_path / "ckpt"
    _, job, slurm_id = launched(box, jobs_dir, tmp_path, ckpt, max_retries="0")
    assert wait_for(lambda: (ckpt / "step-5").exists(), timeout=60), (jobs_dir / job / "log").read_text()
    requeue(slurm, slurm_id)
    doc = wait.wait(box, job=job, timeout_s=120, jobs_dir=str(jobs_dir))
    row = doc["data"]["job"]
    assert row["state"] == states.FAILED, (jobs_dir / job / "log").read_text()
    said = "Slurm requeued the job: retry 1 is more than --max-retries 0; not running it again"
    assert row["reason"] == said and row["run"]["final"]["class"] == "gave-up"
    assert (row["run"]["attempt"], row["run"]["of"]) == (1, 1)
    # slurmstepd may hand the batch script's last output to the file after the job ended
    assert wait_for(lambda: (jobs_dir / job / "log").read_text().endswith(f"[gpuops] {said}\n"), timeout=10)
    assert "start at step" not in (jobs_dir / job / "log").read_text().split("DUE TO JOB REQUEUE")[1]


def test_a_pause_and_resume_is_no_retry_and_resumes_from_the_checkpoint(box, slurm, jobs_dir, tmp_path):
    ckpt = tmp_path / "ckpt"
    _, job, _ = launched(box, jobs_dir, tmp_path, ckpt, max_retries="0", resume_arg="--resume {checkpoint}")
    assert wait_for(lambda: (ckpt / "step-5").exists(), timeout=60), (jobs_dir / job / "log").read_text()
    paused = pause.pause(box, job=job, ckpt_regex="checkpoint asked", timeout_s=30, jobs_dir=str(jobs_dir))
    assert paused["ok"], paused["summary"]
    assert pause.resume(box, job=job, jobs_dir=str(jobs_dir))["ok"]
    done = wait.wait(box, job=job, timeout_s=120, jobs_dir=str(jobs_dir))
    log = (jobs_dir / job / "log").read_text()
    assert done["data"]["state"] == states.COMPLETED, log
    second = log.partition("DUE TO JOB REQUEUE")[2]
    assert "[gpuops] requeued by Slurm (restart 1): attempt 1 of at most 1 resumes from checkpoint" in second, second
    assert done["data"]["job"]["run"]["attempt"] == 1


# ---------------------------------------------------------------- the pure parts, and bash


def test_every_policy_field_holds_under_slurm_and_only_one_that_needs_watching_ships_the_watcher():
    watched = dict(retry_on="nccl-timeout", keep_checkpoints="3", checkpoint_dir="c", stall_after="1m", notify="cat")
    slurm_engine.ENGINE.check_policy(runpolicy.build(**watched))
    for field in ("retry_on", "keep_checkpoints", "stall_after", "notify"):
        asked = dict((k, watched[k]) for k in (field, "checkpoint_dir"))
        opts, _ = submitted(runpolicy.build(**asked))
        assert "slurm_watch" in opts["watch_helper"] and "slurm_resume" in opts["resume_helper"], field
    plain, _ = submitted(runpolicy.build(max_retries="3", checkpoint_dir="c:step-*", resume_arg="--resume {checkpoint}",
                                         max_runtime="4h"))
    assert "watch_helper" not in plain and plain["resume_helper"]


def submitted(policy, given=None):
    opts = {"kind": "cmd", "command": "true"}
    slurm_engine.ENGINE.submission(opts, dict(given or {}, partition="debug"))
    return opts, slurm_engine.ENGINE.with_policy(opts, policy, dict(given or {}))


def test_max_runtime_is_slurms_time_in_whole_minutes_and_a_time_that_says_otherwise_is_refused():
    opts, said = submitted(runpolicy.build(max_runtime="90s"))
    assert "--time=2" in opts["sbatch_options"] and "--partition=debug" in opts["sbatch_options"]
    assert opts["resources"]["time"] == "2" and "Slurm's --time=2 (minutes)" in said[0]
    assert "resume_helper" in opts and opts["policy"]["max_runtime_s"] == 90
    opts, _ = submitted(runpolicy.build(max_runtime="4h"), {"time": "4:00:00"})  # the same limit, said twice
    assert "--time=240" in opts["sbatch_options"]
    with pytest.raises(UsageError, match=r"--max-runtime 14400s is this Slurm job's --time \(240 minutes"):
        submitted(runpolicy.build(max_runtime="4h"), {"time": "30"})
    opts, said = submitted(runpolicy.build(max_retries="1"), {"time": "30"})
    assert "--time=30" in opts["sbatch_options"] and said == []


def start(at, retry, kind="attempt-started"):
    return {"kind": kind, "at": at, "retry": retry, "attempt": retry + 1}


def test_a_requeue_by_gpuops_pause_is_no_retry_and_a_requeue_by_the_scheduler_is():
    assert slurm_resume.retries_used(0, None, None) == 0
    assert slurm_resume.retries_used(1, start(100, 0), None) == 1
    assert slurm_resume.retries_used(1, start(100, 0), {"held_at": 150.0}) == 0  # paused after that start
    assert slurm_resume.retries_used(2, start(200, 1), {"held_at": 150.0}) == 2  # an older pause
    assert slurm_resume.retries_used(3, None, None) == 3  # no record of the start before: each counts


def test_past_max_retries_gives_up_and_a_spent_max_runtime_times_out():
    policy = {"max_retries": 1, "max_runtime_s": 600}
    d = slurm_resume.decide(1, policy, [start(1000, 0)], None, now=1100)
    assert (d["attempt"], d["end"], round(d["time_left_s"])) == (2, None, 500)
    d = slurm_resume.decide(2, policy, [start(1000, 0), start(1100, 1)], None, now=1200)
    assert d["end"] == "gave-up" and "retry 2 is more than --max-retries 1" in d["why"]
    d = slurm_resume.decide(1, policy, [start(1000, 0)], None, now=1700)
    assert d["end"] == "timed-out" and "--max-runtime of 600s was spent" in d["why"]
    assert slurm_resume.decide(0, policy, [], None, now=5)["time_left_s"] == 600  # the first start: Slurm's --time
    assert [slurm_resume.slurm_minutes(s) for s in (1, 60, 61, 14400)] == [1, 1, 2, 240]


def test_status_says_the_attempt_the_checkpoint_and_what_ended_a_run(tmp_path):
    meta = {"job_id": "j1", "policy": {"max_retries": 2}}
    running = {"known": True, "job": {"JobState": "RUNNING"}}
    assert slurm_resume.run_facts("j1", str(tmp_path), {"job_id": "j1"}, running) is None
    events = runevents.Events(str(tmp_path), run="j1")
    events.emit("attempt-started", attempt=1, job="j1", restart=0, retry=0)
    events.emit("resumed", attempt=2, job="j1", restart=1, retry=1, checkpoint="/c/step-5")
    events.emit("attempt-started", attempt=2, job="j1", checkpoint="/c/step-5")  # the watcher's, no retry counted
    run = slurm_resume.run_facts("j1", str(tmp_path), meta, running)
    assert (run["attempt"], run["max_attempts"], run["resumed_from"], run["ended"], run["final"]) == \
        (2, 3, "/c/step-5", False, None)
    events.emit("timed-out", attempt=3, job="j1", restart=2, retry=2, why="the run's --max-runtime of 60s was spent")
    run = slurm_resume.run_facts("j1", str(tmp_path), meta, {"known": False})
    assert run["ended"] and run["final"]["class"] == "timed-out" and run["attempt"] == 2
    failed = {"scheduler": {"known": True, "job": {"JobState": "FAILED", "ExitCode": "4:0"}}, "run": run}
    row = slurm_state.row_of({}, failed, {"slurm_job_id": "7"})
    assert (row["state"], row["reason"], row["exit_code"]) == (states.TIMEOUT, run["final"]["why"], None)
    tag = rows.run_tag({"attempt": 2, "of": 3, "id": "j1", "resumed_from": "/c/step-5"})
    assert tag == " [attempt 2/3 of run j1, resumed from /c/step-5]"


def batch(tmp_path, restart, policy, kind="cmd", body=None, args=()):
    """Run the batch script of a job under `policy` as Slurm's `restart`th start would, with no
    scheduler: (exit code, stdout, stderr)."""
    jdir = tmp_path / "job"
    jdir.mkdir(exist_ok=True)
    show = "import os, sys; print(sys.argv[1:]); print(os.environ.get('GPUOPS_RESUME_FROM'))"
    (jdir / "cmd").write_text(body or f"python3 -c {json.dumps(show)} a\n")
    (jdir / "cmd").chmod(0o700)
    (jdir / "resume.py").write_bytes(onbox.script("slurm_resume"))
    (jdir / "meta.json").write_text(json.dumps({"job_id": "j", "kind": kind, "args": list(args), "command": "c",
                                                "policy": policy}))
    (jdir / "batch.sh").write_text(slurm_script.render({"job_id": "j", "job_dir": str(jdir), "kind": kind,
                                                        "args": list(args), "resume": True}))
    done = subprocess.run(["bash", str(jdir / "batch.sh")], capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "SLURM_RESTART_COUNT": str(restart)}, timeout=60)
    return done.returncode, done.stdout, done.stderr


def test_a_checkpoint_name_reaches_the_command_as_one_quoted_word_never_through_a_shell(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for name in ("step-3", "step-7 $(touch pwned)", "step-9.tmp", "step-8\x07"):
        (ckpt / name).mkdir()
    # a glob: names no library writes are checkpoints only when the user says so
    policy = {"max_retries": 1, "checkpoint_dir": str(ckpt), "checkpoint_glob": "step-*",
              "resume_arg": "--resume={checkpoint}"}
    assert batch(tmp_path, 0, policy)[:2] == (0, "['a']\nNone\n")  # the first start resumes from nothing
    rc, out, err = batch(tmp_path, 1, policy)
    path = f"{ckpt}/step-7 $(touch pwned)"
    assert (rc, out) == (0, f"{['a', '--resume=' + path]}\n{path}\n"), err
    assert not (tmp_path / "pwned").exists()
    assert "[gpuops] skipped checkpoint 'step-8\\x07': a control character in its name" in err
    assert f"attempt 2 of at most 2 resumes from checkpoint {path}" in err
    rc, out, err = batch(tmp_path, 2, policy)
    assert (rc, out) == (slurm_resume.RETRIES_SPENT, "") and "more than --max-retries 1" in err
    kinds = [e["kind"] for e in runevents.read(str(tmp_path / "job"))]
    assert kinds == ["attempt-started", "checkpoint-skipped", "resumed", "gave-up"]


def test_a_script_job_gets_the_resume_words_as_arguments(tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "step-4 'q'").mkdir(parents=True)
    body = "#!/bin/bash\nprintf '<%s>\\n' \"$@\"\n"
    policy = {"max_retries": 3, "checkpoint_dir": str(ckpt), "checkpoint_glob": "step-*",
              "resume_arg": "--from {checkpoint} --strict"}
    rc, out, err = batch(tmp_path, 1, policy, kind="script", body=body, args=["x y"])
    assert (rc, out) == (0, f"<x y>\n<--from>\n<{ckpt}/step-4 'q'>\n<--strict>\n"), err
    rc, out, err = batch(tmp_path, 1, dict(policy, checkpoint_dir=str(tmp_path / "none")), kind="script",
                         body=body, args=["x y"])
    assert (rc, out) == (0, "<x y>\n") and "no complete checkpoint in" in err  # no stale resume.args
