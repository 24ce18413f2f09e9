"""The job directory contract: what a launched job leaves on the box for a post-mortem.

    <jobs_dir>/<job_id>/
        cmd         immutable copy of the command or script (0500; never rewritten while it runs)
        meta.json   job_id, name, labels, command, workdir, env_names, host, launched_at, pid,
                    pgid, start_ticks, boot_id, oom_kills_at_launch, parent_job_id, key, log
                    (also: kind cmd|script, args, env (non-secret values), secret_env_names,
                    gpus, thread_caps, queue, wrapper_pid, wrapper_start_ticks, spawn_error)
        log         stdout+stderr, unbuffered
        exit.json   written by the wrapper when the process ends:
                    {exit_code: int|null, signal: "SIGKILL"|null, ended_at: epoch seconds}
                    (also: core_dumped, error, survivors [{pid, start_ticks}] still in its group)
        growth      "epoch size" lines the wrapper appends while the log grows (dates log lines)
        stop.json   written by `gpuops stop`: the signals it sent, to which pids, and when
The job's processes carry GPUOPS_JOB_ID=<job_id> in their environment. Run queues live in
<jobs_dir>/.queues/<name>/ (lines, runner.json, done.json); their entries are ordinary jobs.

<jobs_dir> is $GPUOPS_JOBS_DIR when set, else ~/.gpuops/jobs (a profile may move it). Records
are written to a temp file in the same directory and renamed into place, so a reader sees the
old record or the new one, never half of one.
"""

import json
import os

from . import procs

CMD, META, LOG, EXIT = "cmd", "meta.json", "log", "exit.json"


def jobs_dir():
    return os.environ.get("GPUOPS_JOBS_DIR") or os.path.expanduser("~/.gpuops/jobs")


def job_dir(job_id):
    if not job_id or "/" in job_id or job_id in (".", ".."):
        raise ValueError("bad job id %r" % (job_id,))
    return os.path.join(jobs_dir(), job_id)


def atomic_write(path, data, mode=0o600):
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)


def write_json(path, obj, mode=0o600):
    atomic_write(path, json.dumps(obj, sort_keys=True), mode)


def read_json(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, IOError, ValueError):
        return None


def load(job_id):
    """{'dir', 'meta', 'exit'} for a job, or None when its directory has no meta.json."""
    d = job_dir(job_id)
    meta = read_json(os.path.join(d, META))
    if meta is None:
        return None
    return {"dir": d, "meta": meta, "exit": read_json(os.path.join(d, EXIT))}


def all_ids():
    try:
        names = os.listdir(jobs_dir())
    except OSError:
        return []
    return sorted(n for n in names if os.path.isfile(os.path.join(jobs_dir(), n, META)))


def liveness(meta):
    """'alive', 'gone' or 'rebooted': the recorded process, judged by boot_id + pid + start time."""
    if meta.get("boot_id") and meta.get("boot_id") != procs.boot_id():
        return "rebooted"
    pid = meta.get("pid")
    if pid and procs.alive(pid, meta.get("start_ticks")):
        return "alive"
    return "gone"
