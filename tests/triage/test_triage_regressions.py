"""The five wrong verdicts issue 16 reported, each reproduced as it was seen."""

import json
import os

import pytest

from gpuops.onbox.triage.logtriage import classify_bytes

STEP_CASCADE = b"""[2025-03-02 10:00:00] srun --kill-on-bad-exit=1 python train.py
1: Traceback (most recent call last):
1:   File "/workspace/train.py", line 88, in <module>
1: ValueError: batch 4412 has no labels
srun: error: gpu-a02: task 1: Exited with exit code 1
srun: Terminating StepId=5120.0
slurmstepd: error: *** STEP 5120.0 ON gpu-a01 CANCELLED AT 2025-03-02T10:14:07 ***
srun: error: gpu-a01: task 0: Exited with exit code 143
srun: error: gpu-a03: task 2: Exited with exit code 143
srun: error: gpu-a04: task 3: Exited with exit code 143
"""


def test_completed_job_whose_exit_record_holds_no_code_is_not_failed():
    """`gpuops launch --cmd 'echo hi'`, then `triage --host H --job ID`: the exit record reached the
    classifier as exit None, which the status table read as a non-zero exit: failed, exit 1."""
    data = classify_bytes(b"hi\n", exit_record={"exit_code": None, "signal": None}, slurm_state="COMPLETED")
    assert (data["status"], data["primary"]) == ("completed", None)
    # A record that does hold a code still decides alone.
    assert classify_bytes(b"hi\n", exit_record={"exit_code": 0, "signal": None})["status"] == "completed"
    assert classify_bytes(b"hi\n", exit_record={"exit_code": 2, "signal": None})["status"] == "failed"


def test_a_job_summary_status_in_terminal_colours_is_still_the_summary():
    """A harness that colours its summary with tput: `Status: ` followed by an escape sequence was
    not recognised, and a completed run became unknown-death."""
    for line in (b"Status: \x1b[1;32mSUCCESS\x1b[0m (exit 0)", b"\x1b[32mStatus:\x1b[0m \x1b[1mSUCCESS\x1b[0m",
                 b"\x1b[1;31mStatus: FAILED\x1b[0m (exit 3)"):
        log = b"\x1b[1m========== JOB SUMMARY ==========\x1b[0m\n" + line + b"\n"
        data = classify_bytes(log)
        assert data["status"] == ("failed" if b"FAILED" in line else "completed"), line
        assert "unknown-death" not in data["also"]


def test_srun_kill_on_bad_exit_step_cancel_is_a_cascade_not_a_cancel():
    """srun --kill-on-bad-exit ends the other tasks after one failed and slurmstepd prints
    `*** STEP ... CANCELLED AT ...`: that was reported as `cancelled` beside the real failure."""
    data = classify_bytes(STEP_CASCADE)
    assert (data["status"], data["primary"]) == ("failed", "python-exception")
    assert "cancelled" not in data["also"]
    # The same line with no failure before it is a cancel.
    alone = b"slurmstepd: error: *** STEP 5120.0 ON gpu-a01 CANCELLED AT 2025-03-02T10:14:07 ***\n"
    assert classify_bytes(alone)["status"] == "cancelled"


def test_a_stage_failed_banner_is_stage_fail_in_the_stage_that_failed():
    """`== <Stage> FAILED (exit=N ...) ==` lines gave no stage-fail (lower-case or coloured stage
    names) and the stage reported was an earlier one than the one that failed."""
    log = (b"[2025-03-02 10:00:00] == Preflight START\n[2025-03-02 10:00:20] == Preflight OK\n"
           b"[2025-03-02 10:00:21] == Docker pull START\n"
           b"Traceback (most recent call last):\nValueError: manifest for image:tag is not a list\n"
           b"[2025-03-02 10:01:00] == Docker pull FAILED (exit=3, after 39s) ==\n")
    data = classify_bytes(log)
    assert (data["status"], data["stage"]) == ("failed", "Docker pull")
    assert "stage-fail" in [data["primary"]] + data["also"]
    for banner in (b"== checkpoint upload FAILED (exit=2 after 10s) ==", b"\x1b[31m== Eval FAILED (exit=1) ==\x1b[0m"):
        data = classify_bytes(b"[2025-03-02 10:00:00] == Training OK\n" + banner + b"\n")
        assert (data["status"], data["primary"]) == ("failed", "stage-fail"), banner
        assert data["stage"] in ("checkpoint upload", "Eval")


def test_a_leading_number_in_a_log_name_is_not_a_slurm_id(cli, tmp_path):
    """`triage --log 01-train.log` asked `scontrol show job 01`: on a login node an unrelated job's
    state could decide the status. Only the harness's and sbatch's own names carry an id."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "asked"
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {asked}\necho "JobId=$4 JobState=RUNNING"\n')
    (bin_dir / "scontrol").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    (tmp_path / "7877-train.log").write_bytes(b"starting\n")
    proc = cli("triage", "--log", str(tmp_path / "7877-train.log"), "--json", env=env)
    assert not asked.exists() and json.loads(proc.stdout)["data"]["status"] == "unknown"
    (tmp_path / "slurm-7990.out").write_bytes(b"starting\n")
    proc = cli("triage", "--log", str(tmp_path / "slurm-7990.out"), "--json", env=env)
    assert asked.read_text().split() == ["show", "job", "7990"]
    assert json.loads(proc.stdout)["data"]["status"] == "running"


@pytest.mark.parametrize("ended_by,primary", [("stall", "hang"), ("max-runtime", "timeout")])
def test_an_attempt_its_run_ended_is_read_as_the_runs_reason_not_a_cancel(ended_by, primary):
    # Found on a --stall-after run: the supervisor's own SIGTERM was read as someone cancelling it.
    record = {"exit_code": None, "signal": "SIGTERM", "ended_by": ended_by}
    data = classify_bytes(b"step 1/1000 loss 1.0\n", exit_record=record)
    assert (data["status"], data["primary"]) == ("failed", primary)
    plain = classify_bytes(b"step 1/1000 loss 1.0\n", exit_record={"exit_code": None, "signal": "SIGTERM"})
    assert plain["status"] == "cancelled"
