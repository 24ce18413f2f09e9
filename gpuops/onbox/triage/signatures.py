"""What triage knows, as data: log signatures, how matches are routed, harmless lines, constants.

Nothing here runs; `matcher` compiles the patterns and `scan`/`classify` interpret the rules. The
failure classes themselves are in classes.py (re-exported here).

Pattern rules: every pattern starts with a literal character (the compiled alternation relies on
it to skip quickly through text) and uses only syntax that `matcher.to_ere` can translate for
grep -E: literals, escapes, classes, (?:...), quantifiers, \\d \\s \\S \\w. No look-arounds.
"""

from typing import NamedTuple, Optional

from . import frameworks as FW
from .classes import CLASS_BY_NAME, CLASS_NAMES, CLASSES, PRIORITY  # noqa: F401

# ---------------------------------------------------------------------- constants of the procedure

# Step lines, the steady-state step time and the stall bar are the progress policy shared with
# `gpuops status` (gpuops.onbox.triage.steps).
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
DATA_KEYS = ("status", "primary", "also", "stage", "evidence", "progress", "next", "advice")

# Slurm job states, normalised to their first word in upper case.
SLURM_ALIVE = ("RUNNING", "CONFIGURING", "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "REQUEUED")
# Slurm's words for an end the scheduler itself caused (the log may say nothing of it).
SLURM_ENDED_IT = ("PREEMPTED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
SLURM_CANCELLED = "CANCELLED"  # Slurm's (and the harness summary's) word, which gpuops' table also has
SLURM_ENDED = ("COMPLETED", "COMPLETING", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL",
               "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT")


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
#   "linehas:RX"  the same line must also match RX
#   "exit"        the line carries an exit code; EXIT_ROUTES decides the class
#   "signal"      the line names a signal; SIGNAL_ROUTES decides the class
#   "xid"         an NVRM Xid line: a fatal code (gpuops.xid) is gpu-fault, any other cuda-error
#   "banner"      a harness stage banner (== Stage VERB): starts the line, after a task prefix
#                 and an optional [timestamp]
#   "cancel"      a CANCELLED word: Slurm's reason on the line (DUE TO ...) picks the class; a
#                 `*** STEP` cancel after a task already failed is srun tearing the rest down
#                 (--kill-on-bad-exit), a consequence, and is dropped
#   "yield:CLASS|CLASS"  dropped when one of these classes matched on the same line (the more specific reading)
#   "keras_epoch" / "keras_done"  Keras's epoch header, and its bar finished in the last epoch
#   "final_save"  a checkpoint saved at the epoch count the config asks for (frameworks.py)
#   "ctx:NAME"    (an AUX_CONTEXT line) a frame of the traceback being printed names where it fails:
#                 the scanner remembers NAME for that task until its next traceback header
#   "after:NAME"  dropped unless the same task's current traceback named NAME (within TRACEBACK_SPAN
#                 lines): a generic exception line that means one thing only in that place

HARMLESS = "harmless"
AUX_SUMMARY, AUX_STATUS, AUX_PASSTHROUGH, AUX_CONFIG = "summary", "status", "passthrough", "config"
AUX_RAY, AUX_TUNNEL, AUX_PROM = "ray", "tunnel", "prometheus"
AUX_SELF_DEATH, AUX_RESTORE, AUX_SLURM_ID, AUX_BANNER = "self-death", "restore", "slurm-id", "banner"
AUX_SUCCESS, AUX_FRAMEWORK, AUX_RESTART, AUX_TOTAL = "success", "framework", "restart", "total"
AUX_PROGRESS, AUX_CONTEXT, AUX_RANKS = "progress", "context", "ranks"
STEP = "step"


class Signature(NamedTuple):
    id: str
    target: str
    pattern: str
    rule: Optional[str] = None


def _s(id, target, pattern: str, rule=None):
    return Signature(id, target, pattern, rule)


_BASE = (
    # -- known-harmless lines: seen in healthy jobs; a line holding one is never reported
    _s("h_cuinit", HARMLESS, r"Failed call to cuInit"),
    _s("h_cuda_internal", HARMLESS, r"INTERNAL: CUDA error"),
    _s("h_mscclpp", HARMLESS, r"NCCL WARN MSCCL\+\+: Feature not enabled"),
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
    # pytorch/pytorch c10/cuda/CUDAFunctions.cpp (device_count_impl, cudaErrorInsufficientDriver): raised at
    # torch.cuda's lazy init (torch/cuda/__init__.py), and only warned ("CUDA initialization: ...") by
    # torch.cuda.is_available(), after which a script may go on without the GPU
    _s("driver_too_old", "driver-too-old", r"The NVIDIA driver on your system is too old"),
    _s("driver_too_old_warn", "driver-too-old", r"CUDA initialization: The NVIDIA driver on your system is too old"),
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
    _s("hub_offline", "hub-download-fail", r"OfflineModeIsEnabled"),
    _s("hub_gated", "hub-download-fail", r"GatedRepoError"),
    _s("hub_gated_text", "hub-download-fail", r"Cannot access gated repo"),
    _s("hub_restricted", "hub-download-fail", r"is restricted\. You must have access to it and be authenticated"),
    _s("hub_no_connect", "hub-download-fail", r"We couldn't connect to 'https://huggingface\.co'"),
    _s("hub_local_entry", "hub-download-fail", r"LocalEntryNotFoundError"),
    _s("hub_pool", "hub-download-fail", r"HTTPSConnectionPool\(host='(?:huggingface\.co|cdn-lfs|hf-mirror)"),
    _s("hub_401", "hub-download-fail", r"Unauthorized for url: https://huggingface\.co"),
    # python/cpython Modules/main.c ("%ls: can't open file %R: [Errno %d] %s"), exit 2
    _s("py_cant_open", "launch-fail", r"can't open file"),
    # bminor/bash execute_cmd.c ("command not found"), exit 127
    _s("sh_not_found", "launch-fail", r": command not found"),
    _s("rdzv_timeout", "rendezvous-fail", r"RendezvousTimeoutError"),
    _s("rdzv_conn", "rendezvous-fail", r"RendezvousConnectionError"),
    _s("rdzv_state", "rendezvous-fail", r"RendezvousStateError"),
    # A node joining a rendezvous that another node's agent already closed (its job ended there, on
    # success or failure): pytorch/pytorch torch/distributed/elastic/rendezvous/api.py (the class),
    # dynamic_rendezvous.py ("The node '%s' detected that rendezvous was closed"), etcd_rendezvous.py
    # ("Rendezvous for run_id=%s was observed to be closed": the etcd backend Kubeflow's elastic jobs use)
    _s("rdzv_closed", "rendezvous-fail", r"RendezvousClosedError"),
    _s("rdzv_closed_seen", "rendezvous-fail", r"detected that rendezvous was (?:permanently )?closed"),
    _s("rdzv_closed_etcd", "rendezvous-fail", r"was observed to be closed"),
    _s("rdzv_wait", "rendezvous-fail", r"Timed out waiting for rendezvous"),
    _s("rdzv_etcd", "rendezvous-fail", r"Failed to connect to etcd"),
    _s("dist_init_timeout", "rendezvous-fail", r"Distributed initialization timed out"),
    _s("dist_store", "rendezvous-fail", r"DistStoreError"),
    _s("dist_env", "rendezvous-fail", r"Missing required environment variables"),

    # -- harness stage banners: == <Stage> TIMEOUT / FAILED (exit=N) / START ...
    _s("banner", AUX_BANNER, r"== [A-Za-z][A-Za-z0-9 ._/-]{0,40}", "banner"),

    # -- training failures
    _s("hb_unhealthy", "heartbeat-timeout", r"The following tasks are unhealthy"),
    _s("hb_crashed", "heartbeat-timeout", r"The tasks have crashed"),
    _s("hb_stopped", "heartbeat-timeout", r"stopped sending heartbeats"),
    _s("oom_killed", "oom-host", r"Killed", "killed"),
    _s("oom_killed_process", "oom-host", r"Killed process \d+"),
    _s("oom_kill_dash", "oom-host", r"oom-kill"),
    _s("oom_kill_event", "oom-host", r"oom_kill event"),
    _s("dl_worker_killed", "oom-host", r"killed by signal: Killed"),
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
    # Shared memory before disk: the same "No space left on device" under /dev/shm (or torch's
    # /torch_* shm files) is the container's tiny shm, not a full disk.
    _s("shm_insufficient", "shm-exhausted", r"insufficient shared memory"),
    _s("shm_bus_worker", "shm-exhausted", r"Unexpected bus error encountered in worker"),
    _s("shm_bus_signal", "shm-exhausted", r"killed by signal: Bus error"),
    _s("shm_torch_file", "shm-exhausted", r"unable to write to file </torch_"),
    _s("shm_nccl_extend", "shm-exhausted", r"failed to extend /dev/shm"),
    # A POSIX semaphore (a DataLoader's queues lock with one) lives in /dev/shm: ENOSPC while creating
    # one is shared memory, not the disk. python/cpython Lib/multiprocessing/synchronize.py
    # (SemLock.__init__: `sl = self._semlock = _multiprocessing.SemLock(`); CONTEXT_ROUTES re-routes.
    _s("ctx_semlock", AUX_CONTEXT, r"SemLock", "ctx:semlock"),
    _s("ctx_synchronize", AUX_CONTEXT, r"multiprocessing/synchronize\.py", "ctx:semlock"),
    _s("shm_path", "shm-exhausted", r"/dev/shm", "linehas:No space left on device|Errno 28|ENOSPC"),
    _s("disk_enospc", "disk-full", r"No space left on device", "yield:shm-exhausted"),
    _s("disk_iostream", "disk-full", r"iostream error"),
    _s("disk_errno28", "disk-full", r"\[Errno 28\]", "yield:shm-exhausted"),
    _s("disk_quota", "disk-full", r"Disk quota exceeded"),
    _s("disk_torch_writer", "disk-full", r"PytorchStreamWriter failed writing file"),
    _s("disk_enospc_const", "disk-full", r"ENOSPC", "yield:shm-exhausted"),
    _s("ckpt_save_error", "checkpoint-save-fail", r"CheckpointSaveError", "yield:disk-full"),
    _s("ckpt_save_text", "checkpoint-save-fail", r"Failed to save checkpoint", "yield:disk-full"),
    _s("ckpt_load_error", "checkpoint-load-fail", r"CheckpointLoadError"),
    _s("ckpt_state_dict", "checkpoint-load-fail", r"Error\(s\) in loading state_dict"),
    _s("ckpt_load_text", "checkpoint-load-fail", r"Failed to load checkpoint"),
    _s("ckpt_weights_only", "checkpoint-load-fail", r"Weights only load failed"),
    # torch's own per-parameter line of that error: pytorch/pytorch torch/nn/modules/module.py
    # (_load_from_state_dict: "size mismatch for {}: copying a param with shape {} from checkpoint, ...")
    _s("ckpt_size_mismatch", "checkpoint-load-fail", r"copying a param with shape"),
    # A checkpoint that cannot be opened (cut short, a git-lfs pointer, another format):
    # pytorch/pytorch caffe2/serialize/inline_container.cc ("PytorchStreamReader failed " what ": " miniz's reason),
    # torch/serialization.py (_legacy_load: "Invalid magic number; corrupt file?"),
    # huggingface/safetensors bindings/python/src/lib.rs ("Error while deserializing header: ..."),
    # huggingface/transformers src/transformers/modeling_utils.py (load_state_dict: "Unable to load weights
    # from [pytorch ]checkpoint file for ...", "Unable to locate the file ... which is necessary to load this
    # pretrained model", and a git-lfs pointer: "You seem to have cloned a repository without having git-lfs
    # installed"), python/cpython Modules/_pickle.c ("invalid load key, '%c'.")
    _s("ckpt_stream_reader", "checkpoint-load-fail", r"PytorchStreamReader failed "),
    _s("ckpt_magic", "checkpoint-load-fail", r"Invalid magic number; corrupt file"),
    _s("ckpt_safetensors_header", "checkpoint-load-fail", r"Error while deserializing header"),
    _s("ckpt_hf_unable", "checkpoint-load-fail", r"Unable to load weights from (?:pytorch )?checkpoint file"),
    _s("ckpt_hf_locate", "checkpoint-load-fail", r"which is necessary to load this pretrained"),
    _s("ckpt_lfs_pointer", "checkpoint-load-fail", r"without having git-lfs installed"),
    _s("ckpt_load_key", "checkpoint-load-fail", r"invalid load key, "),
    # python/cpython Lib/zipfile/__init__.py (BadZipFile: "File is not a zip file", "Bad CRC-32 for file %r",
    # ...): a checkpoint only inside a traceback through a loader (torch/serialization.py, Keras's
    # keras-team/keras keras/src/saving/saving_lib.py, a load_checkpoint/_weights/_model/_state_dict frame)
    _s("ctx_torch_serialization", AUX_CONTEXT, r"torch/serialization\.py", "ctx:ckptload"),
    _s("ctx_keras_saving", AUX_CONTEXT, r"saving_lib\.py", "ctx:ckptload"),
    _s("ctx_load_call", AUX_CONTEXT, r"load_(?:checkpoint|weights|model|state_dict)", "ctx:ckptload"),
    _s("ckpt_bad_zip", "checkpoint-load-fail", r"BadZipFile", "after:ckptload"),
    _s("gpu_xid", "gpu-fault", r"NVRM: Xid", "xid"),
    _s("gpu_off_bus", "gpu-fault", r"fallen off the bus"),
    _s("gpu_ecc", "gpu-fault", r"uncorrectable ECC error"),
    # torch's "CUDA error: " + cudaGetErrorString(cudaErrorNoKernelImageForDevice), then, in newer releases,
    # "Search for `<cudaGetErrorName()>' in https://docs.nvidia.com/cuda/...": pytorch/pytorch
    # c10/cuda/CUDAException.cpp (c10_cuda_check_implementation), c10/cuda/CUDAMiscFunctions.cpp (get_cuda_error_help)
    _s("cuda_no_kernel_image", "cuda-arch", r"no kernel image is available for execution on the device"),
    _s("cuda_no_kernel_image_name", "cuda-arch", r"cudaErrorNoKernelImageForDevice"),
    _s("cuda_illegal_access", "cuda-error", r"an illegal memory access was encountered"),
    _s("cuda_device_assert", "cuda-error", r"device-side assert triggered"),
    _s("cuda_cublas", "cuda-error", r"CUBLAS_STATUS_[A-Z_]+"),
    _s("cuda_cudnn", "cuda-error", r"cuDNN error"),
    _s("cuda_cudnn_status", "cuda-error", r"CUDNN_STATUS_[A-Z_]+"),
    _s("cuda_error", "cuda-error", r"CUDA error: ", "yield:oom-gpu|cuda-arch"),
    _s("nan_loss", "nan-divergence", r"loss['\"]?(?: is|:|=)[ \t]*['\"]?-?(?:nan|NaN|NAN|inf|Inf)"),
    _s("nan_loss_cap", "nan-divergence", r"Loss(?: is|:|=)[ \t]*-?(?:nan|NaN|NAN|inf|Inf)"),
    _s("nan_grad_norm", "nan-divergence", r"grad[_ ]norm['\"]?(?: is|:|=)[ \t]*['\"]?-?(?:nan|NaN|inf|Inf)"),
    _s("nan_clip", "nan-divergence", r"is non-finite, so it cannot be clipped"),
    _s("nan_anomaly", "nan-divergence", r"returned nan values in its"),
    _s("nan_jax_debug", "nan-divergence", r"invalid value \(nan\) encountered"),
    _s("tpu_lame_workers", "tpu-worker-lost", r"lame workers found"),
    _s("tpu_remote_server", "tpu-worker-lost", r"Failed to connect to remote server at address: grpc://"),
    _s("nccl_warn_timeout", "nccl-timeout", r"NCCL WARN Timeout"),
    _s("nccl_error", "nccl-timeout", r"NCCL error"),
    _s("nccl_warn", "nccl-timeout", r"NCCL WARN"),
    _s("nccl_unhandled_system", "nccl-timeout", r"unhandled system error"),
    # gloo says "closed" where a peer process died mid-collective (gloo/transport/tcp/pair.cc)
    _s("nccl_conn_reset", "nccl-timeout", r"Connection (?:reset|closed) by peer", "linehas:NCCL|gloo|c10d|ProcessGroup"),
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
    _s("aborted_core", "signal-kill", r"Aborted[ \t]+\(core dumped\)"),
    _s("fatal_python", "signal-kill", r"Fatal Python error"),
    _s("torch_signal", "signal-kill", r"Signal \d+ \(SIG[A-Z0-9]+\) received by PID", "signal"),
    _s("torch_got_signal", "signal-kill", r"got signal: \d+", "signal"),
    _s("sub_exit", "subprocess-fail", r"Training subprocess exited with code", "exit"),
    _s("torch_exitcode", "subprocess-fail", r"exitcode[ \t]*: -?\d+", "exit"),
    _s("torch_failed_exitcode", "subprocess-fail", r"failed \(exitcode: -?\d+\)", "exit"),
    _s("torch_child_failed", "subprocess-fail", r"ChildFailedError"),
    _s("torch_root_cause", "subprocess-fail", r"Root Cause \(first observed failure\)"),
    _s("accelerate_exit", "subprocess-fail", r"returned non-zero exit status", "exit"),
    _s("deepspeed_exit", "subprocess-fail", r"exits with return code", "exit"),
    _s("actor_failed", "actor-fail", r"Actor failed:"),
    _s("actor_died", "actor-fail", r"The actor died unexpectedly"),
    _s("actor_died_error", "actor-fail", r"ActorDiedError"),
    _s("ray_actor_error", "actor-fail", r"RayActorError"),

    # -- job level
    _s("cancelled", "cancelled", r"CANCELLED", "cancel"),
    _s("node_exit", "node-fail", r"NODE_EXIT host=", "exit"),
    _s("srun_exit", "node-fail", r"Exited with exit code \d+", "exit"),
    _s("node_failure", "node-fail", r"Node failure on"),
    _s("node_fail_state", "node-fail", r"NODE_FAIL"),
    _s("topology_change", "node-fail", r"TopologyChangeError"),

    # -- facts the projection and the report need
    _s("summary", AUX_SUMMARY, r"JOB SUMMARY"),
    _s("status", AUX_STATUS, r"Status:"),
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
    # How many ranks the job has (a hang's likely cause depends on it): NVIDIA/nccl src/init.cc ("NCCL version
    # %s": a collective library came up), pytorch/pytorch torch/distributed/elastic/agent/server/api.py
    # ("global_world_sizes=[N, ...]"), microsoft/DeepSpeed deepspeed/launcher/launch.py ("dist_world_size=N"),
    # torch/distributed/run.py (torchrun's --nproc-per-node / --nproc_per_node), the harness's header
    # ("== Job N on K node(s)")
    _s("ranks_nccl", AUX_RANKS, r"NCCL version \d"),
    _s("ranks_elastic", AUX_RANKS, r"global_world_sizes=\[\d+"),
    _s("ranks_deepspeed", AUX_RANKS, r"dist_world_size=\d+"),
    _s("ranks_nodes", AUX_RANKS, r"on \d+ node\(s\)"),
    _s("ranks_nproc", AUX_RANKS, r"nproc[-_]per[-_]node[= ]\d+"),
    # torch/distributed/run.py warns this only when --nproc-per-node > 1 (printed by default); open-mmlab's
    # mmdet/utils/setup_env.py warns the same words for DataLoader workers of one process (a UserWarning)
    _s("ranks_torchrun_omp", AUX_RANKS, r"Setting OMP_NUM_THREADS environment variable for each process"),
    _s("h_mm_omp", HARMLESS, r"UserWarning: Setting OMP_NUM_THREADS"),
    # W&B's footer: a run that ended well prints it, and so does one that crashed (see WEAK_SUCCESS)
    # wandb/wandb wandb/sdk/internal/sender.py, wandb/sdk/wandb_run.py
    _s("wandb_summary", AUX_SUCCESS, r"wandb: Run summary:"),
    _s("wandb_synced", AUX_SUCCESS, r"wandb: Synced \d+ W&B file"),
)

# Lines that open a block whose later lines name the cause: a cause printed within TRACEBACK_SPAN
# lines after one, by the same task, counts from the block's first line (classify.py).
BLOCK_HEADERS = ("traceback", "thread_traceback", "cxx_terminate")
# A traceback after CPython's `Exception in thread ...`: that thread died, the program may not have.
THREAD_TRACEBACK = _s("thread_traceback", "python-exception", r"Traceback \(most recent call last\):")

# What each framework prints at the ends of a run (frameworks.py), as signatures.
_KIND_TARGET = {"detect": AUX_FRAMEWORK, "done": AUX_SUCCESS, "weak": AUX_SUCCESS, "noise": HARMLESS,
                "restart": AUX_RESTART, "total": AUX_TOTAL, "progress": AUX_PROGRESS}
SIGNATURES = _BASE + tuple(_s(e.id, e.target or _KIND_TARGET[e.kind], e.pattern, e.rule) for e in FW.ENTRIES)

# Exit-code routing for "exit" rules: which class an exit code means on that kind of line.
# "cancel" marks the cancellation mechanism (130/143); None drops the line.
EXIT_ROUTES = {
    "sub_exit": {0: None, 130: "cancel", 143: "cancel"},
    "torch_exitcode": {0: None, -9: "oom-host", -15: "cancel", -2: "cancel", "negative": "signal-kill"},
    "torch_failed_exitcode": {0: None, -9: "oom-host", -15: "cancel", -2: "cancel", "negative": "signal-kill"},
    "deepspeed_exit": {0: None, 130: "cancel", 143: "cancel", -15: "cancel", -9: "oom-host"},
    "accelerate_exit": {0: None, 130: "cancel", 143: "cancel", -15: "cancel", -9: "oom-host"},
    "node_exit": {0: None, 130: "cancel", 143: "cancel"},
    "srun_exit": {0: None, 130: "cancel", 143: "cancel", 137: "oom-host"},
}
EXIT_CODE_PATTERNS = {
    "sub_exit": r"exited with code (-?\d+)",
    "torch_exitcode": r"exitcode\s*: (-?\d+)",
    "torch_failed_exitcode": r"exitcode: (-?\d+)",
    "deepspeed_exit": r"return code\s*=?\s*(-?\d+)",
    "accelerate_exit": r"exit status (-?\d+)",
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

# Terminal evidence of a failure in a log without a JOB SUMMARY: a launcher's own report
# (torchrun's ChildFailedError block, DeepSpeed's and Accelerate's exit lines, srun's task exit),
# a crash the shell reported (core dumped, bash's Killed), Slurm's OOM-kill event, a harness stage
# that FAILED. The launcher's class is kept beside the class its exit code routes to (DeepSpeed's
# -9 is oom-host *and* the launcher's report).
END_REPORT_SIGNATURES = ("torch_child_failed", "torch_root_cause", "deepspeed_exit", "accelerate_exit",
                         "srun_exit", "sub_exit", "aborted_core", "segfault", "fatal_python", "oom_killed",
                         "oom_kill_event", "banner")
# Completion markers that the end of a failed run prints too (W&B syncs on a crash as well): they
# mean completed only when no failure ended the run.
WEAK_SUCCESS_SIGNATURES = ("wandb_summary", "wandb_synced") + tuple(e.id for e in FW.ENTRIES if e.kind == "weak")
# Slurm's reason for a cancel, on its `*** JOB|STEP ... CANCELLED AT ... DUE TO <reason>` line.
CANCEL_REASONS = ((b"DUE TO TIME LIMIT", "timeout"), (b"DUE TO PREEMPTION", "preempted"),
                  (b"DUE TO JOB REQUEUE", "preempted"), (b"DUE TO NODE FAIL", "node-fail"))
# Which framework a line shows (frameworks.py), and the error lines that only one family prints.
FRAMEWORK_OF = dict(FW.FRAMEWORK_OF, gpu_oom_torch="torch", gpu_resource="jax", gpu_resource_camel="jax",
                    gpu_xla_error="jax", xla_oom="jax")
# A framework's own handling of a stop signal: the job was stopped (frameworks.py, kind cancel).
FRAMEWORK_CANCEL = tuple(e.id for e in FW.ENTRIES if e.kind == "cancel")
# Lines that healthy runs print too, or that a run survives as often as not: a class worth listing,
# but not a sign that the process ended (a warning, a retried bind, a metric printed as NaN). Any
# other failure line with nothing but noise after it ends the run (see status.py).
SOFT_SIGNATURES = ("port_in_use", "port_eaddrinuse", "nccl_warn", "nccl_warn_timeout", "nccl_conn_reset",
                   "nccl_timeout_waiting", "gpu_oom_text", "nan_loss", "nan_loss_cap", "nan_grad_norm",
                   "hub_offline", "hub_no_connect", "hub_local_entry", "hub_pool", "no_gpu", "thread_traceback",
                   "driver_too_old_warn")

# A class that means another where the same task's traceback named a context ("ctx:NAME" rules):
# ENOSPC while creating a semaphore is /dev/shm, not the disk.
CONTEXT_ROUTES = {("disk-full", "semlock"): "shm-exhausted"}

# Where the procedure's checklists look (heartbeat false positives, restored runs).
ACCUSED_TASK_PATTERN = r"/task:(\d+)"
TASK_PREFIX_PATTERN = r"^[ \t]*(?:(\d+): |\[(?:rank|default)(\d+)\]:)"

# Crash evidence that makes a heartbeat accusation a true positive when it precedes it on an
# accused task (a traceback, an NCCL error, or a SIGKILL / OOM kill).
HEARTBEAT_TRUE_POSITIVE = ("python-exception", "nccl-timeout", "oom-host", "signal-kill", "oom-gpu")
