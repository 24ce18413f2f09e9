"""The job directory contract: what a launched job leaves on the box, and how a job is found.

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
        pause.json  written by `gpuops pause` / `resume`: the checkpoint signal, when it was sent,
                    the marker seen, and when the job was held (Slurm) or stopped, then resumed
        run.json    in the first attempt's directory of a run (a job launched with a run policy):
                    its attempts and where it stands (gpuops.onbox.run.runrecord); each attempt's
                    meta.json names its run as run: {id, attempt}
        run-stop.json  beside run.json: `gpuops stop` of any attempt of the run, written under
                    run.lock before any signal; no attempt starts once it exists
meta.json's `engine` names who runs the job (gpuops.onbox.engines.registry; records older than the field
are the supervisor's). A job of another engine has the same directory where that engine's client
runs (a Slurm login node's shared filesystem, a Ray head): cmd, meta.json (with the engine's own
id for the job, engine_job_id, and what was asked of it), log, and exit.json written once the
engine reports the job ended (its own state word and exit code).
The job's processes carry GPUOPS_JOB_ID=<job_id> in their environment. Run queues live in
<jobs_dir>/.queues/<name>/ (lines, runner.json, done.json); their entries are ordinary jobs.

<jobs_dir> is $GPUOPS_JOBS_DIR when set, else ~/.gpuops/jobs (a profile may move it). Records
are written to a temp file in the same directory and renamed into place, so a reader sees the
old record or the new one, never half of one.

Every on-box job action is an entry of its own (job_launch, job_facts, job_stream, job_stop,
job_queue, diagnose): argv[0] names the action, its options arrive as one JSON object on stdin
(after the shipped source), so commands, names and secret values never appear in argv or `ps`.
Each prints one JSON document; errors are documents too: {"error": {"kind", "message"}}.
"""

import fcntl
import json
import os
import sys
import time

from . import procs

CMD, META, LOG, EXIT, GROWTH, STOP = "cmd", "meta.json", "log", "exit.json", "growth", "stop.json"
PAUSE, BATCH, RUN = "pause.json", "batch.sh", "run.json"
# In a run's directory: the stop of the whole run (written under RUN_LOCK, before any signal), and
# the lock a stop and the supervisor's hand-over to the next attempt take in turn.
RUN_STOP, RUN_LOCK = "run-stop.json", "run.lock"
DEFAULT_ENGINE = "box"  # meta["engine"] of records older than the field: the supervisor's
QUEUES, LOCK = ".queues", ".lock"
SHORT_ID_MIN = 4  # a shorter piece of an id names a job by chance (git asks for 4 too)


class JobError(Exception):
    """An expected refusal, reported to the caller as {"error": {kind, message}}."""

    def __init__(self, kind, message) -> None:
        Exception.__init__(self, message)
        self.kind = kind


# The options of the action this process serves (set by serve()); what each engine's own state
# words mean (a phase: starting, alive, paused, ended) comes with them, from the caller's engines.
CALL = {}


def phases(engine_name: str):
    """{state word: phase} of one engine, as the caller sent them (this side spells no state)."""
    return (CALL.get("engine_phases") or {}).get(engine_name) or {}


def new_id() -> str:
    return "%s-%s" % (time.strftime("%Y%m%d-%H%M%S"), os.urandom(3).hex())


def engine(meta):
    return (meta or {}).get("engine") or DEFAULT_ENGINE


def jobs_dir():
    return os.environ.get("GPUOPS_JOBS_DIR") or os.path.expanduser("~/.gpuops/jobs")


def job_dir(job_id):
    if not job_id or "/" in job_id or job_id in (".", "..") or "\0" in job_id:
        raise ValueError("bad job id %r" % (job_id,))
    return os.path.join(jobs_dir(), job_id)


def path(job_id, name: str):
    return os.path.join(job_dir(job_id), name)


def atomic_write(target, data, mode=0o600) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp = "%s.tmp.%d" % (target, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, target)


def write_json(target, obj, mode=0o600) -> None:
    atomic_write(target, json.dumps(obj, sort_keys=True), mode)


def read_json(source):
    try:
        with open(source, "rb") as f:
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


def liveness(meta) -> str:
    """'alive', 'gone' or 'rebooted': the recorded process, judged by boot_id + pid + start time."""
    if meta.get("boot_id") and meta.get("boot_id") != procs.boot_id():
        return "rebooted"
    pid = meta.get("pid")
    if pid and procs.alive(pid, meta.get("start_ticks")):
        return "alive"
    return "gone"


def metas():
    """[(job_id, meta)] newest launch first."""
    out = []
    for job_id in all_ids():
        meta = read_json(path(job_id, META))
        if meta:
            out.append((job_id, meta))
    out.sort(key=lambda item: (item[1].get("launched_at") or 0, item[0]), reverse=True)
    return out


def by_key(key):
    return next((jid for jid, m in metas() if m.get("key") == key), None)


def resolve(ref, follow=True):
    """A job id from an id, an idempotency key, its engine's own id for it (a Slurm job id ...), a
    name, or the start or end of one id (at least SHORT_ID_MIN characters: `a1b2c3` for
    20261122-101500-a1b2c3). A name several jobs share is
    refused (kind "ambiguous", listing them), unless they are one line of retries: then the newest
    attempt is the job; so is a piece of an id that several ids share. A run's id (its first
    attempt's) names its current attempt, unless `follow` is false, or the call names an attempt
    (its `attempt` option, N from 1: that attempt of the run, the first one's id being the run's)."""
    jid = _resolve(ref)
    if CALL.get("attempt") is not None:
        return attempt_of(jid, CALL["attempt"])
    return current(jid) if follow else jid


def attempt_of(job_id, number: int):
    """The id of attempt `number` (1: the first) of the run job `job_id` belongs to."""
    meta = read_json(path(job_id, META)) or {}
    run_id = (meta.get("run") or {}).get("id") if isinstance(meta.get("run"), dict) else None
    rec = read_json(path(run_id, RUN)) if isinstance(run_id, str) else None
    if not isinstance(rec, dict):
        raise JobError("usage", "--attempt is for a run's attempts, and %s is a job of no run" % job_id)
    ids = [a for a in rec.get("attempts") or [] if isinstance(a, str)]
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(ids):
        raise JobError("not-found", "run %s has %d attempt(s), not an attempt %r" % (run_id, len(ids), number))
    return ids[number - 1]


def current(job_id):
    """The attempt a run's id stands for now (the newest its supervisor started or is about to);
    any other job is itself."""
    rec = read_json(path(job_id, RUN))
    now = rec.get("current") if isinstance(rec, dict) else None
    try:
        attempt = read_json(path(now, META)) if isinstance(now, str) else None
    except ValueError:
        return job_id
    if isinstance(attempt, dict) and (attempt.get("run") or {}).get("id") == job_id:
        return now
    return job_id


def _resolve(ref):
    if not ref:
        raise JobError("usage", "name a job with --job (an id, a --key or a --name)")
    try:
        if os.path.isdir(job_dir(ref)):
            return ref
    except ValueError:
        pass
    found = metas()
    hit = next((jid for jid, m in found if m.get("key") == ref), None)
    hit = hit or next((jid for jid, m in found if m.get("engine_job_id") and m["engine_job_id"] == ref), None)
    if hit:
        return hit
    named = [(jid, m) for jid, m in found if m.get("name") == ref]
    if len(named) > 1 and not _one_lineage(named):
        listed = ", ".join("%s (launched %s)" % (jid, _when(m.get("launched_at"))) for jid, m in named[:10])
        raise JobError("ambiguous", "%d jobs are named %r: %s%s; name one by its id" % (
            len(named), ref, listed, ", ..." if len(named) > 10 else ""))
    if named:
        return named[0][0]
    pieces = [jid for jid in all_ids() if len(ref) >= SHORT_ID_MIN and (jid.startswith(ref) or jid.endswith(ref))]
    if len(pieces) > 1:
        raise JobError("ambiguous", "%r is part of %d job ids: %s%s; give more of the id" % (
            ref, len(pieces), ", ".join(pieces[:10]), ", ..." if len(pieces) > 10 else ""))
    if pieces:
        return pieces[0]
    raise JobError("not-found", "no job %r in %s (gpuops has no record of it)" % (ref, jobs_dir()))


def _one_lineage(named):
    """True when each job (newest first) but the oldest is a retry of the next one."""
    return all(newer.get("parent_job_id") == older_id for (_, newer), (older_id, _) in zip(named, named[1:]))


def _when(epoch: int):
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(epoch)))
    except (TypeError, ValueError):
        return "?"


def ensure_root():
    root = jobs_dir()
    try:
        os.makedirs(root, 0o700)
    except OSError:
        if not os.path.isdir(root):
            raise JobError("usage", "cannot create the jobs directory %s" % root)
    return root


class Locked(object):
    """flock on a file for the duration of a with-block (serialises key checks and appends)."""

    def __init__(self, lock_path) -> None:
        self.path = lock_path

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *_) -> None:
        os.close(self.fd)


def serve(actions, argv) -> int:
    """An entry's main: run actions[argv[0]] on the JSON options from stdin, print its document."""
    action = argv[0] if argv else ""
    raw = sys.stdin.buffer.read()
    try:
        opts = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except ValueError:
        opts = None
    fn = actions.get(action)
    try:
        if fn is None or not isinstance(opts, dict):
            raise JobError("usage", "unknown job action %r or unreadable options" % (action,))
        if opts.get("jobs_dir"):
            os.environ["GPUOPS_JOBS_DIR"] = os.path.expanduser(opts["jobs_dir"])
        CALL.update(opts)
        doc = fn(opts)
    except JobError as e:
        doc = {"error": {"kind": e.kind, "message": str(e)}}
    if doc is not None:
        sys.stdout.write(json.dumps(doc) + "\n")
    return 0
