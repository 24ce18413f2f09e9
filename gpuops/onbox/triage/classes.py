"""The failure classes, in priority order, with what each means and what to do next.

A class's steps are the ones for a torch log (the default); a framework whose advice differs has
its own (framework_advice.py: JAX/MaxText, Keras, DeepSpeed, vLLM, ...).

Names and order follow the MaxText-on-Slurm triage procedure (seed 002): infrastructure, stage
timeouts, training failures, job level. Classes the procedure has no row for are marked
`extension`: torchrun / HF Trainer / DeepSpeed / Lightning failures, the scheduler's own reasons
(time limit, preemption) and the host-side traps of rented boxes (/dev/shm, downloads).

Each class has a `role`, which decides how it competes for the primary slot (see classify.py):
    root        a specific cause (OOM, NCCL, disk full, image pull, ...)
    cause       carries a cause but is generic (a traceback, a crash signal, a Ray actor error)
    exit        only reports that something exited non-zero (a node, a stage, a subprocess)
    mechanism   how the job was stopped, not why (cancel, a time limit, preemption)
    derived     concluded from step progress and job state, not from a log line (hang, death)
    minor       worth saying, never the reason a job ended (Ray bootstrap falls back to no Ray)

`gotcha` names the entry of references/gotchas.toml the class illustrates, if any.
"""

from typing import NamedTuple, Optional


class FailureClass(NamedTuple):
    name: str
    table: str              # infrastructure | timeout | training | job | extension
    role: str
    stage: Optional[str]    # None: the stage comes from the log (banners, training or not)
    what: str               # one plain sentence for "what happened"
    steps: tuple            # advice, and commands: see the note above _c
    gotcha: Optional[str] = None


# A step is prose for a person, with {job_dir} filled in (gpuops.onbox.triage.advice). Three steps are
# commands instead: STOP, DIAGNOSE and SCONTROL become runnable next steps when their arguments
# are known (the job is live and its id known; a gpuops job; a Slurm id), and are left out
# otherwise. A step starting with ENDED is a post-mortem check, left out while the job is alive.
STOP, DIAGNOSE, SCONTROL = "{stop}", "{diagnose}", "{scontrol}"
ENDED = "{ended} "


def _c(name, table, role, stage, what, *steps, gotcha=None):
    return FailureClass(name, table, role, stage, what, tuple(steps), gotcha)


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
    _c("launch-fail", "extension", "root", "Job start",
       "The job's command could not start: its program, interpreter or script was not found or is not "
       "executable (exit 127 command not found, 126 not executable; python's \"can't open file\").",
       "Check the path the command names on the box, relative to the job's working directory (launch "
       "--workdir); push the code first (gpuops push) if it is not there yet.",
       "For 'command not found': the program is not on the PATH of the job's shell (a virtualenv not "
       "activated, a module not loaded): name it by its full path.",
       "For 'Permission denied' (exit 126): chmod +x the script, or run it through its interpreter "
       "(python3 train.py, bash run.sh)."),
    _c("ray-start-fail", "infrastructure", "minor", "Ray init",
       "The Ray cluster did not start; training continues without Ray (no dashboards, no TSDB).",
       "Nothing is needed for training itself: it falls back to running without Ray.",
       "If you need the dashboards: check for port conflicts on the head node.",
       "Read the Ray logs in the job directory ({job_dir}/ray_logs)."),
    _c("rendezvous-fail", "extension", "root", "Job start",
       "The distributed rendezvous did not complete: workers could not find each other in time, or the "
       "rendezvous was already closed (another node's agent ended the job and closed it; a late or restarted "
       "node is then refused).",
       "Check that every node uses the same --rdzv-id / rendezvous endpoint and that the endpoint (etcd or the c10d store) is up.",
       "If it was closed (RendezvousClosedError, 'observed to be closed'), that is a consequence: read the other "
       "nodes' output for what ended the job first (the node whose agent printed 'has closed the rendezvous').",
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
       STOP,
       "On resubmit add _env_NCCL_DEBUG=INFO and watch step progress (slurm_job_monitor.sh -j with the new job's id) "
       "to catch the next stall early."),
    _c("heartbeat-timeout", "training", "root", "Training",
       "The JAX coordination service declared tasks dead because their heartbeats stopped; this mechanism is known to accuse healthy, training tasks.",
       "Treat it as a false positive unless the accused tasks crashed first (see the checklist result below).",
       "Raise jax_distributed_heartbeat_timeout_seconds to hours (for example 14400) so the faulty check cannot kill a productive run.",
       "Detect real hangs from step progress instead (slurm_job_monitor.sh), not from heartbeats.",
       "For a RAY=1 job, query the persisted TSDB (GPU utilisation, TCP retransmits, I/O pressure, memory) at the failure time to confirm the tasks were healthy."),
    _c("oom-host", "training", "root", "Training",
       "The host ran out of memory and the kernel OOM killer (or the cgroup limit) killed the process.",
       "Lower the DataLoader's num_workers: every worker holds its own copy of what the dataset keeps in RAM.",
       "Load big data lazily (memory-mapped files, datasets' Arrow tables) instead of one in-memory object.",
       ENDED + "Confirm on the node: dmesg -T | grep -i -e oom -e 'killed process', or the cgroup memory.events "
               "oom_kill counter (gpuops preflight reads it).",
       gotcha="U9"),
    _c("oom-gpu", "training", "root", "Training",
       "GPU memory ran out while compiling or running the step.",
       "Lower the per-GPU batch size and keep the effective batch with gradient accumulation "
       "(gradient_accumulation_steps).",
       "Turn on activation (gradient) checkpointing: model.gradient_checkpointing_enable() in HF, or "
       "torch.utils.checkpoint around the big blocks.",
       "Reduce fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; train in bf16 and shorten the "
       "sequence length if it still does not fit.",
       "Check that nothing else holds the GPU (nvidia-smi; gpuops reap lists the holders), then read "
       "torch.cuda.memory_summary() at the failure.",
       gotcha="U10"),
    _c("disk-full", "extension", "root", "Training",
       "A write failed because the disk (or the quota) was full, often while saving a checkpoint.",
       "Check free space and inodes where the job writes: df -h PATH; df -i PATH.",
       "Delete old checkpoints or move them off the box, then resume from the last good one.",
       "A checkpoint written during the failure may be partial: verify it before resuming from it.",
       gotcha="U6"),
    _c("shm-exhausted", "extension", "root", "Training",
       "Shared memory (/dev/shm) ran out: DataLoader workers hand batches over through it, and a container's "
       "default is only 64 MiB.",
       "Check its size on the box: df -h /dev/shm (gpuops preflight reports it).",
       "Give the container more: docker run --shm-size=16g (or --ipc=host); on Kubernetes mount an emptyDir "
       "with medium: Memory at /dev/shm.",
       "Until then, lower the DataLoader's num_workers (0 avoids shared memory entirely, at a speed cost).",
       gotcha="GEN9"),
    _c("checkpoint-save-fail", "extension", "root", "Training",
       "Saving a checkpoint failed (permissions, missing directory, or object-store credentials).",
       "Check that the checkpoint directory exists and is writable by the job's user.",
       "For S3-style storage, check the credentials and the bucket permissions (PutObject)."),
    _c("checkpoint-load-fail", "extension", "root", "Training start",
       "Restoring a checkpoint failed: missing or unexpected keys, changed shapes, or a refused unpickle.",
       "Check that the model definition matches the one that wrote the checkpoint.",
       "Try the previous checkpoint; the newest one may be partial.",
       "If torch refused to unpickle (weights_only), load with weights_only=False only for checkpoints you wrote yourself."),
    _c("nan-divergence", "extension", "root", "Training",
       "The loss or the gradients became NaN or Inf: training diverged (or an fp16 overflow went unhandled).",
       "Resume from the last checkpoint before the NaN with a lower learning rate or a longer warm-up.",
       "Clip gradients (max_grad_norm / clip_grad_norm_) and prefer bf16 over fp16 when the GPU supports it.",
       "Look for a bad batch: log the sample ids of the step that went NaN and check them for empty or extreme values."),
    _c("hub-download-fail", "extension", "root", "Training start",
       "Downloading a model or dataset failed: no network, offline mode, or a gated repository the token cannot read.",
       "Check that the box reaches the hub: curl -I https://huggingface.co (set HF_ENDPOINT to a mirror where it is blocked).",
       "For a gated model, accept its licence on the hub and export HF_TOKEN (gpuops launch --secret-env HF_TOKEN).",
       "With HF_HUB_OFFLINE=1 everything must already be in the cache (HF_HOME): download it first, then go offline."),
    _c("tpu-worker-lost", "extension", "root", "Training",
       "A TPU worker (or its host) went away: preempted, rebooted or crashed, and the other workers cannot go on.",
       "Check the TPU VM's state (gcloud compute tpus tpu-vm describe) for preemption or maintenance events.",
       "Resume from the last checkpoint; on spot/preemptible TPUs checkpoint often and restart automatically."),
    _c("gpu-fault", "extension", "root", "Training",
       "The GPU reported a hardware-level fault (a fatal Xid, an uncorrectable ECC error, or it fell off the bus).",
       "Read the kernel log on the node for NVRM Xid lines around the failure time (dmesg -T | grep -i xid).",
       "Drain the node and resubmit elsewhere; a GPU that fell off the bus needs a reset or a reboot."),
    # Which wheels have which architectures: torch/cuda/__init__.py (PYTORCH_RELEASES_CODE_CC, and the warning
    # _warn_unsupported_code prints at the first CUDA call), pytorch/pytorch.
    _c("cuda-arch", "extension", "root", "Training",
       "The GPU code the program runs was not built for this GPU's architecture: CUDA found no kernel image "
       "for its compute capability (a torch wheel, or an extension, compiled for other GPUs).",
       "The torch build lacks this GPU's architecture: compare torch.cuda.get_arch_list() with the GPU's compute "
       "capability, python3 -c 'import torch; print(torch.cuda.get_arch_list(), "
       "torch.cuda.get_device_capability())' (nvidia-smi --query-gpu=name,compute_cap --format=csv shows it "
       "too): capability X.Y needs sm_XY, or an earlier sm_X* of the same major, in that list.",
       "Install a torch wheel built for it, from a CUDA index no newer than the driver's CUDA version (nvidia-smi's "
       "header): pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cuXYZ. "
       "Blackwell (10.0, 12.0) needs cu128 or newer; in recent releases Maxwell, Pascal and Volta (5.x to 7.0) are "
       "only in the cu126 wheels. torch's own warning at its first CUDA call ('does not include kernels for this "
       "GPU') lists the indexes that have it.",
       "An extension built for other GPUs (flash-attn, xformers, a custom op) fails the same way: rebuild it "
       "with TORCH_CUDA_ARCH_LIST set to the GPU's X.Y.",
       "Before the next run, gpuops preflight on the box checks torch's arch list against its GPUs (cuda.arch).",
       gotcha="U28"),
    # pytorch/pytorch c10/cuda/CUDAFunctions.cpp ("The NVIDIA driver on your system is too old (found version N)")
    _c("driver-too-old", "extension", "root", "Training start",
       "The host's NVIDIA driver is older than the CUDA this torch build was compiled for, so torch cannot use "
       "the GPU (CUDA's insufficient-driver error); the GPU and its driver are otherwise fine.",
       "Compare the two: the driver's CUDA version in nvidia-smi's header, and the build's in python3 -c 'import "
       "torch; print(torch.__version__, torch.version.cuda)'; the build's must not be newer.",
       "Install a torch wheel for a CUDA no newer than the driver's: pip install --force-reinstall torch "
       "--index-url https://download.pytorch.org/whl/cuXYZ (pin torchvision/torchaudio with it, or pip "
       "upgrades torch again); or pick a box or image whose driver is new enough.",
       "A requirements file that pins another torch replaces the image's matching one: keep torch out of it.",
       "Before the next run, gpuops preflight checks the torch build against the box's driver (cuda.torch).",
       gotcha="U28"),
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
    _c("timeout", "extension", "mechanism", None,
       "Slurm stopped the job at its time limit (CANCELLED ... DUE TO TIME LIMIT).",
       "First rule out a hang: compare the last step with the expected step in the projection.",
       "Resume from the last checkpoint with a longer --time, or checkpoint more often so a limit costs less.",
       "Ask Slurm for a warning before the kill (sbatch --signal=B:USR1@300) and save a checkpoint on it.",
       gotcha="SLURM2"),
    _c("preempted", "extension", "mechanism", None,
       "Slurm preempted the job for a higher-priority one (CANCELLED ... DUE TO PREEMPTION, or a requeue).",
       "Nothing in the run failed: resume from the last checkpoint (sbatch --requeue resubmits it automatically).",
       "Checkpoint often enough that a preemption costs little, and save from the training loop, not the signal handler.",
       gotcha="SLURM1"),
    _c("unknown-death", "job", "derived", None,
       "The job stopped without writing its summary: it was killed from outside (SIGKILL, host OOM killer, preemption).",
       ENDED + "Check the kernel log on the nodes for OOM kills: dmesg -T | grep -i -e oom -e 'killed process'.",
       SCONTROL,
       DIAGNOSE,
       "If it recurs, run with RAY=1 so the TSDB survives for the next post-mortem."),
    _c("stage-fail", "job", "exit", None,
       "A stage of the job failed (not by timeout); its exit code is in the evidence.",
       "Read the output of that stage just before its FAILED line.",
       "Check the exit code: 137 SIGKILL, 134 SIGABRT, 139 SIGSEGV, 1 a generic error."),
)

# The hang of a job that shows one process and no collective (no ranks, no NCCL/RCCL, not a JAX
# harness that drives every GPU of a node through collectives): a collective deadlock is no
# explanation there, and NCCL or Ray advice would send the reader after the wrong cause.
HANG_ONE_PROCESS = _c(
    "hang", "training", "derived", "Training",
    "Training steps stopped advancing while the process stayed alive; the log shows a single process (no "
    "second rank, no collective library coming up), so most likely it waits in its own code (a DataLoader "
    "worker, I/O on a slow or hung mount, a lock) or on the GPU. If the job does run several ranks, read "
    "each one's stack for a peer it waits on.",
    "Read where it waits: py-spy dump --pid PID (when --stall-after stopped a gpuops run, its saved stall "
    "evidence holds the stack).",
    "If the stack is in the DataLoader, run once with num_workers=0: a worker stuck on I/O or one that died "
    "stalls the loop.",
    "If nothing is printed for a long time while the process is busy, its stdout may be block-buffered: run "
    "python -u or set PYTHONUNBUFFERED=1 (gpuops launch sets it).",
    STOP,
    gotcha="U43")

CLASS_BY_NAME = {c.name: c for c in CLASSES}
PRIORITY = {c.name: i for i, c in enumerate(CLASSES)}
CLASS_NAMES = tuple(c.name for c in CLASSES)

