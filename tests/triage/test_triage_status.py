"""Status without a JOB SUMMARY, evidence on progress-bar lines, and advice by framework (issue 16)."""

from datetime import timedelta

import pytest

from gpuops.triage import classify_bytes, triage_file
from tests.triage.helpers import log, now_of, state_of
from tests.triage.test_triage_classify import T0, last_time, steps, text

BAR = b"\r 10%|#         | 10/100 [00:02<00:18,  5.00it/s]\r 20%|##        | 20/100 [00:04<00:16,  5.00it/s]"


def data_of(name):
    return triage_file(log(name), now=now_of(name), slurm_state=state_of(name)).data


@pytest.mark.parametrize("ending, status", [
    (b"[2025-03-02 10:03:10,200] [ERROR] [launch.py:325:sigkill_handler] ['python3', '-u', 'train.py'] "
     b"exits with return code = 1", "failed"),
    (b"run.sh: line 7:  5120 Aborted                 (core dumped) python train.py", "failed"),
    (b"slurmstepd: error: Detected 1 oom_kill event in StepId=4410.batch. Some of the step tasks have been "
     b"OOM Killed.", "failed"),
    (b"`Trainer.fit` stopped: `max_steps=21` reached.", "completed"),
    (b"slurmstepd: error: *** JOB 9 ON gpu-a01 CANCELLED AT 2025-03-02T10:01:00 DUE TO TIME LIMIT ***", "cancelled"),
])
def test_the_last_words_of_a_log_decide_its_status(ending, status):
    data = classify_bytes(text(steps(0, 20), ending), now=last_time(0, 20) + timedelta(hours=3))
    assert data["status"] == status


def test_steps_after_a_launcher_report_mean_the_run_went_on():
    """An elastic restart: the failure report is followed by training, which is what counts."""
    report = b"E0302 10:00:50.000000 4000 api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 4242) of binary: python3"
    log = text(steps(0, 20), report, steps(21, 40, start=last_time(0, 20)))
    data = classify_bytes(log, now=last_time(0, 40) + timedelta(seconds=30))
    assert (data["status"], data["primary"]) == ("running", None)
    assert data["also"] == ["subprocess-fail"]


def test_a_traceback_ending_the_log_of_a_job_slurm_still_runs_is_judged_by_the_steps():
    """One rank's traceback while Slurm still runs the job: the other ranks may be hung."""
    log = text(steps(0, 20), b"3: Traceback (most recent call last):", b"3: ValueError: bad batch")
    data = classify_bytes(log, now=last_time(0, 20) + timedelta(hours=2), slurm_state="RUNNING")
    assert data["status"] == "hanging"
    assert classify_bytes(log, now=last_time(0, 20) + timedelta(hours=2))["status"] == "failed"


def test_a_wandb_sync_after_a_crash_is_not_a_completion():
    assert (data_of("wandb_after_crash")["status"], data_of("wandb_completed")["status"]) == ("failed", "completed")


def test_unknown_only_when_the_log_does_not_say():
    """Steps that stop with nothing after them: no end in the log. A death is claimed only when
    something says the process ended (here, Slurm's state)."""
    log = text(steps(0, 20), b"[2025-03-02 10:00:45] saving samples")
    data = classify_bytes(log, now=last_time(0, 20) + timedelta(hours=3))
    assert (data["status"], data["primary"], data["also"]) == ("unknown", None, [])
    assert any(a.startswith("No end in the log") for a in data["advice"])
    ended = classify_bytes(log, now=last_time(0, 20) + timedelta(hours=3), slurm_state="COMPLETED")
    assert (ended["status"], ended["primary"]) == ("unknown", "unknown-death")


def test_evidence_on_a_progress_bar_line_is_the_segment_after_the_last_cr():
    """tqdm redraws one line after each CR: the evidence quoted the empty first segment."""
    data = classify_bytes(b"[2025-03-02 10:00:00] python train.py\n" + BAR + b"\n", now=T0 + timedelta(hours=5))
    assert data["status"] == "unknown"
    assert data["evidence"][-1]["text"] == " 20%|##        | 20/100 [00:04<00:16,  5.00it/s]"
    killed = classify_bytes(b"python train.py\n" + BAR + b"RuntimeError: DataLoader worker (pid 12345) is killed "
                                                         b"by signal: Killed.\n")
    assert killed["primary"] == "oom-host"
    assert killed["evidence"][0]["text"].startswith(" 20%|##") and killed["evidence"][0]["text"].endswith("Killed.")


@pytest.mark.parametrize("name, wanted, never", [
    ("torchrun_cuda_oom_advice", "expandable_segments:True", "remat_policy"),
    ("torch_oom_plain", "gradient accumulation", "XLA buffer"),
    ("oom_gpu", "remat_policy", "PYTORCH_CUDA_ALLOC_CONF"),
])
def test_gpu_oom_advice_follows_the_framework_the_log_shows(name, wanted, never):
    advice = " ".join(data_of(name)["advice"])
    assert wanted in advice and never not in advice



def test_a_keras_bar_finished_in_an_earlier_epoch_is_not_a_completion():
    """Every Keras epoch ends with its bar at N/N; only the one after `Epoch E/E` means fit()
    returned. A log that stops after epoch 2 of 3 does not say the run completed."""
    bar = "\x1b[1m938/938\x1b[0m \x1b[32m" + "\u2501" * 20 + "\x1b[0m \x1b[1m3s\x1b[0m 3ms/step - loss: 0.1200\n"
    two_of_three = "".join(f"Epoch {e}/3\n{bar}" for e in (1, 2)).encode()
    assert classify_bytes(two_of_three)["status"] != "completed"
    assert classify_bytes(two_of_three + f"Epoch 3/3\n{bar}".encode())["status"] == "completed"
