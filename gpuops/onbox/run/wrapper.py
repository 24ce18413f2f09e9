"""The supervisor that outlives the SSH session: starts a job, records its start and its end.

`start()` is called by the on-box launcher (a python3 that sshd started). It double-forks: the
middle child calls setsid() and exits, so the supervisor left behind belongs to no terminal and
no SSH session, is parented by init (or a subreaper), ignores SIGHUP, and holds none of the
session's pipes (otherwise sshd would keep the channel open and the caller would hang, the
classic `nohup … &` trap). The supervisor then:

  * spawns the job in a session of its own (pid == pgid == sid), stdin /dev/null, stdout and
    stderr appended to the job log, with the caller's environment (secrets arrive in memory,
    never through a file or argv);
  * writes meta.json (pid, pgid, start time, boot_id, OOM counter …) and only then tells the
    launcher, so "launch returned" implies "the start record exists";
  * marks itself a child subreaper, so children that the job orphans are re-parented to it
    (and stay findable as the job's) instead of to init, and reaps them;
  * looks, in the job's first minutes, whether its W&B and TensorBoard curves go anywhere
    (gpuops.onbox.track.trackwatch: trackers.json);
  * samples the log size while the job runs (`growth`: "epoch size" lines) so status can tell
    when a given log line was written without trusting the log's mtime;
  * forwards SIGTERM/SIGINT to the job's process group (a `pkill python` aimed at the job must
    not leave an unrecorded end);
  * writes exit.json atomically when the job's leader ends: exit code, or the signal's name.

Exit code vs signal: the leader is `bash cmd`; when bash itself is killed we see the signal, but
when a child of bash is killed, bash exits 128+N and we record that code (status explains it).
"""

import errno
import json
import os
import select
import signal
import subprocess
import time

from ..host import jobrecord, procs, telemetry
from ..track import trackwatch

_FAST_SAMPLE_S, _SLOW_SAMPLE_S, _FAST_PERIOD_S = 1.0, 5.0, 600.0
_PR_SET_NAME, _PR_SET_CHILD_SUBREAPER = 15, 36
_RESET = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGPIPE", "SIGXFSZ", "SIGCHLD", "SIGUSR1", "SIGUSR2")


def detach(body, log_path, keep_fd=None) -> None:
    """Run body() in a session-less grandchild whose stdio is /dev/null + `log_path`.

    Returns in the caller as soon as the intermediate child has exited; the grandchild never
    returns (it calls os._exit after body). `keep_fd` survives the fd sweep (a status pipe).
    """
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        _redirect(log_path, keep_fd)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        body()
        code = 0
    except BaseException:  # the detached process has nobody to raise to: log and leave
        import traceback

        traceback.print_exc()
        code = 70
    os._exit(code)


def _redirect(log_path, keep_fd) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    keep = {0, 1, 2}
    if keep_fd is not None:
        keep.add(keep_fd)
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(3, 1024)
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def start(job_dir, argv, env, workdir, meta, timeout_s=30.0, supervise=None, log_path=None):
    """Start the job under a detached supervisor; return its meta (with pid) once written.

    On a spawn failure (missing interpreter, unusable workdir) the supervisor writes meta with
    pid null plus an exit record, and the returned meta carries 'spawn_error'.
    """
    r, w = os.pipe()
    log_path = log_path or os.path.join(job_dir, jobrecord.LOG)

    def body() -> None:
        (supervise or _supervise)(job_dir, argv, env, workdir, meta, w)

    detach(body, log_path, keep_fd=w)
    os.close(w)
    data, ended = read_until_eof(r, timeout_s)
    os.close(r)
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:
        pass
    if not ended:  # alive but silent: it may still write the record, so none is written here
        raise jobrecord.JobError("timed-out", "the job supervisor did not report a start within %gs" % timeout_s)
    return _supervisor_lost(job_dir, meta)


def _supervisor_lost(job_dir, meta):
    """The supervisor ended without reporting a start: a job that kills its parent (`kill $PPID`)
    kills it, as can the OOM killer. What is known goes on record, so the job is never a launch
    that never ends: the start record it wrote, if it got that far; else the job's processes,
    found by the GPUOPS_JOB_ID they carry; else an exit record saying that the job is not running
    and how it ended is unknown (VANISHED)."""
    recorded = jobrecord.read_json(os.path.join(job_dir, jobrecord.META))
    if recorded and recorded.get("pid"):
        return recorded
    job_id = meta.get("job_id")
    live = [st for st in (procs.stat(p) for p in procs.pids() if procs.job_tag(p) == job_id)
            if st and st["state"] not in ("Z", "X")]
    leader = next((st for st in live if st["pid"] == st["sid"]), None)
    why = "the job's gpuops supervisor ended before it recorded the start (a job that kills its parent kills it)"
    meta = dict(meta, supervisor_lost=why, pid=leader and leader["pid"], pgid=leader and leader["pgid"],
                start_ticks=leader and leader["start_ticks"], wrapper_pid=None)
    for name in os.listdir(job_dir):  # what the supervisor was writing when it died
        if name.startswith(jobrecord.META + ".tmp."):
            os.unlink(os.path.join(job_dir, name))
    jobrecord.write_json(os.path.join(job_dir, jobrecord.META), meta)
    if leader is None:
        jobrecord.write_json(os.path.join(job_dir, jobrecord.EXIT), {
            "exit_code": None, "signal": None, "ended_at": time.time(),
            "error": why + ", and the job is not running: how it ended is unknown",
            "survivors": [{"pid": st["pid"], "start_ticks": st["start_ticks"]} for st in live]})
    return meta


def read_until_eof(fd, timeout_s):
    """(what came on `fd`, whether it ended) within `timeout_s`."""
    chunks, deadline = [], time.time() + timeout_s
    while True:
        left = deadline - time.time()
        if left <= 0:
            return b"".join(chunks), False
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return b"".join(chunks), False
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)


def _reset_signals() -> None:
    # Runs in the job's child between fork and exec: dispositions we changed (and SIG_IGN that
    # python or a non-interactive shell set) must not leak into the user's program.
    for name in _RESET:
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)


def _become_subreaper():
    """Adopt the job's orphans, and show as `gpuops-wrap` in ps/top (comm) instead of python3."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(b"gpuops-wrap"), 0, 0, 0)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:  # no ctypes or no prctl (not Linux): orphans go to init instead
        return False


class Supervisor(object):
    """The supervisor process's own state across the attempts it runs: the signals it forwards
    (and remembers: a run's retry decision tells a SIGTERM from outside from gpuops' own stop), the
    wake-up pipe SIGCHLD writes to, and its identity as a child subreaper."""

    def __init__(self) -> None:
        self.pgid, self.outside = None, None
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)
        self.wake_r, wake_w = os.pipe()
        for fd in (self.wake_r, wake_w):
            _nonblocking(fd)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        subreaper = _become_subreaper()
        me = procs.stat(os.getpid()) or {}
        self.ident = {"wrapper_pid": os.getpid(), "wrapper_start_ticks": me.get("start_ticks"),
                      "subreaper": subreaper}

    def _forward(self, signum, _frame) -> None:
        self.outside = _signal_name(signum)
        if self.pgid:
            try:
                os.killpg(self.pgid, signum)
            except OSError:
                pass

    def spawn(self, argv, env, workdir, out=1):
        """The job's leader in a session of its own, its output to fd `out`; OSError when it
        cannot start."""
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=workdir, env=env,
                                 start_new_session=True, close_fds=True, preexec_fn=_reset_signals)
        self.pgid = child.pid
        return child

    def wait(self, child, job_dir, gpus=None, tick=None, curves=None):
        """Reap children until `child` ends, sampling the log's growth and the job's telemetry (its
        GPUs `gpus`, a CUDA_VISIBLE_DEVICES value), looking where its curves go in its first
        minutes (`curves`, a trackwatch.Check) and calling tick() each round; its exit record."""
        sampler = telemetry.Sampler(child.pid, child.pid, gpus=gpus, adopted_by=os.getpid())
        recorder = telemetry.Recorder(job_dir, sampler)
        status = _wait_for(child.pid, job_dir, self.wake_r,
                           lambda: (recorder.tick(), curves and curves.tick(), tick and tick()))
        child.returncode = 0  # reaped by us above; keep Popen from waiting on a recycled pid
        record = {"ended_at": time.time()}
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            record.update(exit_code=None, signal=_signal_name(sig), core_dumped=bool(os.WCOREDUMP(status)))
        else:
            record.update(exit_code=os.WEXITSTATUS(status), signal=None)
        record["survivors"] = _group_members(child.pid)
        _sample(job_dir, {}, force=True)
        self.pgid = None
        return record


def _supervise(job_dir, argv, env, workdir, meta, notify_fd) -> None:
    sup = Supervisor()
    meta = dict(meta, **sup.ident)
    try:
        child = sup.spawn(argv, env, workdir)
    except OSError as e:
        spawn_failed(job_dir, meta, e)
        notify_launcher(notify_fd, meta)
        return
    started(job_dir, meta, child)
    notify_launcher(notify_fd, meta)
    curves = trackwatch.Check(job_dir, env, child.pid, meta.get("tb_logdir"))
    jobrecord.write_json(os.path.join(job_dir, jobrecord.EXIT), sup.wait(child, job_dir, meta.get("gpus"),
                                                                         curves=curves))


def started(job_dir, meta, child, write=jobrecord.write_json) -> None:
    """Write the start record of the job `child` leads (before anyone is told it started); `write`:
    a run's supervisor's, which keeps what a full disk refuses for later."""
    st = procs.stat(child.pid) or {}
    meta.update(pid=child.pid, pgid=child.pid, start_ticks=st.get("start_ticks"))
    write(os.path.join(job_dir, jobrecord.META), meta)


def _group_members(pgid):
    """[{pid, start_ticks}] of live processes still in the job's process group."""
    out = []
    for pid in procs.pids():
        st = procs.stat(pid)
        if st and st["pgid"] == pgid and st["state"] not in ("Z", "X"):
            out.append({"pid": pid, "start_ticks": st["start_ticks"]})
    return out


def spawn_failed(job_dir, meta, err, write=jobrecord.write_json) -> None:
    """The start and exit records of a job whose command could not start (126: not executable, 127:
    not found, as a shell says)."""
    code = 126 if err.errno in (errno.EACCES, errno.ENOEXEC) else 127
    meta.update(pid=None, pgid=None, start_ticks=None, spawn_error=str(err))
    write(os.path.join(job_dir, jobrecord.META), meta)
    write(os.path.join(job_dir, jobrecord.EXIT), {"exit_code": code, "signal": None, "ended_at": time.time(),
                                                  "error": str(err)})


def notify_launcher(fd, meta) -> None:
    """Hand the launcher the start record (it returns once it has it) and let it go."""
    try:
        os.write(fd, json.dumps(meta).encode("utf-8"))
    finally:
        os.close(fd)


def _wait_for(pid: int, job_dir, wake_fd, tick=None):
    """Reap children (ours and re-parented orphans) until `pid` ends; its wait status."""
    growth = {}
    while True:
        while True:
            try:
                got, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if got == 0:
                break
            if got == pid:
                return status
        _sample(job_dir, growth)
        if tick is not None:
            tick()
        try:
            select.select([wake_fd], [], [], _FAST_SAMPLE_S)
            os.read(wake_fd, 512)
        except (OSError, IOError):
            pass


def _sample(job_dir, growth, force: bool = False) -> None:
    """Append 'epoch size' to `growth` when the log grew (1 s resolution, 5 s after 10 min)."""
    now = time.time()
    first = growth.setdefault("first", now)
    every = _FAST_SAMPLE_S if now - first < _FAST_PERIOD_S else _SLOW_SAMPLE_S
    if not force and now - growth.get("at", 0.0) < every:
        return
    try:
        size = os.stat(os.path.join(job_dir, jobrecord.LOG)).st_size
    except OSError:
        return
    if size == growth.get("size"):
        return
    growth.update(at=now, size=size)
    try:
        fd = os.open(os.path.join(job_dir, jobrecord.GROWTH), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, ("%.2f %d\n" % (now, size)).encode("ascii"))
        finally:
            os.close(fd)
    except OSError:
        pass  # a full disk: the log's dating has a gap, the job and its supervisor go on


def _nonblocking(fd) -> None:
    import fcntl

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)


def _signal_name(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "SIG%d" % sig
