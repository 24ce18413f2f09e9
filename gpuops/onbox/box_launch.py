"""The supervisor's job, started: a job directory, its immutable command, and the supervisor
(gpuops.onbox.wrapper) that runs it (gpuops.onbox.box_engine's submit)."""

import os
import socket
import time

from . import cgroup, command, gpu_pins, jobrecord, procs, wrapper
from .jobrecord import CMD, LOG

NAME = "box"


def _thread_cap():
    quota = ((cgroup.facts().get("cpu") or {}).get("quota_cores"))
    return (max(1, int(quota)), quota) if quota else (None, None)


def _job_env(spec, job_id, jdir):
    env = dict(os.environ)
    added = dict(spec.get("env") or {})
    if spec.get("gpus"):
        added["CUDA_VISIBLE_DEVICES"] = spec["gpus"]
        if "CUDA_DEVICE_ORDER" not in env and "CUDA_DEVICE_ORDER" not in added:
            added["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # so indices match nvidia-smi's
    added["PYTHONUNBUFFERED"] = "1"
    cap, quota = _thread_cap()
    caps = {}
    if cap:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            if name not in env and name not in added:
                added[name] = caps[name] = str(cap)
    env.update(added)
    env["GPUOPS_JOB_ID"], env["GPUOPS_JOB_DIR"] = job_id, jdir
    env.update(spec.get("secrets") or {})
    return env, sorted(added), ({"values": caps, "cgroup_quota_cores": quota} if caps else None)


def create(spec, body):
    """Start one job from `spec` and the bytes of its command; returns the job id.

    The caller holds the jobs-dir lock, so the GPUs --gpus names are judged against the pins of
    the jobs running (gpuops.onbox.gpu_pins) with no other launch between. `body` becomes the
    immutable `cmd` file (mode 0500).
    """
    gpu_check = gpu_pins.admit(spec) if spec.get("gpus") else None
    workdir = command.workdir(spec.get("workdir"))
    if body.startswith(b"#!"):
        command.check_shebang(body)
    job_id = jobrecord.new_id()
    jdir = jobrecord.job_dir(job_id)
    os.mkdir(jdir, 0o700)
    cmd_path = os.path.join(jdir, CMD)
    jobrecord.atomic_write(cmd_path, body, 0o500)
    argv, line_buffered = command.interpreter_argv(cmd_path, body, spec.get("args"), spec.get("pre"))
    env, env_names, caps = _job_env(spec, job_id, jdir)
    meta = {
        "job_id": job_id,
        "engine": NAME,
        "name": spec.get("name"),
        "labels": spec.get("labels") or {},
        "command": spec.get("command"),
        "kind": spec.get("kind") or "cmd",
        "args": list(spec.get("args") or []),
        "workdir": workdir,
        "env": spec.get("env") or {},
        "env_names": env_names,
        "secret_env_names": sorted(spec.get("secrets") or {}),
        "gpus": spec.get("gpus"),
        "share_gpu": bool(spec.get("share_gpu")),
        "gpu_check": gpu_check,
        "thread_caps": caps,
        "line_buffered": line_buffered,
        "progress_regex": spec.get("progress_regex"),
        "profile": spec.get("profile"),
        "pre": spec.get("pre"),
        "host": socket.gethostname(),
        "launched_at": time.time(),
        "boot_id": procs.boot_id(),
        "oom_kills_at_launch": cgroup.oom_kills(),
        "cgroups": cgroup.memory_memberships(),
        "parent_job_id": spec.get("parent_job_id"),
        "key": spec.get("key"),
        "queue": spec.get("queue"),
        "log": os.path.join(jdir, LOG),
    }
    wrapper.start(jdir, argv, env, workdir, meta)
    return job_id
