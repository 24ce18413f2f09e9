"""On-box resident helper: runs shipped entries without a new exec channel each time.
Entry: main(argv) = [token, idle seconds].

Every exec channel pays the box's login rc (conda or pyenv init: most of a call) and a fresh
interpreter. A kept master already skips the handshake; this helper skips the rest. It is started
once per master through an ordinary exec channel (so it has the environment the login shell
gives), listens on a unix socket in a directory only this user can enter, and the workstation
reaches it through that master's stream-local forward (gpuops.remote.resident): no shell, no rc,
no interpreter start, just a fork.

Per connection: the peer must be this user (SO_PEERCRED; sshd forwards as the user). The helper
sends HELLO at once, then reads one request line {"args": [...], "src": N, "timeout": S, "site": B}
and N bytes of a script built by gpuops.onbox.script. A forked worker runs the script as `python3 -c`
would (argv, stdin, stdout, stderr, exit status). The helper itself runs as `python3 -S`; a worker
whose entry needs the box's site-packages (gpuops.onbox.NEEDS_SITE: `site` true) runs site.main()
first, so it sees what a fresh `python3` started now would: packages installed since the helper
started included, and a verdict never depends on which path carried the call. Everything after the script is frames
(gpuops.onbox.helper.wire): the caller's stdin and where it ends, then the worker's stdout, stderr and
exit status. The stdin's end is a frame, not the connection's end, because a forward turns
a caller that hangs up into a plain end of input: an end of the connection means the caller is
gone, and its worker is stopped. The deadline is kept here as coreutils `timeout -k` keeps it for
an exec channel: SIGTERM to the worker's process group, SIGKILL wire.KILL_AFTER_S later, status 124
(137 when SIGKILL was needed).

Its stdin, when it starts, may hold {file name: source} of the gpuops modules its callers ship:
it compiles them once, and a worker whose script compiles one of them (the bundle's loader
calls `compile` for each module) gets the code compiled from that same text, instead of spending
10-20 ms of the box's CPU compiling it again on every call. Only an identical text hits. It also
imports the standard modules those sources import at their top (subprocess, shutil...): another
10-20 ms that every worker spent before its entry started (a probe's nvidia-smi queries too).

The helper exits after `idle` seconds without a connection or a running worker, or when its
socket file is no longer its own.
"""

import json
import os
import re
import select
import signal
import socket
import stat
import struct
import sys
import time
import traceback

from . import wire

HEADER_MAX = 64 << 10
SRC_MAX = 64 << 20
ARGS_MAX = 256
STDIN_AHEAD = 1 << 20  # stdin read from the connection before the worker takes it
SOURCES_MAX = 16 << 20
_TOKEN = re.compile(r"^[0-9a-f]{16,64}$")
_TOP_IMPORT = re.compile(r"^(?:import ([\w., ]+)|from (\w[\w.]*) import )", re.M)
_CODE = {}  # (source, file name, mode) -> code object: see the module docstring
_CRED = struct.Struct("3i")


def runtime_dir():
    """A directory that only this user can enter: $XDG_RUNTIME_DIR/gpuops, else /tmp/gpuops-UID,
    made 0700 if missing; None when the one found is not provably ours."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base or not os.path.isabs(base) or not _ours(base, exact=False):
        base = None
    path = os.path.join(base, "gpuops") if base else "/tmp/gpuops-{}".format(os.getuid())
    try:
        os.mkdir(path, 0o700)
    except OSError:
        pass
    return path if _ours(path) else None


def _ours(path, exact=True):
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return False
    return not (st.st_mode & 0o077) if exact else not (st.st_mode & 0o022)


def main(argv) -> int:
    if len(argv) != 2 or not _TOKEN.match(argv[0]) or not argv[1].isdigit():
        sys.stderr.write("usage: resident TOKEN IDLE_SECONDS\n")
        return 2
    if not hasattr(socket, "SO_PEERCRED") or not hasattr(os, "fork"):
        print(json.dumps({"ok": False, "why": "no SO_PEERCRED or fork on this platform"}))
        return 0
    directory = runtime_dir()
    if directory is None:
        print(json.dumps({"ok": False, "why": "no private directory for the socket"}))
        return 0
    path = os.path.join(directory, "r-" + argv[0] + ".sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.unlink(path)
    except OSError:
        pass
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    inode = os.lstat(path).st_ino
    sources = _read_sources()
    sys.stdout.flush()
    pid = os.fork()
    if pid:
        print(json.dumps({"ok": True, "socket": path, "pid": pid}))
        return 0
    os.setsid()
    _detach()
    _compile_all(sources)
    _import_what_they_import(sources)
    try:
        serve(listener, path, inode, int(argv[1]))
    finally:
        if _still_ours(path, inode):
            os.unlink(path)
        os._exit(0)


def _read_sources() -> dict:
    """{file name: source} from stdin; {} when there is none or it is not that."""
    try:
        data = sys.stdin.buffer.read(SOURCES_MAX + 1)
        doc = json.loads(data.decode("utf-8")) if data and len(data) <= SOURCES_MAX else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return dict((k, v) for k, v in doc.items() if isinstance(k, str) and isinstance(v, str))


def _compile_all(sources) -> None:
    for filename, source in sources.items():
        try:
            _CODE[(source, filename, "exec")] = compile(source, filename, "exec")
        except (SyntaxError, ValueError):
            continue


def _import_what_they_import(sources) -> None:
    for source in sources.values():
        for listed, base in _TOP_IMPORT.findall(source):
            for name in [base] if base else [n.split()[0] for n in listed.split(",") if n.strip()]:
                try:
                    __import__(name)
                except Exception:  # noqa: BLE001 - a worker that needs it reports the failure itself
                    pass


def cached_compile(source, filename, mode, *rest, **kw):
    """compile(), answered from the helper's own compilations of an identical text."""
    if not rest and not kw:
        code = _CODE.get((source, filename, mode))
        if code is not None:
            return code
    return compile(source, filename, mode, *rest, **kw)


def _detach() -> None:
    """Let go of the exec channel that started us (its end waits for every copy of its pipes)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    try:
        os.chdir(os.path.expanduser("~"))
    except OSError:
        pass


def _still_ours(path, inode):
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_ino == inode


def serve(listener, path, inode, idle_s) -> None:
    workers = set()
    last = time.monotonic()
    while True:
        for pid in list(workers):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                workers.discard(pid)
                last = time.monotonic()
        if not workers and time.monotonic() - last >= idle_s:
            return
        if not _still_ours(path, inode):
            return
        ready, _, _ = select.select([listener], [], [], 1.0)
        if not ready:
            continue
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        last = time.monotonic()
        uid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[1]
        if uid != os.getuid():
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            code = 1
            try:
                code = session(conn)
            finally:
                os._exit(code)
        workers.add(pid)
        conn.close()


def _read_request(conn):
    """(args, source, timeout, site, the bytes read past the script) from the connection; ValueError
    when it is not a well-formed request."""
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("the connection ended before its request")
        data += chunk
        if len(data) > HEADER_MAX + 65536:
            raise ValueError("request line too long")
    line, rest = data.split(b"\n", 1)
    head = json.loads(line.decode("utf-8"))
    if not isinstance(head, dict):
        raise ValueError("malformed request")
    args, size, timeout = head.get("args"), head.get("src"), head.get("timeout") or 0
    site = head.get("site", False)
    if (not isinstance(args, list) or len(args) > ARGS_MAX or not all(isinstance(a, str) for a in args)
            or not isinstance(size, int) or not 0 < size <= SRC_MAX or not isinstance(timeout, (int, float))
            or not isinstance(site, bool)):
        raise ValueError("malformed request")
    while len(rest) < size:
        chunk = conn.recv(min(1 << 20, size - len(rest)))
        if not chunk:
            raise ValueError("the connection ended inside the script")
        rest += chunk
    return args, rest[:size], float(timeout), site, rest[size:]


def session(conn):
    """Serve one connection: run its script in a worker and relay everything (see the docstring)."""
    conn.sendall(wire.HELLO)
    try:
        args, src, timeout, site, stdin = _read_request(conn)
    except (ValueError, OSError) as e:
        _send(conn, wire.frame(wire.STDERR, "gpuops resident: {}\n".format(e).encode()) + wire.status(2))
        return 2
    fds = [os.pipe() for _ in range(3)]
    pid = os.fork()
    if pid == 0:
        conn.close()
        _worker(fds, args, src, site)
    (in_r, in_w), (out_r, out_w), (err_r, err_w) = fds
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    return _relay(conn, pid, in_w, out_r, err_r, stdin, timeout)


def _worker(fds, args, src, site) -> None:
    os.setpgid(0, 0)
    (in_r, in_w), (out_r, out_w), (err_r, err_w) = fds
    for fd, std in ((in_r, 0), (out_w, 1), (err_w, 2)):
        os.dup2(fd, std)
    for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
        os.close(fd)
    enc = sys.getfilesystemencoding()
    sys.stdin = open(0, "r", closefd=False, encoding=enc, errors="surrogateescape")
    sys.stdout = open(1, "w", closefd=False, encoding=enc, errors="surrogateescape")
    sys.stderr = open(2, "w", closefd=False, encoding=enc, errors="backslashreplace")
    sys.argv = ["-c"] + args
    code = 0
    try:
        if site:
            import site as site_module

            site_module.main()
        # The bundle's loader looks `compile` up in these globals before the builtins.
        exec(compile(src, "<gpuops-onbox>", "exec"), {"__name__": "__main__", "compile": cached_compile})
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            sys.stderr.write("{}\n".format(e.code))
    except BaseException:  # noqa: BLE001 - reported as python3 would, then the status it gives
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code & 0xFF)


def _send(conn, data) -> bool:
    try:
        conn.sendall(data)
        return True
    except OSError:
        return False


def _relay(conn, pid: int, in_w, out_r, err_r, ahead, timeout):
    """Feed stdin from the caller's frames, frame stdout and stderr back, keep the deadline; send
    the worker's status as `timeout -k` and sh would report it. Returns this session's own status."""
    os.set_blocking(in_w, False)
    clock = _Deadline(pid, timeout)
    feed = wire.Input(b"")
    readers = {out_r: wire.STDOUT, err_r: wire.STDERR}
    poller = select.poll()
    for fd in readers:
        poller.register(fd, select.POLLIN)
    exited = _exit_watch(pid)
    if exited is not None:
        poller.register(exited, select.POLLIN)
    status = None
    if not feed.take(ahead):
        return _gone(pid)
    while status is None:
        # The connection is always watched: a hang-up (POLLHUP) is reported whatever is asked.
        poller.register(conn.fileno(), select.POLLIN if len(feed.pending) < STDIN_AHEAD else 0)
        if in_w is not None:
            if feed.pending:
                poller.register(in_w, select.POLLOUT)
            else:
                _quiet(poller.unregister, in_w)
                if feed.ended:
                    os.close(in_w)
                    in_w = None
        clock.check()
        # A worker's pipes end a moment before its exit can be collected: without a pidfd to wake
        # on, look again soon.
        for fd, event in poller.poll(1000 if readers or exited is not None else 5):
            if fd == exited:
                poller.unregister(exited)  # readable from now on: watched once
                os.close(exited)
                exited = None
            elif fd == conn.fileno():
                chunk = b"" if event & (select.POLLHUP | select.POLLERR) else conn.recv(65536)
                if not chunk or not feed.take(chunk):
                    return _gone(pid)
            elif fd == in_w:
                try:
                    feed.pending = feed.pending[os.write(in_w, feed.pending):]
                except BlockingIOError:
                    pass
                except OSError:  # the worker closed its stdin: the rest is not wanted
                    feed.pending = b""
                    poller.unregister(in_w)
                    os.close(in_w)
                    in_w = None
            elif fd in readers:
                chunk = os.read(fd, wire.FRAME_MAX)
                if not chunk:
                    poller.unregister(fd)
                    os.close(fd)
                    del readers[fd]
                elif not _send(conn, wire.frame(readers[fd], chunk)):
                    return _gone(pid)
        if not readers:
            done, status = os.waitpid(pid, os.WNOHANG)
            if not done:
                status = None
    if in_w is not None:
        os.close(in_w)
    if exited is not None:
        os.close(exited)
    _send(conn, wire.status(clock.code(status)))
    return 0


def _exit_watch(pid: int):
    """A descriptor readable once process `pid` exits (Linux 5.3+, Python 3.9+), else None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _gone(pid: int) -> int:
    """The caller hung up (or sent what no caller sends): its worker is not wanted any more."""
    _killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return 1


class _Deadline(object):
    """The box's own deadline on a worker, kept as coreutils `timeout -k` keeps it."""

    def __init__(self, pid: int, timeout) -> None:
        self.pid = pid
        self.at = time.monotonic() + timeout if timeout > 0 else None
        self.signalled = None

    def check(self) -> None:
        if self.at is None:
            return
        now = time.monotonic()
        if self.signalled is None and now >= self.at:
            self.signalled = signal.SIGTERM
            _killpg(self.pid, signal.SIGTERM)
        elif self.signalled == signal.SIGTERM and now >= self.at + wire.KILL_AFTER_S:
            self.signalled = signal.SIGKILL
            _killpg(self.pid, signal.SIGKILL)

    def code(self, status):
        if self.signalled is not None:
            return 137 if self.signalled == signal.SIGKILL else 124
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)


def _quiet(call, *args) -> None:
    try:
        call(*args)
    except (KeyError, ValueError, OSError):
        pass


def _killpg(pid: int, sig) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass
