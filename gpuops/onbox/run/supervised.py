"""A supervised job made ready to start: its directory, its immutable command, its environment and
the fields of its start record. The supervisor that starts it is the box's (gpuops.onbox.engines.box_launch,
wrapper.start), or a run's (gpuops.onbox.run.runloop), which makes each attempt here, also inside
another engine's job (a Ray job's driver: gpuops.onbox.engines.ray_run)."""

import os
import socket
import time

from ..host import cgroup, jobrecord, procs
from . import command
from ..host.jobrecord import CMD, LOG


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
    run = spec.get("run") or ({"id": job_id, "attempt": 1} if spec.get("policy") is not None else None)
    if run:
        env["GPUOPS_RUN_ID"], env["GPUOPS_ATTEMPT"] = run["id"], str(run["attempt"])
    env.update(spec.get("secrets") or {})
    return env, sorted(added), ({"values": caps, "cgroup_quota_cores": quota} if caps else None)


def _unmake(jdir: str) -> None:
    """Remove a job directory this process just made and never started: its command and its
    temp files only, then the directory if that left it empty."""
    for name in os.listdir(jdir):
        if name == CMD or name.startswith(CMD + ".tmp."):
            os.unlink(os.path.join(jdir, name))
    try:
        os.rmdir(jdir)
    except OSError:
        pass


def prepare(spec, body, engine_meta):
    """A job's directory, immutable command and start record's fields, for a supervisor to start:
    (job id, its dir, argv, environment, workdir, meta); `engine_meta` names the engine whose job
    it is (and what that engine adds to the record)."""
    workdir = command.workdir(spec.get("workdir"))
    if body.startswith(b"#!"):
        command.check_shebang(body)
    job_id = jobrecord.new_id()
    jdir = jobrecord.job_dir(job_id)
    os.mkdir(jdir, 0o700)
    cmd_path = os.path.join(jdir, CMD)
    try:
        jobrecord.atomic_write(cmd_path, body, 0o500)
    except (OSError, IOError):
        _unmake(jdir)  # a full disk: nothing half made is left to read as a job
        raise
    argv, line_buffered = command.interpreter_argv(cmd_path, body, spec.get("args"), spec.get("pre"))
    env, env_names, caps = _job_env(spec, job_id, jdir)
    meta = {
        "job_id": job_id,
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
        "gpu_check": spec.get("gpu_check"),
        "thread_caps": caps,
        "line_buffered": line_buffered,
        "progress_regex": spec.get("progress_regex"),
        "profile": spec.get("profile"),
        "tb_logdir": spec.get("tb_logdir"),
        "pre": spec.get("pre"),
        "host": socket.gethostname(),
        "launched_at": time.time(),
        "boot_id": procs.boot_id(),
        "oom_kills_at_launch": cgroup.oom_kills(),
        "cgroups": cgroup.memory_memberships(),
        "parent_job_id": spec.get("parent_job_id"),
        "resumed_from": spec.get("resumed_from"),  # the checkpoint this job (a run's attempt) resumes from
        "key": spec.get("key"),
        "queue": spec.get("queue"),
        "log": os.path.join(jdir, LOG),
    }
    meta.update(engine_meta)
    if spec.get("policy") is not None:
        meta.update(policy=spec["policy"], run={"id": job_id, "attempt": 1})
    elif spec.get("run"):
        meta["run"] = spec["run"]
    return job_id, jdir, argv, env, workdir, meta
