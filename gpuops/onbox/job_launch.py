"""On-box `launch` and `retry`: create a job directory and start the job under its supervisor.
Entry: main(argv). The options (command, env, secrets) come on stdin, never in argv."""

import base64
import os
import shlex
import shutil
import socket
import time

from . import cgroup, job_facts, jobrecord, procs, signals, wrapper
from .jobrecord import CMD, LOG, META, JobError

LOG_HEAD = 4096  # what a launch answers of the log of a job that died at once: its first error is there


def _check_shebang(body):
    """Fail early, with the reason, when a script's #! interpreter is not on the box."""
    words = body.split(b"\n", 1)[0][2:].decode("utf-8", "replace").split()
    if not words:
        raise JobError("usage", "the script's #! line names no interpreter")
    prog = words[1] if os.path.basename(words[0]) == "env" and len(words) > 1 else words[0]
    found = shutil.which(prog) if "/" not in prog else (prog if os.access(prog, os.X_OK) else None)
    if not found:
        raise JobError("usage", "the script's interpreter %s is not available on the box" % prog)


def _interpreter_argv(cmd_path, body, args, pre=None):
    if body.startswith(b"#!"):
        argv = [cmd_path]
    else:
        argv = [shutil.which("bash") or "/bin/sh", cmd_path]
    argv += list(args or [])
    if pre:
        # The platform's hook (a proxy, `module load`) is sourced in the shell that then execs the
        # job, so what it exports reaches the job; its failure or output must not end the job.
        hook = "{ %s\n} >/dev/null 2>&1 || true\nexec \"$@\"" % pre
        argv = [shutil.which("bash") or "/bin/sh", "-c", hook, "gpuops-pre"] + argv
    stdbuf = shutil.which("stdbuf")  # line-buffers C stdio (Python is covered by PYTHONUNBUFFERED)
    return ([stdbuf, "-oL"] + argv) if stdbuf else argv, bool(stdbuf)


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


def _workdir(raw):
    path = os.path.expanduser(raw) if raw else os.path.expanduser("~")
    if not os.path.isdir(path):
        raise JobError("usage", "workdir %s does not exist on the box" % path)
    return os.path.abspath(path)


def new_id():
    return "%s-%s" % (time.strftime("%Y%m%d-%H%M%S"), os.urandom(3).hex())


def create(spec, body):
    """Start one job from `spec` and the bytes of its command; returns the job id.

    The caller holds the jobs-dir lock. `body` becomes the immutable `cmd` file (mode 0500).
    """
    workdir = _workdir(spec.get("workdir"))
    if body.startswith(b"#!"):
        _check_shebang(body)
    job_id = new_id()
    jdir = jobrecord.job_dir(job_id)
    os.mkdir(jdir, 0o700)
    cmd_path = os.path.join(jdir, CMD)
    jobrecord.atomic_write(cmd_path, body, 0o500)
    argv, line_buffered = _interpreter_argv(cmd_path, body, spec.get("args"), spec.get("pre"))
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


def body_of(spec):
    if spec.get("kind") == "script":
        return base64.b64decode(spec.get("script_b64") or "")
    cmd = spec.get("command")
    if not cmd or not cmd.strip():
        raise JobError("usage", "empty command")
    return (cmd if cmd.endswith("\n") else cmd + "\n").encode("utf-8")


def confirmed(job_id, seconds):
    """The job's facts once it has run `seconds`, or sooner once it died: a typo or a missing file
    ends a job within moments, and the caller should hear that, not "started". A job that died
    comes with the head of its log."""
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    if meta.get("pid") and seconds:
        signals.wait_until(lambda: jobrecord.liveness(meta) != "alive", seconds)
    out = {"job": job_facts.facts(job_id)}
    if out["job"].get("exit") is not None:
        try:
            with open(jobrecord.path(job_id, LOG), "rb") as f:
                out["log_head"] = f.read(LOG_HEAD).decode("utf-8", "replace")
        except (OSError, IOError):
            out["log_head"] = ""
    return out


def launch(opts):
    root = jobrecord.ensure_root()
    with jobrecord.Locked(os.path.join(root, jobrecord.LOCK)):
        if opts.get("key"):
            existing = jobrecord.by_key(opts["key"])
            if existing:
                return {"existing": True, "job": job_facts.facts(existing)}
        job_id = create(opts, body_of(opts))
    return dict(confirmed(job_id, float(opts.get("confirm_s") or 0)), existing=False)


def retry(opts):
    parent_id = jobrecord.resolve(opts.get("job"))
    pdir = jobrecord.job_dir(parent_id)
    parent = jobrecord.read_json(os.path.join(pdir, META)) or {}
    if parent.get("pid") and jobrecord.liveness(parent) == "alive":
        raise JobError("refused", "job %s is still running; stop it first (retry never runs two copies)" % parent_id)
    missing = sorted(set(parent.get("secret_env_names") or []) - set(opts.get("secrets") or {}))
    if missing:
        raise JobError("usage", "job %s was launched with secrets %s: pass --secret-env for each" %
                       (parent_id, ", ".join(missing)))
    with open(os.path.join(pdir, CMD), "rb") as f:
        body = f.read()
    spec = {k: parent.get(k) for k in ("name", "labels", "command", "kind", "args", "workdir", "gpus",
                                       "progress_regex", "queue", "profile", "pre")}
    spec["env"] = dict(parent.get("env") or {}, **(opts.get("env") or {}))
    spec["secrets"] = opts.get("secrets") or {}
    spec["parent_job_id"], spec["key"] = parent_id, opts.get("key")
    resume = opts.get("resume_arg")
    if resume:
        if spec["kind"] == "script":
            try:
                spec["args"] = list(spec.get("args") or []) + shlex.split(resume)
            except ValueError as e:
                raise JobError("usage", "--resume-arg %r cannot be split into words: %s" % (resume, e))
        else:
            body = body.rstrip(b"\n") + b" " + resume.encode("utf-8") + b"\n"
            spec["command"] = (spec.get("command") or "").rstrip("\n") + " " + resume
    root = jobrecord.ensure_root()
    with jobrecord.Locked(os.path.join(root, jobrecord.LOCK)):
        existing = jobrecord.by_key(spec["key"]) if spec["key"] else None
        if existing:
            return {"existing": True, "job": job_facts.facts(existing), "parent_job_id": parent_id}
        job_id = create(spec, body)
    return dict(confirmed(job_id, float(opts.get("confirm_s") or 0)), existing=False, parent_job_id=parent_id)


def main(argv):
    return jobrecord.serve({"launch": launch, "retry": retry}, argv)
