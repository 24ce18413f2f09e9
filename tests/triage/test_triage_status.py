"""Status without a JOB SUMMARY, evidence on progress-bar lines, and advice by framework (issue 16)."""

from datetime import timedelta

import pytest

from gpuops.onbox.triage.logtriage import classify_bytes, triage_file
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


# ---------------------------------------------------------------- issue 27: the last event, not the last line

TRACEBACK = [b"Traceback (most recent call last):", b'  File "/workspace/train.py", line 77, in <module>',
             b"    loss.backward()", b"RuntimeError: CUDA error: an illegal memory access was encountered"]
NCCL_TEARDOWN = [b"gpu-a01:4242:4300 [0] NCCL INFO comm 0x55d0c0 rank 0 nranks 8 cudaDev 0 busId 1000 - Abort COMPLETE"]


@pytest.mark.parametrize("after", [
    # c10/cuda/CUDAMiscFunctions.cpp, CUDAException.cpp: CUDA's hints after every CUDA error
    [b"CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
     b"incorrect.", b"For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
     b"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."],
    NCCL_TEARDOWN * 300,  # more lines than a traceback spans
    [b"wandb: \xf0\x9f\x9a\x80 View run run-7 at: https://wandb.ai/team/p/runs/abc", b"wandb: Find logs at: wandb/"],
    [b" 13%|#3        | 130/1000 [01:05<07:15,  2.00it/s]"],  # a bar's remains, no step past the error
    [b"[rank1]:" + line for line in TRACEBACK],  # a second rank's copy
])
def test_a_fatal_exception_followed_by_lines_that_are_no_event_failed(after):
    """Libraries print after the exception; the log whose last event is the exception failed. It
    was `unknown` (the traceback was not the last line, or more than 200 lines before it)."""
    log = text(steps(0, 20), TRACEBACK, after)
    data = classify_bytes(log, now=last_time(0, 20) + timedelta(hours=3))
    assert (data["status"], data["primary"]) == ("failed", "cuda-error")


def test_a_launcher_that_exits_0_beside_a_crashed_rank_is_no_completion():
    """Node 0's torchrun agent finished its own workers after node 1's rank crashed."""
    log = text(steps(0, 20), b"1: " + TRACEBACK[0], b"1: " + TRACEBACK[3],
               b"0: I0302 10:01:00.000000 4000 torch/distributed/elastic/agent/server/api.py:879] [default] worker "
               b"group successfully finished. Waiting 300 seconds for other agents to finish.")
    data = classify_bytes(log, now=last_time(0, 20) + timedelta(hours=1))
    assert (data["status"], data["primary"]) == ("failed", "cuda-error")


def test_an_exception_at_interpreter_exit_after_the_end_is_noise():
    """CPython's `Exception ignored in:` (a destructor failing at shutdown) after a completed run."""
    log = text(steps(0, 20), b"`Trainer.fit` stopped: `max_steps=21` reached.",
               b"Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2b>", TRACEBACK[:3],
               b"AttributeError: 'NoneType' object has no attribute 'python_exit_status'")
    assert classify_bytes(log, now=last_time(0, 20) + timedelta(hours=1))["status"] == "completed"


@pytest.mark.parametrize("noise", [
    # ultralytics/engine/trainer.py: first-epoch OOM, halves the batch and retries
    b"WARNING \xe2\x9a\xa0\xef\xb8\x8f CUDA out of memory with batch=64. Reducing to batch=32 and retrying (1/3).",
    # fairseq/trainer.py (_log_oom): it recovers, or raises
    b"2025-03-02 10:00:30 | WARNING | fairseq.trainer | OOM: Ran out of memory with exception: CUDA out of memory.",
    # torch/csrc/distributed/c10d/socket.cpp: IPv6 failed, IPv4 is tried next
    b"[W302 10:00:00.000000000 socket.cpp:697] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 "
    b"- Address already in use).",
    b"gpu-a01:4242:4300 [0] NCCL WARN NET/IB : No device found.",
    b"[2025-03-02 10:00:40] {'loss': 'nan', 'grad_norm': nan, 'learning_rate': 1.9e-05, 'epoch': 0.42}",
])
def test_healthy_noise_is_no_failure_until_it_says_so(noise):
    """Printed during normal training: a log cut off right after it has no end, and no class."""
    log = text(steps(0, 20), noise)
    data = classify_bytes(log, now=last_time(0, 20) + timedelta(hours=3))
    assert (data["status"], data["primary"]) == ("unknown", None)
    assert classify_bytes(log, now=last_time(0, 20) + timedelta(minutes=1))["status"] == "running"


def test_a_trainer_that_stops_itself_on_nan_failed_although_it_exits_cleanly():
    log = text(steps(0, 20), b"Monitored metric val_loss = nan is not finite. Previous best value was 0.412. "
                             b"Signaling Trainer to stop.", b"`Trainer.fit` stopped: `max_steps=21` reached.")
    data = classify_bytes(log, now=last_time(0, 20) + timedelta(hours=1))
    assert (data["status"], data["primary"]) == ("failed", "nan-divergence")


def test_an_elastic_restart_means_what_failed_before_it_did_not_end_the_run():
    restart = (b"I0302 10:01:00.000000 4000 torch/distributed/elastic/agent/server/api.py:944] [default] Worker "
               b"group FAILED. 2/3 attempts left; will restart worker group")
    log = text(steps(0, 20), TRACEBACK, restart)
    data = classify_bytes(log, now=last_time(0, 20) + timedelta(minutes=1))
    assert (data["status"], data["primary"]) == ("running", None) and "cuda-error" in data["also"]


def test_a_torch_oom_with_no_framework_marker_gets_torchs_advice_never_jaxs():
    log = text([b"step %d/100 loss 2.0" % i for i in range(1, 21)], TRACEBACK[:3],
               b"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
    advice = " ".join(classify_bytes(log)["advice"])
    assert "expandable_segments" in advice
    for jax in ("per_device_batch_size", "remat_policy", "XLA buffer assignment", "XLA_PYTHON_CLIENT"):
        assert jax not in advice


def test_no_times_on_the_step_lines_and_a_running_scheduler_is_no_claim_of_advancing():
    log = b"".join(b"step %d/100 loss 2.0\n" % i for i in range(1, 30))
    data = classify_bytes(log, slurm_state="RUNNING")
    assert data["status"] == "running"
    assert not any("advancing" in a for a in data["advice"]) and any("cannot be told" in a for a in data["advice"])


def test_a_serving_engine_that_reports_after_an_error_did_not_end_there():
    """A log without step lines: a request's traceback, then vLLM's periodic stats (two or more)
    say the engine went on (vllm/v1/metrics/loggers.py); one stats line alone could be a rank
    still flushing."""
    stats = (b"INFO 03-02 10:05:00 [loggers.py:118] Engine 000: Avg prompt throughput: 120.3 tokens/s, Avg "
             b"generation throughput: 250.1 tokens/s, Running: 3 reqs, Waiting: 0 reqs")
    log = text(b"INFO 03-02 10:00:40 [api_server.py:1090] Starting vLLM API server 0 on http://0.0.0.0:8000",
               TRACEBACK, stats, stats)
    assert (classify_bytes(log)["status"], classify_bytes(log)["primary"]) == ("unknown", None)
    assert classify_bytes(text(TRACEBACK, stats))["status"] == "failed"
