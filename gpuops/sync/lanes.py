"""The streams of a multi-stream copy: each its own SSH connection; one stream's rate, measured.

A Lane is a connection of its own (a master on a private socket, so nothing it carries shares a
TCP stream with another lane or with the target's own master). rsync rides it through `ssh_argv`,
exactly as it rides a target, and so do the range copies (gpuops.sync.ranges). A lane's master is
started on first use and again after `drop_link` (the link that failed may be the lane's own).

`measure` asks the link itself, over the target's own connection: a few one-line round trips
(the round trip), then PROBE_BYTES (random, to /dev/null on the box for a push; read from the
biggest file there for a pull): one stream's rate. A push starts it as soon as its own tree is
walked (gpuops.sync.striped.Early), so it runs while the box lists the destination. A near link's
round trip is kept beside the kept master that carried it (gpuops.remote.mux): a later call over
that master, the same TCP connection, takes it from there and measures nothing (on a loaded
2-core machine the measuring channel cost a loopback push more than a tenth of its time).
"""

import os
import shutil
import subprocess
import tempfile
import threading
import time

from ..remote import mux, openssh, wrap
from . import stripes

PROBE_BYTES = 2 << 20
PROBE_TIMEOUT_S = 30
PINGS = 5
RC_LINES = 100
MASTER_WAIT_S = 30


# Bulk data's cipher: AES-GCM runs in the CPU's AES instructions (x86 AES-NI, ARMv8 AES), ~1.5x
# cheaper than chacha20-poly1305, OpenSSH's first choice; where several streams carry a payload
# the CPUs are what holds them back. Only the order changes: a cipher the user's ssh_config
# leaves out stays out.
BULK_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def cipher_order(target) -> list:
    """`-o Ciphers=...` putting BULK_CIPHERS first among the ciphers ssh_config allows for the
    target (`ssh -G`), or [] when ssh does not say or allows none of them."""
    argv = openssh.ssh_argv(target.spec, target.identity)
    try:
        out = subprocess.run(argv[:-1] + ["-G", argv[-1]], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    allowed = next((line.split(None, 1)[1].strip().split(",") for line in out.splitlines()
                    if line.lower().startswith("ciphers ") and len(line.split(None, 1)) == 2), [])
    first = [c for c in BULK_CIPHERS if c in allowed]
    if not first:
        return []
    return ["-o", "Ciphers=" + ",".join(first + [c for c in allowed if c not in first])]


class Lane:
    def __init__(self, target, index: int, ciphers=()) -> None:
        self.target = target
        self.index = index
        self.ciphers = list(ciphers)
        self._dir = tempfile.mkdtemp(prefix=f"gpuops-lane{index}-")
        self._socket = os.path.join(self._dir, "s")
        self._lock = threading.Lock()
        self._closed = False
        self.name = target.name

    def ssh_argv(self, control="no", log_level="ERROR") -> list:
        """The target's ssh command line over this lane's master, started first when it is not up
        (a failed start leaves the command to connect by itself, and fail, and be retried)."""
        self._ensure()
        return self._argv("no", log_level)

    def _argv(self, control, log_level="ERROR") -> list:
        argv = openssh.ssh_argv(self.target.spec, self.target.identity, self._socket, control, openssh.PERSIST_S,
                                log_level)
        return argv[:-1] + self.ciphers + argv[-1:]

    def _ensure(self) -> None:
        with self._lock:
            if self._closed or os.path.exists(self._socket):
                return
            argv = self._argv("yes")
            try:
                # With ControlPersist the foreground ssh exits once the master listens.
                subprocess.run(argv[:-1] + ["-N", argv[-1]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=MASTER_WAIT_S, start_new_session=True)
            except subprocess.TimeoutExpired:
                pass

    def warm(self) -> None:
        """Start this lane's master now (a thread's work: the handshake takes round trips)."""
        try:
            self._ensure()
        except OSError:
            pass

    def drop_link(self) -> None:
        """End this lane's master (the next command starts a new one)."""
        with self._lock:
            self._exit()

    def _exit(self) -> None:
        if os.path.exists(self._socket):
            argv = openssh.ssh_argv(self.target.spec, self.target.identity, self._socket, "no")
            subprocess.run(argv[:-1] + ["-O", "exit", argv[-1]], stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=10)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._exit()
            shutil.rmtree(self._dir, ignore_errors=True)

    def popen(self, line: str) -> subprocess.Popen:
        """`line` run by sh on the box over this lane, with pipes for all three streams."""
        return subprocess.Popen(self.ssh_argv() + [wrap.sh(line)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)


def can_stripe(target) -> bool:
    """Lanes are OpenSSH connections: a paramiko target (no ssh client here) stays one stream."""
    return isinstance(target, openssh.OpenSSHTarget)


def measure(target, remote_file=None, on_far=None) -> dict:
    """{"rtt_s", "probe_bytes", "probe_s"} over the target's own connection; {} when the link could
    not be measured. A push's probe is random bytes sent to /dev/null on the box; a pull's is read
    from `remote_file` (the biggest to fetch), so the box's disk is in its time as in the pull's.

    One command: once the box says it is ready (the channel is up and its shell runs), PINGS lines
    go back and forth (rtt_s: the fastest; the shell's `read` and `echo` are builtins, so no
    process start is counted), then PROBE_BYTES go through (probe_s). `on_far()` is called once the
    round trip says the link is far, before the probe."""
    # Over the target's master: while its handshake runs, ssh would open a connection of its own.
    target.handshake_done()
    kept = target.kept_socket
    near = mux.read_link(kept) if kept else None
    if near is not None and near < stripes.NEAR_RTT_S:
        return {"rtt_s": near, "kept": True}  # measured over this very master by an earlier call
    pings = "read -r a; echo; " * PINGS
    if remote_file is None:
        data = os.urandom(PROBE_BYTES)  # random: a compressing ssh_config must not flatter the link
        line = f"echo ready; {pings}head -c {len(data)} > /dev/null; echo done"
    else:
        data = b""
        line = f"echo ready; {pings}head -c {PROBE_BYTES} -- {wrap.quote(remote_file)}"
    proc = subprocess.Popen(target.ssh_argv(control="no") + [wrap.sh(line)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None  # both are pipes
    timer = threading.Timer(PROBE_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        for _ in range(RC_LINES):  # a login rc may print lines of its own first
            said = stdout.readline()
            if said in (b"ready\n", b""):
                break
        if said != b"ready\n":
            return {}
        rtt = []
        for _ in range(PINGS):
            sent = time.monotonic()
            stdin.write(b"\n")
            stdin.flush()
            stdout.readline()
            rtt.append(time.monotonic() - sent)
        if min(rtt) < stripes.NEAR_RTT_S:
            if kept:
                mux.write_link(kept, round(min(rtt), 4))
            return {"rtt_s": round(min(rtt), 4)}  # a near link is one stream whatever its rate: no probe
        if on_far is not None:
            on_far()
        started = time.monotonic()
        stdin.write(data)
        stdin.close()
        out = stdout.read()  # a push's "done", after the box read everything; a pull's bytes
        probe = time.monotonic() - started
        if proc.wait() != 0:
            return {}
    except OSError:
        return {}
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    return {"rtt_s": round(min(rtt), 4), "probe_bytes": len(out) if remote_file else len(data),
            "probe_s": round(probe, 4)}
