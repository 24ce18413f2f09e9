"""On-box job actions: launch, status, stream (logs), stop, retry, queue. Entry: main(argv).

argv[0] names the action; every option arrives as one JSON object on stdin (after the shipped
source), so commands, names and secret values never appear in argv or `ps`. Each action prints
one JSON document, except `stream`, which writes logscan frames. Errors are documents too:
{"error": {"kind": "not-found"|"usage"|"refused", "message": ...}}.

Status here only gathers facts (records, liveness, log size, progress lines and when they were
written); the state (RUNNING, STALLED, VANISHED …) is derived on the caller's side, in
gpuops.jobs.state, so the rule is pure and tested without a box.
"""

import fcntl
import json
import os
import select
import shlex
import shutil
import signal
import socket
import sys
import time

from . import cgroup, jobrecord, logscan, procs, wrapper

STOP = "stop.json"
QUEUES = ".queues"
_LIVE_WINDOW, _ENDED_WINDOW = 1 << 20, 256 << 10
_STREAM_CHUNK, _STREAM_MAX, _STREAM_MAX_S, _KEEPALIVE_S = 64 << 10, 16 << 20, 600.0, 10.0


class JobError(Exception):
    def __init__(self, kind, message):
        Exception.__init__(self, message)
        self.kind = kind


def main(argv):
    action = argv[0] if argv else ""
    raw = sys.stdin.buffer.read()
    try:
        opts = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except ValueError:
        opts = None
    fn = ACTIONS.get(action)
    try:
        if fn is None or not isinstance(opts, dict):
            raise JobError("usage", "unknown job action %r or unreadable options" % (action,))
        if opts.get("jobs_dir"):
            os.environ["GPUOPS_JOBS_DIR"] = os.path.expanduser(opts["jobs_dir"])
        doc = fn(opts)
    except JobError as e:
        doc = {"error": {"kind": e.kind, "message": str(e)}}
    if doc is not None:
        sys.stdout.write(json.dumps(doc) + "\n")
    return 0


# ---------------------------------------------------------------- records


def _ensure_root():
    root = jobrecord.jobs_dir()
    try:
        os.makedirs(root, 0o700)
    except OSError:
        if not os.path.isdir(root):
            raise JobError("usage", "cannot create the jobs directory %s" % root)
    return root


class _Locked(object):
    """flock on a file for the duration of a with-block (serialises key checks and appends)."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *_):
        os.close(self.fd)


def _metas():
    """[(job_id, meta)] newest launch first."""
    out = []
    for job_id in jobrecord.all_ids():
        meta = jobrecord.read_json(os.path.join(jobrecord.jobs_dir(), job_id, jobrecord.META))
        if meta:
            out.append((job_id, meta))
    out.sort(key=lambda item: (item[1].get("launched_at") or 0, item[0]), reverse=True)
    return out


def _by_key(key):
    return next((jid for jid, m in _metas() if m.get("key") == key), None)


def resolve(ref):
    """A job id from an id, an idempotency key or a name (newest wins)."""
    if not ref:
        raise JobError("usage", "name a job with --job (an id, a --key or a --name)")
    try:
        if os.path.isdir(jobrecord.job_dir(ref)):
            return ref
    except ValueError:
        pass
    metas = _metas()
    for field in ("key", "name"):
        hit = next((jid for jid, m in metas if m.get(field) == ref), None)
        if hit:
            return hit
    raise JobError("not-found", "no job %r in %s" % (ref, jobrecord.jobs_dir()))


def _new_id():
    return "%s-%s" % (time.strftime("%Y%m%d-%H%M%S"), os.urandom(3).hex())


# ---------------------------------------------------------------- launch


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


def create(spec, body):
    """Start one job from `spec` and the bytes of its command; returns the job id.

    The caller holds the jobs-dir lock. `body` becomes the immutable `cmd` file (mode 0500).
    """
    workdir = _workdir(spec.get("workdir"))
    if body.startswith(b"#!"):
        _check_shebang(body)
    job_id = _new_id()
    jdir = jobrecord.job_dir(job_id)
    os.mkdir(jdir, 0o700)
    cmd_path = os.path.join(jdir, jobrecord.CMD)
    jobrecord.atomic_write(cmd_path, body, 0o500)
    argv, line_buffered = _interpreter_argv(cmd_path, body, spec.get("args"), spec.get("pre"))
    env, env_names, caps = _job_env(spec, job_id, jdir)
    meta = {
        "job_id": job_id,
        "name": spec.get("name") or job_id,
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
        "parent_job_id": spec.get("parent_job_id"),
        "key": spec.get("key"),
        "queue": spec.get("queue"),
        "log": os.path.join(jdir, jobrecord.LOG),
    }
    wrapper.start(jdir, argv, env, workdir, meta)
    return job_id


def _body(spec):
    if spec.get("kind") == "script":
        import base64

        return base64.b64decode(spec.get("script_b64") or "")
    cmd = spec.get("command")
    if not cmd or not cmd.strip():
        raise JobError("usage", "empty command")
    return (cmd if cmd.endswith("\n") else cmd + "\n").encode("utf-8")


def launch(opts):
    root = _ensure_root()
    with _Locked(os.path.join(root, ".lock")):
        if opts.get("key"):
            existing = _by_key(opts["key"])
            if existing:
                return {"existing": True, "job": facts(existing)}
        job_id = create(opts, _body(opts))
    return {"existing": False, "job": facts(job_id)}


# ---------------------------------------------------------------- status


def facts(job_id, progress_regex=None):
    """Everything status needs about one job, as observed now (liveness read before exit)."""
    jdir = jobrecord.job_dir(job_id)
    meta = jobrecord.read_json(os.path.join(jdir, jobrecord.META))
    out = {"job_id": job_id, "now": time.time()}
    if meta is None:
        try:
            out["dir_age_s"] = time.time() - os.stat(jdir).st_mtime
        except OSError:
            out["dir_age_s"] = None
        out["meta"] = None
        out["exit"] = jobrecord.read_json(os.path.join(jdir, jobrecord.EXIT))
        return out
    out["meta"] = meta
    out["liveness"] = jobrecord.liveness(meta) if meta.get("pid") else "gone"
    out["pid_reused"] = _pid_reused(meta)
    out["wrapper_alive"] = _wrapper_alive(meta)
    out["exit"] = jobrecord.read_json(os.path.join(jdir, jobrecord.EXIT))
    out["stop"] = jobrecord.read_json(os.path.join(jdir, STOP))
    if out["exit"] and out["liveness"] != "rebooted":
        out["survivors_alive"] = [s["pid"] for s in out["exit"].get("survivors") or []
                                  if isinstance(s, dict) and procs.alive(s.get("pid"), s.get("start_ticks"))]
    log = os.path.join(jdir, jobrecord.LOG)
    try:
        st = os.stat(log)
        out["log_size"], out["log_mtime"] = st.st_size, st.st_mtime
    except OSError:
        out["log_size"] = out["log_mtime"] = None
    out["progress"] = _progress(jdir, log, progress_regex or meta.get("progress_regex"),
                                _LIVE_WINDOW if out["exit"] is None else _ENDED_WINDOW)
    return out


def _pid_reused(meta):
    st = procs.stat(meta["pid"]) if meta.get("pid") else None
    same_boot = not meta.get("boot_id") or meta.get("boot_id") == procs.boot_id()
    return bool(st and same_boot and meta.get("start_ticks") is not None
                and st["start_ticks"] != int(meta["start_ticks"]))


def _wrapper_alive(meta):
    if not meta.get("wrapper_pid") or (meta.get("boot_id") and meta.get("boot_id") != procs.boot_id()):
        return False if meta.get("wrapper_pid") else None
    return procs.alive(meta["wrapper_pid"], meta.get("wrapper_start_ticks"))


def _progress(jdir, log, user_regex, window):
    try:
        patterns = logscan.compile_patterns(user_regex)
    except Exception as e:  # re.error: reported, the defaults still apply
        return {"events": [], "regex_error": str(e)}
    events = logscan.progress(log, patterns, window)
    when = logscan.written_at(os.path.join(jdir, wrapper.GROWTH), [e["end"] for e in events])
    for e in events:
        e["at"] = when.get(e["end"])
    return {"events": events}


def _listing():
    """All job ids, including directories whose launch is still in flight (no meta yet)."""
    try:
        names = os.listdir(jobrecord.jobs_dir())
    except OSError:
        return []
    root = jobrecord.jobs_dir()
    return sorted(n for n in names if not n.startswith(".") and os.path.isfile(os.path.join(root, n, jobrecord.CMD)))


def status(opts):
    labels = opts.get("labels") or {}
    if opts.get("job"):
        ids = [resolve(opts["job"])]
    else:
        ids = list(reversed(_listing()))
    jobs = []
    for job_id in ids:
        if labels:
            meta = jobrecord.read_json(os.path.join(jobrecord.job_dir(job_id), jobrecord.META)) or {}
            if any((meta.get("labels") or {}).get(k) != v for k, v in labels.items()):
                continue
        jobs.append(facts(job_id, opts.get("progress_regex")))
        if len(jobs) >= int(opts.get("limit") or 50):
            break
    return {"jobs": jobs, "now": time.time(), "boot_id": procs.boot_id(), "hostname": socket.gethostname(),
            "jobs_dir": jobrecord.jobs_dir(), "total": len(ids)}


# ---------------------------------------------------------------- logs (framed stream)


def stream(opts):
    out = sys.stdout.buffer
    sys.stdout.flush()
    try:
        job_id = resolve(opts.get("job"))
    except JobError as e:
        _emit(out, logscan.frame(b"E", {"error": {"kind": e.kind, "message": str(e)}}))
        return None
    jdir = jobrecord.job_dir(job_id)
    log = os.path.join(jdir, jobrecord.LOG)
    size = logscan.size_of(log) or 0
    if opts.get("from_offset") is not None:
        pos = min(max(0, int(opts["from_offset"])), size)
    else:
        pos = logscan.tail_offset(log, int(opts.get("tail") or 0))
    _emit(out, logscan.frame(b"H", {"job_id": job_id, "start": pos, "size": size}))
    follow, limit = bool(opts.get("follow")), opts.get("max_bytes")
    sent, began, beat = 0, time.time(), time.time()
    meta = jobrecord.read_json(os.path.join(jdir, jobrecord.META)) or {}
    while True:
        want = _STREAM_CHUNK if limit is None else min(_STREAM_CHUNK, int(limit) - sent)
        data = logscan.read_range(log, pos, want) if want > 0 else b""
        if data:
            if not _emit(out, logscan.frame(b"D", data)):
                return None
            pos += len(data)
            sent += len(data)
            continue
        end = _stream_end(jdir, meta, follow, limit is not None and sent >= int(limit))
        if end is None and (sent >= _STREAM_MAX or time.time() - began > _STREAM_MAX_S):
            end = {"reason": "rotate"}  # bounded per channel: the caller reconnects from `next`
        if end is not None:
            if end["reason"] in ("exited", "vanished"):
                tail = logscan.read_range(log, pos, 1 << 30)
                if tail and not _emit(out, logscan.frame(b"D", tail)):
                    return None
                pos += len(tail)
            end.update(next=pos, job_id=job_id)
            _emit(out, logscan.frame(b"E", end))
            return None
        if time.time() - beat > _KEEPALIVE_S:
            if not _emit(out, logscan.frame(b"K")):
                return None
            beat = time.time()
        if _reader_gone():
            return None
        time.sleep(0.2)


def _stream_end(jdir, meta, follow, limited):
    exit_rec = jobrecord.read_json(os.path.join(jdir, jobrecord.EXIT))
    if not follow or limited:
        return {"reason": "eof", "ended": exit_rec is not None}
    if exit_rec is not None:
        return {"reason": "exited", "exit": exit_rec}
    if meta.get("pid") and jobrecord.liveness(meta) != "alive":
        time.sleep(1.0)  # the supervisor may be writing exit.json right now
        exit_rec = jobrecord.read_json(os.path.join(jdir, jobrecord.EXIT))
        if exit_rec is not None:
            return {"reason": "exited", "exit": exit_rec}
        return {"reason": "vanished"}
    return None


def _emit(out, data):
    try:
        out.write(data)
        out.flush()
        return True
    except (OSError, IOError, ValueError):
        return False


def _reader_gone():
    """True when the SSH side of stdout is closed (a dropped link): stop polling for nobody."""
    try:
        p = select.poll()
        p.register(1, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


# ---------------------------------------------------------------- stop


def _environ_tag(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read()
    except (OSError, IOError):
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"GPUOPS_JOB_ID="):
            return item[len(b"GPUOPS_JOB_ID="):].decode("utf-8", "replace")
    return None


def job_processes(job_id, meta):
    """{pid: start_ticks} of every live process of the job: its group, its descendants, and any
    process carrying GPUOPS_JOB_ID=<job_id> in its environment (children that left the group)."""
    mine = procs.ancestry()
    same_boot = not meta.get("boot_id") or meta.get("boot_id") == procs.boot_id()
    leader = meta.get("pid")
    group_ok = bool(same_boot and leader and not _pid_reused(meta))
    found = {}
    table = {}
    for pid in procs.pids():
        st = procs.stat(pid)
        if st is None or st["state"] in ("Z", "X") or pid in mine or pid == meta.get("wrapper_pid"):
            continue
        table[pid] = st
        if (group_ok and st["pgid"] == meta.get("pgid")) or _environ_tag(pid) == job_id:
            found[pid] = st["start_ticks"]
    if group_ok and procs.alive(leader, meta.get("start_ticks")):
        kids = {}
        for pid, st in table.items():
            kids.setdefault(st["ppid"], []).append(pid)
        for pid in procs.descendants(leader, kids):
            if pid in table:
                found[pid] = table[pid]["start_ticks"]
    return found


def _signal(targets, meta, sig):
    """Signal the job's group (leader identity re-checked) and every other target that still is
    the process we recorded (pid + start time). Returns the pids signalled."""
    sent = []
    pgid = meta.get("pgid")
    in_group = set()
    if pgid and not _pid_reused(meta):
        members = [p for p in targets if (procs.stat(p) or {}).get("pgid") == pgid]
        if members:
            try:
                os.killpg(pgid, sig)
                in_group.update(members)
            except OSError:
                pass
    for pid, ticks in targets.items():
        if pid in in_group:
            sent.append(pid)
            continue
        if procs.alive(pid, ticks):
            try:
                os.kill(pid, sig)
                sent.append(pid)
            except OSError:
                pass
    return sent


def _wait_gone(targets, deadline):
    while time.time() < deadline:
        if not any(procs.alive(p, t) for p, t in targets.items()):
            return True
        time.sleep(0.1)
    return not any(procs.alive(p, t) for p, t in targets.items())


def _describe(pids_ticks, gpu):
    out = []
    for pid in sorted(pids_ticks):
        cmd = procs.cmdline(pid, 120)
        # a short-lived child can exit between the scan and this read: it is no target any more
        if cmd is None and not procs.alive(pid, pids_ticks[pid]):
            continue
        out.append({"pid": pid, "cmd": cmd, "gpu": pid in gpu})
    return out


def stop(opts):
    job_id = resolve(opts.get("job"))
    jdir = jobrecord.job_dir(job_id)
    meta = jobrecord.read_json(os.path.join(jdir, jobrecord.META)) or {}
    targets = job_processes(job_id, meta)
    holders, _ = procs.device_holders(exclude=procs.ancestry())
    gpu = set(h["pid"] for h in holders if h["pid"] in targets)
    doc = {"job_id": job_id, "targets": _describe(targets, gpu), "grace_s": float(opts.get("grace") or 10)}
    if not opts.get("yes") or not targets:
        doc.update(dry_run=not opts.get("yes"), signalled=[], all_gone=not targets, after=facts(job_id))
        return doc
    grace = float(opts.get("grace") or 10)
    record = {"requested_at": time.time(), "signals": []}
    term = _signal(targets, meta, signal.SIGTERM)
    record["signals"].append({"signal": "SIGTERM", "pids": term, "at": time.time()})
    jobrecord.write_json(os.path.join(jdir, STOP), record)
    _wait_gone(targets, time.time() + grace)
    stubborn = job_processes(job_id, meta)  # survivors, and children born during the grace period
    if stubborn:
        targets.update(stubborn)
        kill = _signal(stubborn, meta, signal.SIGKILL)
        record["signals"].append({"signal": "SIGKILL", "pids": kill, "at": time.time()})
        jobrecord.write_json(os.path.join(jdir, STOP), record)
        _wait_gone(stubborn, time.time() + 5)
    left = job_processes(job_id, meta)
    still_gpu = [h["pid"] for h in procs.device_holders(exclude=procs.ancestry())[0] if h["pid"] in targets]
    record.update(all_gone=not left, remaining=sorted(left), finished_at=time.time())
    jobrecord.write_json(os.path.join(jdir, STOP), record)
    _wait_exit_record(jdir, meta, 3.0)
    doc.update(dry_run=False, signals=record["signals"], all_gone=not left, remaining=_describe(left, set(still_gpu)),
               gpu_holders_left=still_gpu, after=facts(job_id))
    return doc


def _wait_exit_record(jdir, meta, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline and _wrapper_alive(meta):
        if os.path.exists(os.path.join(jdir, jobrecord.EXIT)):
            return
        time.sleep(0.05)


# ---------------------------------------------------------------- retry


def retry(opts):
    parent_id = resolve(opts.get("job"))
    pdir = jobrecord.job_dir(parent_id)
    parent = jobrecord.read_json(os.path.join(pdir, jobrecord.META)) or {}
    if parent.get("pid") and jobrecord.liveness(parent) == "alive":
        raise JobError("refused", "job %s is still running; stop it first (retry never runs two copies)" % parent_id)
    missing = sorted(set(parent.get("secret_env_names") or []) - set(opts.get("secrets") or {}))
    if missing:
        raise JobError("usage", "job %s was launched with secrets %s: pass --secret-env for each" %
                       (parent_id, ", ".join(missing)))
    with open(os.path.join(pdir, jobrecord.CMD), "rb") as f:
        body = f.read()
    spec = {k: parent.get(k) for k in ("name", "labels", "command", "kind", "args", "workdir", "gpus",
                                       "progress_regex", "queue", "profile", "pre")}
    spec["env"] = dict(parent.get("env") or {}, **(opts.get("env") or {}))
    spec["secrets"] = opts.get("secrets") or {}
    spec["parent_job_id"], spec["key"] = parent_id, opts.get("key")
    resume = opts.get("resume_arg")
    if resume:
        if spec["kind"] == "script":
            spec["args"] = list(spec.get("args") or []) + shlex.split(resume)
        else:
            body = body.rstrip(b"\n") + b" " + resume.encode("utf-8") + b"\n"
            spec["command"] = (spec.get("command") or "").rstrip("\n") + " " + resume
    root = _ensure_root()
    with _Locked(os.path.join(root, ".lock")):
        if spec["key"] and _by_key(spec["key"]):
            return {"existing": True, "job": facts(_by_key(spec["key"])), "parent_job_id": parent_id}
        job_id = create(spec, body)
    return {"existing": False, "job": facts(job_id), "parent_job_id": parent_id}


# ---------------------------------------------------------------- queue


def _queue_dir(name):
    if not name or "/" in name or name.startswith("."):
        raise JobError("usage", "bad queue name %r" % (name,))
    return os.path.join(_ensure_root(), QUEUES, name)


def queue_entries(text):
    """[(line_number, command)] for the non-blank, non-comment lines (numbers are 1-based and
    physical, so appending never renumbers an existing entry)."""
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            out.append((n, line))
    return out


def _entry_key(name, line):
    return "queue:%s:%d" % (name, line)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, IOError):
        return ""


def queue(opts):
    name = opts.get("name")
    qdir = _queue_dir(name)
    if opts.get("content") is None and not os.path.isdir(qdir):
        raise JobError("not-found", "no queue %r on this box" % name)
    try:
        os.makedirs(qdir, 0o700)
    except OSError:
        pass
    lines_path = os.path.join(qdir, "lines")
    started = False
    with _Locked(os.path.join(qdir, "lock")):
        old = _read(lines_path)
        new = opts.get("content")
        if new is not None:
            new = new if new.endswith("\n") or not new else new + "\n"
            if not new.startswith(old):
                raise JobError("refused", "queue %s already holds different lines: a running queue only takes "
                                          "appended lines (never edit a file a runner is reading); use a new "
                                          "--name for a different queue" % name)
            if len(new) > len(old):
                fd = os.open(lines_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, new[len(old):].encode("utf-8"))
                finally:
                    os.close(fd)
        elif not old:
            raise JobError("not-found", "no queue %r on this box" % name)
        cancel_path = os.path.join(qdir, "cancel")
        if opts.get("cancel"):
            jobrecord.write_json(cancel_path, {"at": time.time()})
        elif new is not None and os.path.exists(cancel_path):
            os.unlink(cancel_path)  # sending the file again means: carry on
        runner = jobrecord.read_json(os.path.join(qdir, "runner.json")) or {}
        alive = bool(runner.get("pid")) and jobrecord.liveness(runner) == "alive"
        done = jobrecord.read_json(os.path.join(qdir, "done.json"))
        pending = _pending(name, _read(lines_path))
        if not alive and not opts.get("cancel") and pending and (new is not None or opts.get("resume")):
            if done is not None:
                os.unlink(os.path.join(qdir, "done.json"))
            _start_runner(name, qdir, opts)
            started = True
    deadline = time.time() + float(opts.get("wait") or 0)
    while time.time() < deadline and not os.path.exists(os.path.join(qdir, "done.json")):
        time.sleep(0.2)
    return dict(queue_report(name, qdir), runner_started=started)


def _queue_jobs(name):
    """{entry key: job id} for the jobs this queue launched (newest wins)."""
    out = {}
    for jid, m in reversed(_metas()):
        if m.get("queue") == name and m.get("key"):
            out[m["key"]] = jid
    return out


def _pending(name, text):
    """Entries whose job has not ended yet (not launched, or launched and still running)."""
    out = []
    launched = _queue_jobs(name)
    for line, cmd in queue_entries(text):
        job_id = launched.get(_entry_key(name, line))
        if job_id is None or _entry_open(job_id):
            out.append((line, cmd))
    return out


def _entry_open(job_id):
    jdir = jobrecord.job_dir(job_id)
    if os.path.exists(os.path.join(jdir, jobrecord.EXIT)):
        return False
    meta = jobrecord.read_json(os.path.join(jdir, jobrecord.META)) or {}
    return bool(meta.get("pid")) and jobrecord.liveness(meta) == "alive"


def queue_report(name, qdir):
    keyed = _queue_jobs(name)
    entries = []
    for line, cmd in queue_entries(_read(os.path.join(qdir, "lines"))):
        job_id = keyed.get(_entry_key(name, line))
        entries.append({"line": line, "command": cmd, "job": facts(job_id) if job_id else None})
    runner = jobrecord.read_json(os.path.join(qdir, "runner.json")) or {}
    return {
        "queue": name,
        "dir": qdir,
        "entries": entries,
        "runner_alive": bool(runner.get("pid")) and jobrecord.liveness(runner) == "alive",
        "done": jobrecord.read_json(os.path.join(qdir, "done.json")),
        "cancelled": os.path.exists(os.path.join(qdir, "cancel")),
        "now": time.time(),
    }


def _start_runner(name, qdir, opts):
    """Fork the detached runner; it records itself in runner.json before this returns."""
    r, w = os.pipe()

    def body():
        me = procs.stat(os.getpid()) or {}
        jobrecord.write_json(os.path.join(qdir, "runner.json"),
                             {"pid": os.getpid(), "start_ticks": me.get("start_ticks"), "boot_id": procs.boot_id(),
                              "started_at": time.time()})
        os.close(w)
        _run_queue(name, qdir, opts)

    wrapper.detach(body, os.path.join(qdir, "runner.log"), keep_fd=w)
    os.close(w)
    wrapper._read_until_eof(r, 10.0)
    os.close(r)


def _run_queue(name, qdir, opts):
    """Run entries in file order, one at a time, until none is left; then write done.json."""
    common = {k: opts.get(k) for k in ("env", "secrets", "workdir", "gpus", "progress_regex")}
    root = jobrecord.jobs_dir()
    while True:
        if os.path.exists(os.path.join(qdir, "cancel")):
            _finish_queue(name, qdir, cancelled=True)
            return
        with _Locked(os.path.join(qdir, "lock")):
            pending = _pending(name, _read(os.path.join(qdir, "lines")))
            if not pending:
                _finish_queue(name, qdir)
                return
        line, cmd = pending[0]
        key = _entry_key(name, line)
        with _Locked(os.path.join(root, ".lock")):
            job_id = _by_key(key)
            if job_id is None:
                spec = dict(common, command=cmd, kind="cmd", name="%s:%d" % (name, line), key=key, queue=name,
                            labels={"queue": name, "queue_line": str(line)})
                try:
                    job_id = create(spec, _body(spec))
                except JobError as e:
                    sys.stderr.write("gpuops queue %s: line %d not started: %s\n" % (name, line, e))
                    _finish_queue(name, qdir, error=str(e))
                    return
        while _entry_open(job_id):
            time.sleep(0.3)


def _finish_queue(name, qdir, cancelled=False, error=None):
    report = queue_report(name, qdir)
    failed = [e["line"] for e in report["entries"] if not _entry_ok(e.get("job"))]
    done = {"finished_at": time.time(), "total": len(report["entries"]), "failed_lines": failed,
            "cancelled": cancelled, "error": error}
    jobrecord.write_json(os.path.join(qdir, "done.json"), done)
    sys.stderr.write("gpuops queue %s done: %d entries, %d not completed\n" % (name, done["total"], len(failed)))


def _entry_ok(job):
    return bool(job) and (job.get("exit") or {}).get("exit_code") == 0


ACTIONS = {"launch": launch, "status": status, "stream": stream, "stop": stop, "retry": retry, "queue": queue}
