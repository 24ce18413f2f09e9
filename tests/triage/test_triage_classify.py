"""The procedure's rules one by one, on small logs written here."""

import json
from pathlib import Path
from datetime import datetime, timedelta, timezone

import pytest

from gpuops.onbox.triage import signatures as S
from gpuops.onbox.triage.logtriage import classify_bytes, triage_bytes, triage_file
from gpuops.onbox.triage.classify import normalize_state

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "triage"

T0 = datetime(2025, 3, 2, 10, 0, 0)


def steps(first, last, start=T0, secs=2.0, prefix=b"0: "):
    out = []
    for i, s in enumerate(range(first, last + 1)):
        t = start + timedelta(seconds=secs * (i + 1))
        out.append(prefix + b"[%s] completed step: %d, seconds: %.3f, loss: 2.0" % (t.strftime("%Y-%m-%d %H:%M:%S").encode(), s, secs))
    return out


def text(*parts):
    lines = []
    for p in parts:
        lines += p if isinstance(p, list) else [p]
    return b"\n".join(lines) + b"\n"


def last_time(first, last, secs=2.0):
    return T0 + timedelta(seconds=secs * (last - first + 1))


# ---------------------------------------------------------------- status table and the 130/143 rule

@pytest.mark.parametrize("status_line, status", [
    (b"Status: SUCCESS (exit 0)", "completed"),
    (b"Status: SUCCESS", "completed"),
    (b"Status: FAILED (exit 1)", "failed"),
    (b"Status: FAILED (exit 137)", "failed"),
    (b"Status: FAILED (exit 130)", "cancelled"),
    (b"Status: FAILED (exit 143)", "cancelled"),
    (b"Status: CANCELLED (exit 143)", "cancelled"),
    (b"Status:   FAILED   (rc=2)", "failed"),
    (b"Status:\tSUCCESS (exit code 0)", "completed"),
])
def test_job_summary_decides_the_status(status_line, status):
    log = text(steps(0, 20), b"========== JOB SUMMARY ==========", status_line)
    data = classify_bytes(log, now=last_time(0, 20) + timedelta(minutes=1))
    assert data["status"] == status
    if status == "completed":
        assert data["primary"] is None and data["stage"] is None
    if status == "cancelled":
        assert data["primary"] == "cancelled" and data["also"] == []


def test_a_completion_line_followed_by_a_failed_save_is_not_completed():
    done = b"Training completed. Do not forget to share your model on huggingface.co/models =)"
    assert classify_bytes(text(b"step 3000/3000", done))["status"] == "completed"
    data = classify_bytes(text(b"step 3000/3000", done, b"Traceback (most recent call last):",
                               b"OSError: [Errno 28] No space left on device: 'out/model.safetensors'"))
    assert (data["status"], data["primary"]) == ("failed", "disk-full")


def test_status_line_outside_a_summary_is_not_a_summary():
    log = text(steps(0, 20), b"HTTP Status: SUCCESS from the metrics exporter")
    assert classify_bytes(log, now=last_time(0, 20))["status"] == "running"


def test_cancel_is_the_mechanism_and_the_earlier_error_the_cause():
    stall_end = last_time(0, 40) + timedelta(hours=2)
    log = text(steps(0, 40), b"1: gpu-a02:1:1 [0] NCCL WARN Timeout waiting for receive from peer 0",
               b"[%s] (raylet) still waiting" % stall_end.strftime("%Y-%m-%d %H:%M:%S").encode(),
               b"slurmstepd: error: *** JOB 9 ON gpu-a01 CANCELLED AT 2025-03-02T12:01:00 ***",
               b"0: Traceback (most recent call last):", b"0: KeyboardInterrupt",
               b"========== JOB SUMMARY ==========", b"Status: FAILED (exit 143)")
    data = classify_bytes(log, now=stall_end + timedelta(minutes=5))
    assert data["status"] == "cancelled"
    assert data["primary"] == "nccl-timeout"
    assert data["also"] == ["hang", "cancelled", "python-exception"]


# ---------------------------------------------------------------- liveness without a summary

RUNNING_LOG = text(steps(0, 100))
T_LAST = last_time(0, 100)


@pytest.mark.parametrize("state, minutes, status, primary", [
    (None, 1, "running", None),
    ("RUNNING", 1, "running", None),
    ("R", 1, "running", None),
    ("RUNNING", 120, "hanging", "hang"),
    (None, 120, "unknown", None),  # no end in the log and no state: no death is claimed
    ("COMPLETED", 1, "unknown", "unknown-death"),
    ("PREEMPTED", 120, "unknown", "unknown-death"),
    ("CANCELLED by 1000", 120, "cancelled", "cancelled"),  # no cancel time in the log: no stall to measure
    ("CANCELLED+", 1, "cancelled", "cancelled"),
])
def test_slurm_state_and_step_progress(state, minutes, status, primary):
    data = classify_bytes(RUNNING_LOG, now=T_LAST + timedelta(minutes=minutes), slurm_state=state)
    assert (data["status"], data["primary"]) == (status, primary)


def test_hang_projection_numbers():
    data = classify_bytes(RUNNING_LOG, now=T_LAST + timedelta(hours=2), slurm_state="RUNNING")
    assert data["progress"]["expected_step_now"] == 100 + 3600
    assert data["evidence"][-1]["text"].endswith("completed step: 100, seconds: 2.000, loss: 2.0")


def test_preempted_state_is_named_in_the_next_steps():
    data = classify_bytes(RUNNING_LOG, now=T_LAST + timedelta(hours=2), slurm_state="PREEMPTED")
    assert any("PREEMPTED" in s for s in data["advice"])


def test_no_steps_yet_depends_on_the_job_state():
    log = text(b"[2025-03-02 10:00:00] == Docker pull START")
    assert classify_bytes(log, slurm_state="RUNNING")["status"] == "running"
    data = classify_bytes(log, slurm_state="FAILED")
    assert (data["status"], data["primary"], data["stage"]) == ("unknown", "unknown-death", "Docker pull")
    assert (classify_bytes(log)["status"], classify_bytes(log)["primary"]) == ("unknown", None)


@pytest.mark.parametrize("record, status", [
    ({"exit_code": 0, "signal": None}, "completed"),
    ({"exit_code": 1, "signal": None}, "failed"),
    ({"exit_code": None, "signal": "SIGTERM"}, "cancelled"),
    ({"exit_code": None, "signal": "SIGKILL"}, "failed"),
])
def test_gpuops_exit_record_stands_in_for_the_summary(record, status):
    data = classify_bytes(RUNNING_LOG, now=T_LAST + timedelta(hours=5), exit_record=record)
    assert data["status"] == status


@pytest.mark.parametrize("value, norm", [(None, None), ("", None), ("unknown", None), ("running", "RUNNING"),
                                         ("CA", "CANCELLED"), ("TIMEOUT ", "TIMEOUT"), ("CANCELLED by 0", "CANCELLED")])
def test_state_normalisation(value, norm):
    assert normalize_state(value) == norm


# ---------------------------------------------------------------- cascades and survived errors

def test_an_error_training_survived_does_not_end_it():
    log = text(steps(0, 10), b"0: gpu-a01:1:1 [2] NCCL WARN NET/IB : port flap", steps(11, 60),
               b"0: Traceback (most recent call last):", b"0: ValueError: bad batch",
               b"========== JOB SUMMARY ==========", b"Status: FAILED (exit 1)")
    data = classify_bytes(log, now=last_time(0, 60))
    assert data["primary"] == "python-exception"
    assert data["also"] == ["nccl-timeout"]


def test_nccl_warn_before_the_first_step_is_reported_in_any_log():
    """Issue 16: an NCCL WARN counted only after a MaxText `completed step:`, so a torchrun log's
    `NCCL WARN ... unhandled system error` at init was not reported at all."""
    log = text(b"[rank1]: gpu-a02:2:2 [1] NCCL WARN NET/Socket : peer 10.0.0.1<43521> message truncated",
               b"[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
               b"unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5")
    assert classify_bytes(log)["primary"] == "nccl-timeout"
    survived = text(b"0: gpu-a01:1:1 [0] NCCL WARN NET/IB : No device found.", steps(0, 20))
    assert classify_bytes(survived, now=last_time(0, 20))["also"] == ["nccl-timeout"]


def test_a_cause_inside_a_traceback_counts_from_the_traceback():
    log = text(b"0: Traceback (most recent call last):", *[b'0:   File "x.py", line %d' % i for i in range(30)],
               b"0: jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 9GiB",
               b"1: Traceback (most recent call last):", b"1: ValueError: unrelated and later")
    data = classify_bytes(log)
    assert data["primary"] == "oom-gpu" and "oom-host" not in data["also"]


def test_ray_bootstrap_failure_is_never_the_primary_when_something_else_failed():
    log = text(b"[Ray] HEAD failed to start", steps(0, 5), b"0: Killed",
               b"========== JOB SUMMARY ==========", b"Status: FAILED (exit 137)")
    data = classify_bytes(log, now=last_time(0, 5))
    assert data["primary"] == "oom-host" and data["also"] == ["ray-start-fail"]


# ---------------------------------------------------------------- heartbeat checklist

HB = [b"0: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
      b"0: /job:jax_worker/replica:0/task:5", b"0: The tasks have crashed. Check the task logs for an earlier error."]


def test_heartbeat_without_self_report_is_a_presumed_false_positive():
    result = triage_bytes(text(steps(0, 30), HB, b"========== JOB SUMMARY ==========", b"Status: FAILED (exit 1)"),
                          now=last_time(0, 30))
    assert result.data["primary"] == "heartbeat-timeout"
    assert "treat it as a false positive" in result.data["advice"][0]
    check = [f for f in result.findings if f.id == "triage.heartbeat-checklist"][0]
    assert check.evidence["verdict"] == "presumed-false-positive" and check.evidence["accused"] == [5]
    assert any("14400" in s for s in result.data["advice"])  # the heartbeat fix is offered


def test_heartbeat_steps_never_offered_for_a_hang():
    data = classify_bytes(RUNNING_LOG, now=T_LAST + timedelta(hours=2), slurm_state="RUNNING")
    assert not any("heartbeat" in s for s in data["advice"])


# ---------------------------------------------------------------- harmless lines

HARMLESS = [
    b"0: E0302 10:00:00.1 1 cuda_executor.cc:1] Failed call to cuInit: UNKNOWN ERROR (303)",
    b"0: jaxlib probe: INTERNAL: CUDA error: Failed call to cuInit",
    b"0: gpu-a01:1:1 [0] NCCL WARN MSCCL++: Feature not enabled",
    b"Token indices sequence length is longer than the specified maximum sequence length for this model (5000 > 4096)",
    b"OCI runtime exec failed: exec failed: unable to start container process: exit status 137",
    b"[exec] docker exec failed (exit 137); falling back to host-level kill",
    b"[cgroup] Sent SIGKILL to 0/0 processes",
    b"0: W0302 topology.cc:1] Cannot read CPU core 120 (topology.cc)",
    b"0: No hardware is found. Using default TPU version: jellyfish",
    b"0: No device identifiers found (trace.cc)",
    b"0: Enabling PjRt/TPU event dependency logging",
    b"0: Fiber init: default domain = futex (init-domain.cc)",
    b"Error response from daemon: cannot remove container mt: could not kill container: tried to kill container, but did not receive an exit event",
    b"srun: error: gpu-a01: task 0: Exited with exit code 143", b"srun: Terminating StepId=77.0",
    b"NODE_EXIT host=gpu-a01 exit=143", b"NODE_EXIT host=gpu-a02 exit=143",
]


def test_known_harmless_lines_are_never_reported():
    log = text(HARMLESS[:6], steps(0, 30), HARMLESS[6:], b"========== JOB SUMMARY ==========", b"Status: SUCCESS (exit 0)")
    result = triage_bytes(log, now=last_time(0, 30))
    assert result.data["primary"] is None and result.data["also"] == []
    assert [e["line"] for e in result.data["evidence"]] == [len(HARMLESS) + 31 + 2]  # just the summary line
    assert [f.id for f in result.findings] == ["triage.context"]


# ---------------------------------------------------------------- RAY=1 dashboards

def test_live_ray_job_points_at_its_prometheus():
    log = text(b"RAY=1", b"ssh -L 8265:gpu-h07:8265 -L 9195:gpu-h07:9195 me@jump", steps(0, 50))
    data = classify_bytes(log, now=last_time(0, 50))
    assert data["status"] == "running"
    assert any("http://gpu-h07:9195" in s for s in data["advice"])
    assert any("port forwarding" in s for s in data["advice"])


def test_prometheus_port_line_beats_the_default():
    log = text(b"RAY=1", b"[Prometheus] Started on port 9192", steps(0, 50))
    result = triage_bytes(log, now=last_time(0, 50))
    dash = [f for f in result.findings if f.id == "triage.ray-dashboards"][0].evidence
    assert dash["prometheus_port"] == 9192 and dash["head_host"] is None


def test_ended_ray_job_points_at_the_persisted_tsdb():
    log = text(b"RAY=1", steps(0, 5), b"========== JOB SUMMARY ==========", b"Status: SUCCESS (exit 0)")
    data = classify_bytes(log, now=last_time(0, 5))
    assert any("prometheus.sh view" in s for s in data["advice"])
    assert classify_bytes(text(b"RAY=0", steps(0, 5)), now=last_time(0, 5))["advice"][-1].startswith("Training is advancing")


# ---------------------------------------------------------------- times

def test_absl_times_take_the_year_of_now_and_step_times_come_from_nearby_lines():
    log = text(b"0: I0302 10:00:00.000000 1 train.py:1] starting", *[b"0: completed step: %d, seconds: 3.000" % i for i in range(0, 20)])
    data = classify_bytes(log, now=datetime(2025, 3, 2, 10, 1, 30))
    # last step at 10:00:00 + 20 * 3 s = 10:01:00; 30 s later at 3 s/step: 10 more steps expected
    assert data["progress"]["expected_step_now"] == 29 and data["status"] == "running"


def test_zoned_times_against_a_zoned_now():
    log = text(*[b"[2025-03-02T10:%02d:00Z] completed step: %d, seconds: 60.0" % (i, i) for i in range(10)])
    now = datetime(2025, 3, 2, 12, 9, 0, tzinfo=timezone(timedelta(hours=2)))  # == 10:09 UTC
    assert classify_bytes(log, now=now)["progress"]["expected_step_now"] == 9


def test_zoned_log_times_against_a_naive_now_compare_wall_clocks():
    log = text(*[b"2025/03/02 10:%02d:00+05:00 completed step: %d, seconds: 60.0" % (i, i) for i in range(10)])
    assert classify_bytes(log, now=datetime(2025, 3, 2, 10, 12, 0))["progress"]["expected_step_now"] == 12


def test_date_command_times_are_read():
    log = text(b"Start: Sun Mar  2 10:00:00 UTC 2025", *[b"completed step: %d, seconds: 10.0" % i for i in range(10)])
    assert classify_bytes(log, now=datetime(2025, 3, 2, 10, 2, 0))["progress"]["expected_step_now"] == 11


def test_result_is_plain_json_with_exact_keys():
    data = classify_bytes(RUNNING_LOG, now=T_LAST)
    assert list(data) == list(S.DATA_KEYS) and list(data["progress"]) == list(S.PROGRESS_KEYS)
    assert json.loads(json.dumps(data)) == data


def test_no_kernel_image_is_the_torch_build_lacking_the_gpus_architecture_not_a_bug_in_the_program():
    """Issue 28 (U28): "CUDA error: no kernel image is available for execution on the device" was a
    cuda-error, whose advice hunts an out-of-range index with CUDA_LAUNCH_BLOCKING=1. Here in the
    form torch printed before its 2.8 CUDA messages (c10/cuda/CUDAMiscFunctions.cpp's older suffix)."""
    log = text(steps(0, 0), b"0: Traceback (most recent call last):",
               b'0:   File "/workspace/train.py", line 88, in <module>',
               b"0: RuntimeError: CUDA error: no kernel image is available for execution on the device",
               b"0: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
               b"below might be incorrect.",
               b"0: For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
               b"0: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    data = classify_bytes(log, now=last_time(0, 0))
    assert (data["status"], data["primary"]) == ("failed", "cuda-arch") and "cuda-error" not in data["also"]
    assert data["advice"][0].startswith("The torch build lacks this GPU's architecture: compare "
                                        "torch.cuda.get_arch_list() with the GPU's compute capability")
    assert S.CLASS_BY_NAME["cuda-arch"].gotcha == "U28"
    # Any other CUDA error is still the program's.
    other = log.replace(b"no kernel image is available for execution on the device", b"misaligned address")
    assert classify_bytes(other, now=last_time(0, 0))["primary"] == "cuda-error"


def test_a_hang_without_ray_gets_no_ray_dashboard_prometheus_or_rdma_advice_and_with_ray_does():
    """Issue 38: a job with no Ray was sent to the Ray Dashboard, Prometheus and RDMA counters."""
    ray_words = ("Ray Dashboard", "Prometheus", "RDMA", "TSDB", "RAY=1")
    plain = triage_file(str(FIXTURES / "status_hanging.log"), slurm_state="RUNNING").data
    assert plain["primary"] == "hang" and plain["advice"]
    assert not [a for a in plain["advice"] if any(w in a for w in ray_words)], plain["advice"]
    log = (FIXTURES / "status_hanging.log").read_bytes()
    with_ray = triage_bytes(b"RAY=1\n" + log, slurm_state="RUNNING").data
    assert with_ray["primary"] == "hang" and any("Ray Dashboard" in a for a in with_ray["advice"]), with_ray["advice"]


def test_exit_127_gets_no_exit_126_advice():
    """`pythn train.py` (exit 127, command not found) was told to chmod +x, the advice for 126."""
    log = b"/root/jobs/J/cmd: line 1: pythn: command not found\n"
    said = triage_bytes(log, exit_record={"exit_code": 127, "signal": None}).data
    assert said["primary"] == "launch-fail" and any("command not found" in a for a in said["advice"])
    assert not [a for a in said["advice"] if "exit 126" in a], said["advice"]
    unknown = triage_bytes(log).data  # no exit code known: the step for each code stays
    assert any("exit 126" in a for a in unknown["advice"]), unknown["advice"]
