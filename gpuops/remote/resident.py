"""Calls through the box's resident helper (gpuops.onbox.helper.resident), over a kept master.

A kept master (gpuops.remote.mux) spares a call the handshake, but every exec channel still pays
the box's login rc and a fresh interpreter: on a box with conda or pyenv in its rc, more than
the handshake itself. So once a master has served a call, the next one starts a resident helper
on the box and asks that master for a stream-local forward to it (`ssh -O forward -L`); later
calls connect to the forward's local socket and are a fork on the box, not an exec channel.

The forward lives in the master: it dies with it, so a re-provisioned box (whose dropped TCP
connection ends the master) is met by a fresh handshake and its host-key check as before.
Beside the master's socket, `<socket>.resident` records which forward belongs to which master
(its identity, as for the remembered interpreter), so a forward is only used on the master
that made it. Anything that is not the helper's greeting (a dead master, a helper that idled
out, a box that closed the forward) raises NothingRan before any request is sent: the caller
runs the call over an exec channel instead and a new helper is armed.

GPUOPS_RESIDENT=0 turns the helper off: every call on a kept master is then an exec channel.

What comes back is framed (gpuops.onbox.helper.wire) and bounded here: frames over FRAME_MAX, an unknown
frame type or a short exit status end the call with exit -1, like a lost connection.
"""

import contextlib
import json
import os
import queue
import re
import socket
import threading

from ..onbox.helper import wire
from . import mux

ENV = "GPUOPS_RESIDENT"
ARM_TIMEOUT_S = 20
ARM_STALE_S = ARM_TIMEOUT_S + 15  # an arming marker older than this was left by one that died
# Arms under way at once (each a local interpreter and a box-side start): a fleet of 64 boxes
# arming together on top of the view that asked starved a 2-core workstation into timeouts.
MAX_ARMING = 8
# A socket path the box names: absolute, plain characters (it goes into `-L local:remote`).
_REMOTE_PATH = re.compile(r"^/[A-Za-z0-9._/-]{1,100}$")


def enabled(environ=None) -> bool:
    return (os.environ if environ is None else environ).get(ENV, "").strip() != "0"


class NothingRan(Exception):
    """The helper did not greet: no request was sent, so running the call another way is safe.
    `stuck`: no answer at all within the greeting time (the link, not the helper, is suspect)."""

    def __init__(self, path, stuck=False) -> None:
        super().__init__(path)
        self.stuck = stuck


def forward_for(master_socket):
    """The forward's local socket recorded for the master listening on `master_socket` now; None
    when there is none (or it was made on another master)."""
    master = mux.identity(master_socket)
    if master is None:
        return None
    doc = mux.read_beside(master_socket, mux.RESIDENT_SUFFIX)
    if not isinstance(doc, dict) or doc.get("master") != master or not isinstance(doc.get("forward"), str):
        return None
    path = doc["forward"]
    return path if os.path.dirname(path) == os.path.dirname(master_socket) else None


def forget(master_socket) -> None:
    """Drop the record and the forward's local socket: the helper behind it is gone."""
    path = forward_for(master_socket)
    for stale in filter(None, (path, master_socket + mux.RESIDENT_SUFFIX)):
        with contextlib.suppress(OSError):
            os.unlink(stale)


def arm_later(spec, identity, master_socket, idle_s) -> None:
    """Arm a helper for the master on `master_socket` (host `spec`, as the call named it) in a
    detached process (gpuops.remote.arming), unless one is being armed already; returns at once."""
    import subprocess
    import sys
    import time

    marker = master_socket + mux.ARMING_SUFFIX
    if _arming_now(os.path.dirname(master_socket), time.time()) >= MAX_ARMING:
        return  # a later call arms this one: a fleet view must not start an arm per box at once
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            if time.time() - os.lstat(marker).st_mtime < ARM_STALE_S:
                return
            os.unlink(marker)
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            return
    except OSError:
        return
    os.close(fd)
    argv = [sys.executable, "-m", "gpuops.remote.arming", spec, master_socket, str(int(idle_s))]
    subprocess.Popen(argv + ([identity] if identity else []), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


def _arming_now(directory, now):
    """How many arms are under way in this socket directory (markers younger than ARM_STALE_S)."""
    count = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        if name.endswith(mux.ARMING_SUFFIX):
            with contextlib.suppress(OSError):
                count += now - os.lstat(os.path.join(directory, name)).st_mtime < ARM_STALE_S
    return count


def arm(target, master_socket, idle_s) -> bool:
    """Start a helper on the box through `target` (an exec channel on the master listening on
    `master_socket`) and have that master forward a local socket to it. True once recorded."""
    import secrets
    import subprocess

    master = mux.identity(master_socket)
    if master is None:
        return False
    token = secrets.token_hex(16)
    from .. import onbox

    sources = {onbox.module_file(name): text for name, text in onbox.sources().items()}
    doc = target.run_onbox("resident", args=[token, str(int(idle_s))], stdin=json.dumps(sources).encode(),
                           timeout_s=ARM_TIMEOUT_S)
    remote = doc.get("socket") if doc.get("ok") else None
    if not isinstance(remote, str) or not _REMOTE_PATH.match(remote) or not remote.endswith(f"/r-{token}.sock"):
        return False
    local = f"{master_socket}{mux.FORWARD_INFIX}{token[:8]}"
    if ":" in local or len(local.encode()) > 104:
        return False
    forget(master_socket)
    argv = target.ssh_argv()
    out = subprocess.run(argv[:-1] + ["-O", "forward", "-L", f"{local}:{remote}", argv[-1]],
                         capture_output=True, timeout=10)
    if out.returncode != 0 or mux.identity(master_socket) != master:
        return False
    return mux.write_beside(master_socket, mux.RESIDENT_SUFFIX, {"master": master, "forward": local})


def open_call(path, src, args, timeout_s, greet_s, site=False):
    """A started call on the helper behind local socket `path`: an object shaped like a spawned
    ssh process (stdin, stdout, stderr, kill, wait). `site`: the worker gets the box's
    site-packages, as an exec channel gives them (gpuops.onbox.NEEDS_SITE). NothingRan when the
    helper does not greet within `greet_s` seconds."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(greet_s)
    try:
        sock.connect(path)
        hello = _exactly(sock, len(wire.HELLO))
    except socket.timeout:
        sock.close()
        raise NothingRan(path, stuck=True) from None
    except OSError:
        sock.close()
        raise NothingRan(path) from None
    if hello != wire.HELLO:
        sock.close()
        raise NothingRan(path)
    sock.settimeout(None)
    head = json.dumps({"args": [str(a) for a in args], "src": len(src), "timeout": timeout_s or 0,
                       "site": bool(site)}).encode()
    call = _Call(sock)
    try:
        sock.sendall(head + b"\n" + src)
    except OSError:
        call.kill()  # the call ends as a lost connection does (exit -1)
    return call


class _Stream:
    """The read side of one of the call's output streams, fed by its reader thread."""

    def __init__(self) -> None:
        self._chunks: queue.SimpleQueue = queue.SimpleQueue()
        self._buf = b""
        self._ended = False

    def feed(self, data) -> None:
        self._chunks.put(data)

    def end(self) -> None:
        self._chunks.put(None)

    def read1(self, n=-1):
        if not self._buf and not self._ended:
            item = self._chunks.get()
            if item is None:
                self._ended = True
            else:
                self._buf = item
        if n < 0 or n >= len(self._buf):
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out

    read = read1


class _Input:
    """The call's stdin, sent as frames; its end is a frame too (a forward cannot tell a caller's
    end of input from a caller that is gone, so the helper takes the connection's end as the latter)."""

    def __init__(self, sock) -> None:
        self._sock = sock

    def write(self, data) -> None:
        for at in range(0, len(data), wire.FRAME_MAX):
            self._sock.sendall(wire.frame(wire.STDIN, data[at:at + wire.FRAME_MAX]))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.sendall(wire.frame(wire.STDIN_END, b""))


class _Call:
    def __init__(self, sock) -> None:
        self._sock = sock
        self.stdin = _Input(sock)
        self.stdout, self.stderr = _Stream(), _Stream()
        self.code = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        streams = {wire.STDOUT: self.stdout, wire.STDERR: self.stderr}
        try:
            while True:
                head = _exactly(self._sock, wire.HEAD)
                if head is None:
                    break
                kind, size = wire.head(head)
                if size > wire.FRAME_MAX or (kind not in streams and kind != wire.STATUS):
                    break
                payload = _exactly(self._sock, size)
                if payload is None:
                    break
                if kind == wire.STATUS:
                    self.code = wire.code_of(payload)
                    break
                streams[kind].feed(payload)
        except OSError:
            pass
        finally:
            self.stdout.end()
            self.stderr.end()
            self._sock.close()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def wait(self):
        self._reader.join()
        return -1 if self.code is None else self.code

    def done(self) -> bool:
        return not self._reader.is_alive()


def _exactly(sock, n):
    """`n` bytes from `sock`; None when it ends first."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data

