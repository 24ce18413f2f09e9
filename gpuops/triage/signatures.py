"""What triage knows, as data: failure classes in priority order, log signatures, harmless lines.

Nothing here runs; `matcher` compiles the patterns and `scan`/`classify` interpret the rules.

Classes keep the names of the MaxText-on-Slurm triage procedure (seed 002), in its priority order
(infrastructure, stage timeouts, training failures, job-level), with a few classes added for
torchrun / HF Trainer / DeepSpeed logs (marked `extension`) where no procedure class fits.

Each class has a `role`, which decides how it competes for the primary slot (see classify.py):
    root        a specific cause (OOM, NCCL, disk full, image pull, ...)
    cause       carries a cause but is generic (a traceback, a crash signal, a Ray actor error)
    exit        only reports that something exited non-zero (a node, a stage, a subprocess)
    mechanism   how the job was stopped, not why (cancel, the training wall-clock limit)
    derived     concluded from step progress and job state, not from a log line (hang, death)
    minor       worth saying, never the reason a job ended (Ray bootstrap falls back to no Ray)

Pattern rules: every pattern starts with a literal character (the compiled alternation relies on
it to skip quickly through text) and uses only syntax that `matcher.to_ere` can translate for
grep -E: literals, escapes, classes, (?:...), quantifiers, \\d \\s \\S \\w. No look-arounds.
"""

from typing import NamedTuple, Optional

# ---------------------------------------------------------------------- constants of the procedure

# Step lines, the steady-state step time and the stall bar are the progress policy shared with
# `gpuops status` (gpuops.onbox.steps).
DEFAULT_CHECKPOINT_PERIOD = 200   # enable_checkpointing=true without an explicit period
TRACEBACK_SPAN = 200        # a cause printed this many lines after a traceback header belongs to it
CANCEL_EXITS = (130, 143)   # SIGINT / SIGTERM: the job was stopped, which is not a cause
EVIDENCE_MAX = 20           # evidence lines in the result
EVIDENCE_CHARS = 300        # characters kept of one evidence line
PROMETHEUS_DEFAULT_PORT = 9190
RAY_DASHBOARD_PORT = 8265
TENSORBOARD_PORT = 6006

STATUSES = ("completed", "failed", "cancelled", "running", "hanging", "unknown")
PROGRESS_KEYS = ("first_step", "last_step", "total_steps", "checkpoint_period", "last_periodic_ckpt",
                 "steps_lost", "step_time_s", "expected_step_now", "eta_s")
DATA_KEYS = ("status", "primary", "also", "stage", "evidence", "progress", "next")

# Slurm job states, normalised to their first word in upper case.
SLURM_ALIVE = ("RUNNING", "CONFIGURING", "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "REQUEUED")
SLURM_ENDED = ("COMPLETED", "COMPLETING", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL",
               "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT")


class FailureClass(NamedTuple):
    name: str
    table: str              # infrastructure | timeout | training | job | extension
    role: str
    stage: Optional[str]    # None: the stage comes from the log (banners, training or not)
    what: str               # one plain sentence for "what happened"
    steps: tuple            # recommended next steps; {scancel} {job_dir} {slurm_id} {diagnose} are filled in


def _c(name, table, role, stage, what, *steps):
    return FailureClass(name, table, role, stage, what, tuple(steps))


CLASSES = (
    # -- infrastructure, before training starts
    _c("container-pull-fail", "infrastructure", "root", "Docker pull",
       "The container image could not be pulled, or logging in to its registry failed.",
       "Check the image name and tag the job asked for (container_env.sh in the MaxText harness).",
       "Check the registry credentials on the node (docker login / enroot credentials).",
       "Pull the image by hand on one node to see the registry's own error."),
    _c("container-load-fail", "infrastructure", "root", "Docker pull",
       "Loading the image tarball failed: docker load printed no image name or id.",
       "Check that the tarball is complete (size, checksum) and readable from the node.",
       "Run docker load on it by hand and read its output."),
    _c("no-gpu", "infrastructure", "root", "Container start",
       "No GPU was visible inside the container (or to the framework).",
       "Check that the node has working GPUs: nvidia-smi (or rocm-smi) on the host.",
       "Check the device flags the container is started with (--gpus / --device, _container.sh in the harness)."),
    _c("nccl-nic-fail", "infrastructure", "root", "Container start",
       "NCCL found no usable network interface for a multi-node job and aborted.",
       "List the interfaces on the compute nodes (ip link show) and check which ones are up.",
       "Set NCCL_SOCKET_IFNAME to the right interface, or fix the script that picks it (choose_nccl_socket_ifname.sh)."),
    _c("port-fail", "infrastructure", "root", "Job start",
       "A port the job needed (JAX coordinator, Ray, torchrun master) was taken or none could be found.",
       "Find what holds the port on the node (ss -ltnp or lsof -i :PORT) and stop stale runs.",
       "Pick another port (for torchrun: --master-port) and resubmit."),
    _c("model-not-found", "infrastructure", "root", "Training start",
       "The model name did not resolve to a config: the file is missing or the name is ambiguous.",
       "List the configs that exist (ls configs/*.gpu.yml) and use an exact name.",
       "If the model is new, add a config for it (docs/model-configs.md in the harness)."),
    _c("patch-branch-fail", "infrastructure", "root", "Container start",
       "Checking out the MaxText hotfix branch inside the container failed.",
       "Check that the branch exists and is reachable from the node.",
       "Run the checkout by hand in the container to see git's error."),
    _c("ray-start-fail", "infrastructure", "minor", "Ray init",
       "The Ray cluster did not start; training continues without Ray (no dashboards, no TSDB).",
       "Nothing is needed for training itself: it falls back to running without Ray.",
       "If you need the dashboards: check for port conflicts on the head node.",
       "Read the Ray logs in the job directory ({job_dir}/ray_logs)."),
    _c("rendezvous-fail", "extension", "root", "Job start",
       "The distributed rendezvous did not complete: workers could not find each other in time.",
       "Check that every node uses the same --rdzv-id / rendezvous endpoint and that the endpoint (etcd or the c10d store) is up.",
       "Check MASTER_ADDR / MASTER_PORT and that the port is reachable between nodes (nc -zv HOST PORT).",
       "If some nodes start slowly, raise the rendezvous timeout (torchrun --rdzv-conf=timeout=600) or allow fewer nodes (--nnodes=MIN:MAX).",
       "A script run with plain python instead of torchrun has no RANK/WORLD_SIZE: launch it with torchrun."),
    # -- stage timeouts
    _c("preflight-timeout", "timeout", "root", "Preflight",
       "The preflight checks ran past their time limit (stale GPU processes, a hung NFS mount, NUMA probing).",
       "Look for processes still holding the GPUs: nvidia-smi / rocm-smi (gpuops reap can find them).",
       "If the checks are merely slow, give them longer: STAGE_TIMEOUTS=\"preflight:1800\"."),
    _c("pull-timeout", "timeout", "root", "Docker pull",
       "Pulling the image ran past its time limit (slow registry or a very large image).",
       "Check the network path to the registry from the nodes.",
       "Pre-pull the image on the nodes before submitting.",
       "Give the pull longer: STAGE_TIMEOUTS=\"pull:1800\"."),
    _c("ecc-timeout", "timeout", "root", "ECC check",
       "The GPU ECC memory check hung, which points at the GPU driver.",
       "Check the driver state on the node (nvidia-smi -q -d ECC, dmesg for Xid errors).",
       "Drain the node if the check keeps hanging there."),
    _c("train-timeout", "timeout", "mechanism", "Training",
       "Training ran past the wall-clock limit configured for the stage.",
       "First rule out a hang: compare the last completed step with the expected step in the projection.",
       "If training was progressing, give it longer: STAGE_TIMEOUTS=\"train:<seconds>\", or resume from the last checkpoint."),
    # -- training failures
    _c("hang", "training", "derived", "Training",
       "Training steps stopped advancing while the job stayed alive: most likely a collective (NCCL/RCCL) deadlock with every rank waiting on the others.",
       "If the job runs with RAY=1 and is still live: open the Ray Dashboard (port 8265) and read each actor's stack to find the stuck collective.",
       "Query Prometheus around the stall: GPU utilisation at 100% with idle-level power means ranks busy-waiting in a collective; also look at TCP retransmits and RDMA counters.",
       "Look for core files (core.*) in the job directory and the outputs root to rule out a crash; a pure hang leaves none.",
       "Stop the job: {scancel}.",
       "On resubmit add _env_NCCL_DEBUG=INFO and watch step progress (slurm_job_monitor.sh -j <id>) to catch the next stall early."),
    _c("heartbeat-timeout", "training", "root", "Training",
       "The JAX coordination service declared tasks dead because their heartbeats stopped; this mechanism is known to accuse healthy, training tasks.",
       "Treat it as a false positive unless the accused tasks crashed first (see the checklist result below).",
       "Raise jax_distributed_heartbeat_timeout_seconds to hours (for example 14400) so the faulty check cannot kill a productive run.",
       "Detect real hangs from step progress instead (slurm_job_monitor.sh), not from heartbeats.",
       "For a RAY=1 job, query the persisted TSDB (GPU utilisation, TCP retransmits, I/O pressure, memory) at the failure time to confirm the tasks were healthy."),
    _c("oom-host", "training", "root", "Training",
       "The host ran out of memory and the kernel OOM killer (or the cgroup limit) killed the process.",
       "Lower per_device_batch_size (or the data-loader worker count).",
       "Use remat_policy=full to trade compute for memory.",
       "Look for a memory spike while checkpointing (data-parallel replica 0 gathers the state).",
       "Confirm on the node: dmesg -T | grep -i -e oom -e 'killed process', or the cgroup memory.events oom_kill counter."),
    _c("oom-gpu", "training", "root", "Training",
       "GPU memory ran out while compiling or running the step.",
       "Lower per_device_batch_size or max_target_length.",
       "Use remat_policy=full (or activation checkpointing).",
       "Read the XLA buffer assignment (or torch.cuda.memory_summary()) to see what holds the memory."),
    _c("disk-full", "extension", "root", "Training",
       "A write failed because the disk (or the quota) was full, often while saving a checkpoint.",
       "Check free space and inodes where the job writes: df -h PATH; df -i PATH.",
       "Delete old checkpoints or move them off the box, then resume from the last good one.",
       "A checkpoint written during the failure may be partial: verify it before resuming from it."),
    _c("checkpoint-save-fail", "extension", "root", "Training",
       "Saving a checkpoint failed (permissions, missing directory, or object-store credentials).",
       "Check that the checkpoint directory exists and is writable by the job's user.",
       "For S3-style storage, check the credentials and the bucket permissions (PutObject)."),
    _c("checkpoint-load-fail", "extension", "root", "Training start",
       "Restoring a checkpoint failed: missing or unexpected keys, changed shapes, or a refused unpickle.",
       "Check that the model definition matches the one that wrote the checkpoint.",
       "Try the previous checkpoint; the newest one may be partial.",
       "If torch refused to unpickle (weights_only), load with weights_only=False only for checkpoints you wrote yourself."),
    _c("gpu-fault", "extension", "root", "Training",
       "The GPU reported a hardware-level fault (a fatal Xid, an uncorrectable ECC error, or it fell off the bus).",
       "Read the kernel log on the node for NVRM Xid lines around the failure time (dmesg -T | grep -i xid).",
       "Drain the node and resubmit elsewhere; a GPU that fell off the bus needs a reset or a reboot."),
    _c("cuda-error", "extension", "root", "Training",
       "A CUDA operation failed inside the application (an illegal memory access, a device-side assert, an "
       "application-level Xid): the program's fault, and the GPU itself is fine.",
       "Re-run with CUDA_LAUNCH_BLOCKING=1 so the traceback names the kernel that failed.",
       "Look for an out-of-range index (embedding ids, labels beyond the class count) or a dtype mismatch near "
       "the failing call; a device-side assert prints the condition that broke.",
       "If it recurs on one GPU across different jobs, check the box: gpuops preflight (Xid, ECC)."),
    _c("nccl-timeout", "training", "root", "Training",
       "A collective (NCCL/RCCL) failed or timed out: a network or GPU problem on at least one rank.",
       "Check network health on the nodes: ip link, ethtool -S, RDMA error counters.",
       "Resubmit with _env_NCCL_DEBUG=INFO (NCCL_DEBUG=INFO) for detailed NCCL logs.",
       "Check whether the same nodes fail every time; if so, drain them."),
    _c("xla-compile-fail", "training", "root", "Training",
       "The XLA/GPU compiler failed on the model's program.",
       "Check the XLA flags (train_env.sh in the harness) for settings that conflict.",
       "Dump the failing HLO with _env_ENABLE_XLA_DUMP=1.",
       "Shrink the model or configuration until it compiles, to isolate the trigger."),
    _c("python-exception", "training", "cause", "Training",
       "An unhandled Python exception ended the process.",
       "Read the whole traceback; the last line names the exception.",
       "Check whether it is a known issue of the training code (MaxText, the trainer).",
       "Check the configuration parameters it complains about."),
    _c("signal-kill", "training", "cause", "Training",
       "The training process was killed by a signal (SIGSEGV, SIGABRT, ...), which usually leaves a core dump.",
       "Look for core files: {job_dir}/core*, the outputs root, and the paths in COREDUMP_EXTRA_DIRS.",
       "Open a core with gdb python3 <core> inside the same container image.",
       "See docs/debugging.md in the harness."),
    _c("subprocess-fail", "training", "exit", "Training",
       "The training process exited with a non-zero code.",
       "Read the output just before the exit line; the cause is usually printed there."),
    _c("actor-fail", "training", "cause", "Training",
       "A Ray actor raised an exception (its traceback is in the log).",
       "Read the actor's traceback in the log and in {job_dir}/ray_logs.",
       "Fix the exception it names; it is a training error reported through Ray."),
    # -- job level
    _c("cancelled", "job", "mechanism", None,
       "The job was cancelled (scancel or SIGTERM); cancelling is how it stopped, not why.",
       "Check the projection: a last step far behind the expected step means a hang was cancelled.",
       "Check for errors before the cancellation (NCCL, OOM, heartbeat); if there are none, nothing needs fixing."),
    _c("node-fail", "job", "exit", None,
       "One or more nodes exited with an error.",
       "See which nodes failed and with which exit code (listed below).",
       "Read those tasks' own output (lines prefixed with their task id).",
       "Exit 137 is SIGKILL (often the OOM killer); 134 and 139 are SIGABRT and SIGSEGV (look for core dumps)."),
    _c("unknown-death", "job", "derived", None,
       "The job stopped without writing its summary: it was killed from outside (SIGKILL, host OOM killer, preemption).",
       "Check the kernel log on the nodes for OOM kills: dmesg -T | grep -i -e oom -e 'killed process'.",
       "Check the scheduler's record: scontrol show job {slurm_id} (PREEMPTED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY).",
       "For a gpuops job: {diagnose} reads the box's records (exit record, boot id, OOM counters, kernel log).",
       "If it recurs, run with RAY=1 so the TSDB survives for the next post-mortem."),
    _c("stage-fail", "job", "exit", None,
       "A stage of the job failed (not by timeout); its exit code is in the evidence.",
       "Read the output of that stage just before its FAILED line.",
       "Check the exit code: 137 SIGKILL, 134 SIGABRT, 139 SIGSEGV, 1 a generic error."),
)

CLASS_BY_NAME = {c.name: c for c in CLASSES}
PRIORITY = {c.name: i for i, c in enumerate(CLASSES)}
CLASS_NAMES = tuple(c.name for c in CLASSES)

# Stage banners of the harness (`== <Stage> TIMEOUT`) that name a class of their own.
TIMEOUT_CLASS_BY_STAGE = {
    "Preflight": "preflight-timeout",
    "Docker pull": "pull-timeout",
    "Pull": "pull-timeout",
    "ECC check": "ecc-timeout",
    "Training": "train-timeout",
}

# ---------------------------------------------------------------------- signatures
#
# target: a class name; HARMLESS; or an aux marker the scanner records (AUX_*).
# rule (optional): how the scanner must confirm or re-route a match:
#   "killed"      a shell's kill notice: the line is just "Killed" (after a task prefix such as
#                 "3: "), or bash's "<pid> Killed  <command>" job report
#   "word"        no letter, digit or underscore right before the match
#   "training"    counts only after the first completed step
#   "linehas:RX"  the same line must also match RX
#   "exit"        the line carries an exit code; EXIT_ROUTES decides the class
#   "signal"      the line names a signal; SIGNAL_ROUTES decides the class
#   "xid"         an NVRM Xid line: a fatal code (gpuops.xid) is gpu-fault, any other cuda-error
#   "banner"      a harness stage banner (== Stage VERB): starts the line, after a task prefix
#                 and an optional [timestamp]

HARMLESS = "harmless"
AUX_SUMMARY, AUX_STATUS, AUX_PASSTHROUGH, AUX_CONFIG = "summary", "status", "passthrough", "config"
AUX_RAY, AUX_TUNNEL, AUX_PROM = "ray", "tunnel", "prometheus"
AUX_SELF_DEATH, AUX_RESTORE, AUX_SLURM_ID, AUX_BANNER = "self-death", "restore", "slurm-id", "banner"
AUX_SUCCESS = "success"
STEP = "step"


class Signature(NamedTuple):
    id: str
    target: str
    pattern: str
    rule: Optional[str] = None


def _s(id, target, pattern, rule=None):
    return Signature(id, target, pattern, rule)


SIGNATURES = (
    # -- known-harmless lines: seen in healthy jobs; a line holding one is never reported
    _s("h_cuinit", HARMLESS, r"Failed call to cuInit"),
    _s("h_cuda_internal", HARMLESS, r"INTERNAL: CUDA error"),
    _s("h_mscclpp", HARMLESS, r"NCCL WARN MSCCL\+\+: Feature not enabled"),
    _s("h_tokenizer", HARMLESS, r"Token indices sequence length is longer than the specified maximum"),
    _s("h_oci_exec", HARMLESS, r"OCI runtime exec failed"),
    _s("h_exec_fallback", HARMLESS, r"\[exec\] docker exec failed"),
    _s("h_cgroup_nothing", HARMLESS, r"\[cgroup\] Sent SIGKILL to 0/0 processes"),
    _s("h_cpu_core", HARMLESS, r"Cannot read CPU core"),
    _s("h_tpu_probe", HARMLESS, r"No hardware is found\. Using default TPU version"),
    _s("h_trace_probe", HARMLESS, r"No device identifiers found"),
    _s("h_pjrt_tpu", HARMLESS, r"Enabling PjRt/TPU event dependency logging"),
    _s("h_fiber", HARMLESS, r"Fiber init: default domain = futex"),
    _s("h_docker_teardown", HARMLESS, r"Error response from daemon: cannot remove container"),
    _s("h_srun_terminating", HARMLESS, r"srun: Terminating StepId="),

    # -- infrastructure
    _s("pull_failed", "container-pull-fail", r"\[ERROR\] Pull failed for"),
    _s("pull_auth", "container-pull-fail", r"\[ERROR\] Authenticated pull failed"),
    _s("pull_login", "container-pull-fail", r"\[ERROR\] Login to [^\r\n]*failed"),
    _s("pull_denied", "container-pull-fail", r"pull access denied for"),
    _s("pull_manifest", "container-pull-fail", r"manifest unknown"),
    _s("pull_pyxis", "container-pull-fail", r"pyxis: failed to import docker image"),
    _s("load_failed", "container-load-fail", r"\[ERROR\] Unable to determine image name or ID from docker load output"),
    _s("no_gpu", "no-gpu", r"WARNING: No GPU devices detected"),
    _s("no_cuda_gpu", "no-gpu", r"No CUDA GPUs are available"),
    _s("no_driver", "no-gpu", r"Found no NVIDIA driver on your system"),
    _s("smi_no_driver", "no-gpu", r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
    _s("nic_autodetect", "nccl-nic-fail", r"Failed to auto-detect NCCL_SOCKET_IFNAME"),
    _s("nic_bootstrap", "nccl-nic-fail", r"Bootstrap : no socket interface found"),
    _s("port_coord", "port-fail", r"FATAL: Could not find a free port for (?:JAX coordinator|Ray)"),
    _s("port_in_use", "port-fail", r"Address already in use"),
    _s("port_eaddrinuse", "port-fail", r"EADDRINUSE"),
    _s("model_unknown", "model-not-found", r"!!! Unknown model:"),
    _s("model_resolution", "model-not-found", r"!!! Model name resolution failed"),
    _s("patch_checkout", "patch-branch-fail", r"\[FAIL\] Failed to check out"),
    _s("ray_head_failed", "ray-start-fail", r"\[Ray\] HEAD failed to start"),
    _s("ray_head_timeout", "ray-start-fail", r"\[Ray\] HEAD timeout"),
    _s("ray_worker_failed", "ray-start-fail", r"\[Ray\] WORKER failed"),
    _s("rdzv_timeout", "rendezvous-fail", r"RendezvousTimeoutError"),
    _s("rdzv_conn", "rendezvous-fail", r"RendezvousConnectionError"),
    _s("rdzv_state", "rendezvous-fail", r"RendezvousStateError"),
    _s("rdzv_wait", "rendezvous-fail", r"Timed out waiting for rendezvous"),
    _s("rdzv_etcd", "rendezvous-fail", r"Failed to connect to etcd"),
    _s("dist_init_timeout", "rendezvous-fail", r"Distributed initialization timed out"),
    _s("dist_store", "rendezvous-fail", r"DistStoreError"),
    _s("dist_env", "rendezvous-fail", r"Missing required environment variables"),

    # -- harness stage banners: == <Stage> TIMEOUT / FAILED (exit=N) / START ...
    _s("banner", AUX_BANNER, r"== [A-Z][A-Za-z0-9 ._/-]{0,40}", "banner"),

    # -- training failures
    _s("hb_unhealthy", "heartbeat-timeout", r"The following tasks are unhealthy"),
    _s("hb_crashed", "heartbeat-timeout", r"The tasks have crashed"),
    _s("hb_stopped", "heartbeat-timeout", r"stopped sending heartbeats"),
    _s("oom_killed", "oom-host", r"Killed", "killed"),
    _s("oom_killed_process", "oom-host", r"Killed process \d+"),
    _s("oom_kill_dash", "oom-host", r"oom-kill"),
    _s("oom_kill_underscore", "oom-host", r"oom_kill"),
    _s("oom_kernel", "oom-host", r"Out of memory", "yield:oom-gpu"),
    _s("oom_cgroup", "oom-host", r"Memory cgroup out of memory"),
    _s("oom_k8s", "oom-host", r"OOMKilled"),
    _s("oom_python", "oom-host", r"MemoryError", "word"),
    _s("gpu_oom_const", "oom-gpu", r"OUT_OF_MEMORY"),
    _s("gpu_xla_error", "oom-gpu", r"XLA_ERROR"),
    _s("gpu_resource_camel", "oom-gpu", r"ResourceExhausted"),
    _s("gpu_resource", "oom-gpu", r"RESOURCE_EXHAUSTED"),
    _s("gpu_oom_text", "oom-gpu", r"out of memory"),
    _s("gpu_oom_torch", "oom-gpu", r"OutOfMemoryError"),
    _s("gpu_cublas_alloc", "oom-gpu", r"CUBLAS_STATUS_ALLOC_FAILED"),
    _s("gpu_cuda_alloc", "oom-gpu", r"cudaErrorMemoryAllocation"),
    _s("gpu_hip_oom", "oom-gpu", r"hipErrorOutOfMemory"),
    _s("disk_enospc", "disk-full", r"No space left on device"),
    _s("disk_iostream", "disk-full", r"iostream error"),
    _s("disk_errno28", "disk-full", r"\[Errno 28\]"),
    _s("disk_quota", "disk-full", r"Disk quota exceeded"),
    _s("disk_torch_writer", "disk-full", r"PytorchStreamWriter failed writing file"),
    _s("disk_enospc_const", "disk-full", r"ENOSPC"),
    _s("ckpt_save_error", "checkpoint-save-fail", r"CheckpointSaveError", "yield:disk-full"),
    _s("ckpt_save_text", "checkpoint-save-fail", r"Failed to save checkpoint", "yield:disk-full"),
    _s("ckpt_load_error", "checkpoint-load-fail", r"CheckpointLoadError"),
    _s("ckpt_state_dict", "checkpoint-load-fail", r"Error\(s\) in loading state_dict"),
    _s("ckpt_load_text", "checkpoint-load-fail", r"Failed to load checkpoint"),
    _s("ckpt_weights_only", "checkpoint-load-fail", r"Weights only load failed"),
    _s("gpu_xid", "gpu-fault", r"NVRM: Xid", "xid"),
    _s("gpu_off_bus", "gpu-fault", r"fallen off the bus"),
    _s("gpu_ecc", "gpu-fault", r"uncorrectable ECC error"),
    _s("cuda_illegal_access", "cuda-error", r"an illegal memory access was encountered"),
    _s("cuda_device_assert", "cuda-error", r"device-side assert triggered"),
    _s("nccl_warn_timeout", "nccl-timeout", r"NCCL WARN Timeout"),
    _s("nccl_error", "nccl-timeout", r"NCCL error"),
    _s("nccl_warn", "nccl-timeout", r"NCCL WARN", "training"),
    _s("nccl_timeout_waiting", "nccl-timeout", r"Timeout waiting for"),
    _s("nccl_system", "nccl-timeout", r"ncclSystemError"),
    _s("nccl_internal", "nccl-timeout", r"ncclInternalError"),
    _s("nccl_cuda", "nccl-timeout", r"ncclUnhandledCudaError"),
    _s("nccl_remote", "nccl-timeout", r"ncclRemoteError"),
    _s("nccl_watchdog", "nccl-timeout", r"Watchdog caught collective operation timeout"),
    _s("nccl_watchdog_stuck", "nccl-timeout", r"ProcessGroupNCCL's watchdog got stuck"),
    _s("nccl_aborted", "nccl-timeout", r"NCCL communicator was aborted"),
    _s("nccl_backend", "nccl-timeout", r"DistBackendError"),
    _s("xla_compile", "xla-compile-fail", r"INTERNAL: Failed to compile"),
    _s("xla_compilation", "xla-compile-fail", r"XLA compilation failed"),
    _s("xla_hlo_error", "xla-compile-fail", r"HloModule", "linehas:(?:[Ee]rror|ERROR|[Ff]ailed|FAILED)"),
    _s("traceback", "python-exception", r"Traceback \(most recent call last\):"),
    _s("sub_killed_by", "signal-kill", r"Training subprocess killed by", "signal"),
    _s("segfault", "signal-kill", r"Segmentation fault"),
    _s("aborted_core", "signal-kill", r"Aborted \(core dumped\)"),
    _s("fatal_python", "signal-kill", r"Fatal Python error"),
    _s("torch_signal", "signal-kill", r"Signal \d+ \(SIG[A-Z0-9]+\) received by PID", "signal"),
    _s("torch_got_signal", "signal-kill", r"got signal: \d+", "signal"),
    _s("sub_exit", "subprocess-fail", r"Training subprocess exited with code", "exit"),
    _s("torch_exitcode", "subprocess-fail", r"exitcode[ \t]*: -?\d+", "exit"),
    _s("torch_failed_exitcode", "subprocess-fail", r"failed \(exitcode: -?\d+\)", "exit"),
    _s("torch_child_failed", "subprocess-fail", r"ChildFailedError"),
    _s("deepspeed_exit", "subprocess-fail", r"exits with return code", "exit"),
    _s("actor_failed", "actor-fail", r"Actor failed:"),
    _s("actor_died", "actor-fail", r"The actor died unexpectedly"),
    _s("actor_died_error", "actor-fail", r"ActorDiedError"),
    _s("ray_actor_error", "actor-fail", r"RayActorError"),

    # -- job level
    _s("cancelled", "cancelled", r"CANCELLED", "word"),
    _s("node_exit", "node-fail", r"NODE_EXIT host=", "exit"),
    _s("srun_exit", "node-fail", r"Exited with exit code \d+", "exit"),
    _s("node_failure", "node-fail", r"Node failure on"),
    _s("node_fail_state", "node-fail", r"NODE_FAIL"),
    _s("topology_change", "node-fail", r"TopologyChangeError"),

    # -- facts the projection and the report need
    _s("summary", AUX_SUMMARY, r"JOB SUMMARY"),
    _s("status", AUX_STATUS, r"Status:[ \t]*[A-Z]+"),
    _s("passthrough", AUX_PASSTHROUGH, r"PASSTHROUGH_ARGS"),
    _s("config", AUX_CONFIG, r"Config param (?:checkpoint_period|steps|enable_checkpointing): "),
    _s("ray", AUX_RAY, r"RAY=[01]"),
    _s("tunnel", AUX_TUNNEL, r"ssh [^\r\n]*-L ?\d+:"),
    _s("prometheus", AUX_PROM, r"\[Prometheus\] Started on port \d+"),
    _s("self_polled", AUX_SELF_DEATH, r"Polled error from coordination service"),
    _s("self_terminating", AUX_SELF_DEATH, r"Terminating process because the JAX distributed service detected fatal errors"),
    _s("restore_none", AUX_RESTORE, r"No existing checkpoints found, not restoring checkpoint"),
    _s("restore_step", AUX_RESTORE, r"restoring from this run's directory step \d+"),
    _s("slurm_id", AUX_SLURM_ID, r"SLURM_JOB_ID=\d+"),
    _s("hf_done", AUX_SUCCESS, r"Training completed\. Do not forget to share your model"),
)

# Exit-code routing for "exit" rules: which class an exit code means on that kind of line.
# "cancel" marks the cancellation mechanism (130/143); None drops the line.
EXIT_ROUTES = {
    "sub_exit": {0: None, 130: "cancel", 143: "cancel"},
    "torch_exitcode": {0: None, -9: "oom-host", -15: "cancel", -2: "cancel", "negative": "signal-kill"},
    "torch_failed_exitcode": {0: None, -9: "oom-host", -15: "cancel", -2: "cancel", "negative": "signal-kill"},
    "deepspeed_exit": {0: None, 130: "cancel", 143: "cancel", -15: "cancel", -9: "oom-host"},
    "node_exit": {0: None, 130: "cancel", 143: "cancel"},
    "srun_exit": {0: None, 130: "cancel", 143: "cancel", 137: "oom-host"},
}
EXIT_CODE_PATTERNS = {
    "sub_exit": r"exited with code (-?\d+)",
    "torch_exitcode": r"exitcode\s*: (-?\d+)",
    "torch_failed_exitcode": r"exitcode: (-?\d+)",
    "deepspeed_exit": r"return code\s*=?\s*(-?\d+)",
    "node_exit": r"exit=(-?\d+)",
    "srun_exit": r"exit code (-?\d+)",
}
# Signal routing for "signal" rules (by signal name or number).
SIGNAL_ROUTES = {"SIGTERM": "cancel", "SIGINT": "cancel", "SIGHUP": "cancel", "SIGKILL": "oom-host",
                 "15": "cancel", "2": "cancel", "1": "cancel", "9": "oom-host"}
SIGNAL_ROUTE_OVERRIDES = {"sub_killed_by": {"SIGKILL": "signal-kill", "9": "signal-kill"}}
# Lines printed when a stop signal arrives (not when a process is later found dead): what comes
# after them is a consequence of the stop.
STOP_SIGNAL_SIGNATURES = ("torch_got_signal",)

# A launcher's own report that the job failed: ends a log that has no JOB SUMMARY (torchrun's
# ChildFailedError block, DeepSpeed's launcher line).
END_REPORT_SIGNATURES = ("torch_child_failed", "deepspeed_exit")

# Where the procedure's checklists look (heartbeat false positives, restored runs).
ACCUSED_TASK_PATTERN = r"/task:(\d+)"
TASK_PREFIX_PATTERN = r"^[ \t]*(?:(\d+): |\[(?:rank|default)(\d+)\]:)"

# Crash evidence that makes a heartbeat accusation a true positive when it precedes it on an
# accused task (a traceback, an NCCL error, or a SIGKILL / OOM kill).
HEARTBEAT_TRUE_POSITIVE = ("python-exception", "nccl-timeout", "oom-host", "signal-kill", "oom-gpu")
