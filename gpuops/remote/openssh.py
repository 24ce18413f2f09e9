"""The OpenSSH client as transport: the user's real ssh_config, fast start, optional reuse.

When the `ssh` binary exists it is the default transport (as in Ansible): it honours every
ssh_config feature paramiko lacks (Include, Match, ProxyCommand, certificates, FIDO keys,
agents), and it starts in milliseconds where importing paramiko costs ~100 ms per call.
Host keys follow the same policy as the paramiko transport: StrictHostKeyChecking=accept-new,
i.e. trust on first use, record the key, refuse a changed one.

`ssh_argv` is the one place the ssh command line is built: exec channels, the background master
and rsync's `-e` all use it, so they share the host-key policy, keepalives and, once there is one,
the master connection.

subprocess, tempfile and shutil are imported where a process or a directory is made: a call that
rides a kept master and the box's resident helper makes neither, and those imports would cost it
~10 ms (see gpuops.remote.hostspec).

Connections are multiplexed. By default the master outlives the call (gpuops.remote.mux: a
per-user 0700 directory, GPUOPS_SSH_PERSIST seconds of idleness), so the next gpuops call
skips the handshake. With GPUOPS_SSH_PERSIST=0 the master is the target's own (a private temp
dir, from the target's second call on, gone on close()), so a verb that needs several exec
channels pays for two handshakes at most. start_master() opens the master up front, in the
background, for a caller with other work to do before its first call (see warmup). Each `run` is
still exactly one exec channel on the server.
"""

import contextlib
import os
import re
import threading
import time
from typing import Any

from ..errors import AuthFailed, HostKeyChanged, HostKeyRevoked, TimedOut, UnknownHost, Unreachable
from .. import sshspec
from . import hostspec, mux, patience, resident, wrap
from .base import GRACE_S, Target

ALIVE_COUNT = 3
PERSIST_S = 30  # a target's own master (GPUOPS_SSH_PERSIST=0): gone 30 s after its last use
_LOST_RACE = b"already exists, disabling multiplexing"
# What the ssh client itself says (exit 255) when the connection, not the command, failed.
_FAILURES = (
    (HostKeyRevoked, re.compile(r"REVOKED HOST KEY|marked as revoked")),
    (HostKeyChanged, re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed")),
    (AuthFailed, re.compile(r"Permission denied|Too many authentication failures|no mutual signature")),
    (TimedOut, re.compile(r"timed out|Timeout, server .* not responding")),
    # a name no resolver knows; "Temporary failure in name resolution" is a network's, worth a retry
    (UnknownHost, re.compile(r"Could not resolve hostname .*: (?!Temporary failure)")),
    (Unreachable, re.compile(r"^ssh: |Connection refused|Connection closed by|Connection reset|kex_exchange_identification|"
                             r"No route to host|Network is unreachable|Could not resolve|banner exchange|"
                             r"Control socket connect|mux_client", re.M)),
)


def available() -> bool:
    return hostspec.on_path("ssh") is not None


def chosen() -> str:
    """"openssh" or "paramiko": GPUOPS_TRANSPORT, else the ssh client when it is installed."""
    return os.environ.get("GPUOPS_TRANSPORT") or ("openssh" if available() else "paramiko")


def ssh_argv(spec, identity=None, control_path=None, control="auto", persist_s=PERSIST_S, log_level="ERROR"):
    """The ssh command line for host spec `spec`, up to and including the host (no remote command).

    The host is the name as given (an alias or an address), so ssh applies the user's ssh_config
    to it exactly as it would for `ssh HOST`; GPUOPS_SSH_CONFIG pins that file. `log_level` ERROR
    keeps ssh's notices out of a remote command's stderr; it also silences why a connection
    ended ("Connection closed by ...", logged at INFO), so a command line with no remote command
    (the master, whose stderr is ssh's alone) asks for INFO."""
    user, host, port = sshspec.parse(spec.spec)
    argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
            "-o", f"ConnectTimeout={spec.connect_timeout}",
            "-o", f"ServerAliveInterval={spec.keepalive_s}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
            "-o", f"LogLevel={log_level}"]
    config = os.environ.get("GPUOPS_SSH_CONFIG")
    if config:
        argv += ["-F", config]
    if identity:
        argv += ["-i", os.path.expanduser(identity), "-o", "IdentitiesOnly=yes"]
    if control_path:
        argv += ["-o", f"ControlMaster={control}", "-o", f"ControlPath={control_path}",
                 "-o", f"ControlPersist={persist_s}"]
    if user:
        argv += ["-l", user]
    if port:
        argv += ["-p", str(port)]
    return argv + [host]


def _with_check(error: Exception, spec: str) -> Exception:
    """`error` with the `ssh -G` step that shows what ssh makes of the host, where that is the way
    on (a name that does not resolve, a key the box refused: gpuops.envelope.error_envelope)."""
    if isinstance(error, (UnknownHost, AuthFailed)):
        error.check = tuple(hostspec.check_argv(spec))
    return error


class _Process:
    def __init__(self, argv) -> None:
        import subprocess

        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True)
        self.stdin, self.stdout, self.stderr = self._proc.stdin, self._proc.stdout, self._proc.stderr

    def kill(self) -> None:
        self._proc.kill()

    def wait(self):
        return self._proc.wait()

    def done(self) -> bool:
        return self._proc.returncode is not None


class OpenSSHTarget(Target):
    def __init__(self, spec, identity=None, multiplex=True, rides_only=False) -> None:
        """`rides_only`: use the kept master when there is one, never become one (an arming
        process must not bring back a master that `disconnect` or an expiry just ended)."""
        self._rides_only = rides_only
        self.spec = spec
        self.name = spec.spec
        self.identity = identity
        self.channels_opened = 0
        self._multiplex = multiplex
        self._mux_dir: str | None = None
        self._in_flight: set = set()
        self._in_flight_lock = threading.Lock()
        self._master: Any = None  # the master's ssh (a Popen; subprocess is imported only to start one)
        self._master_err: Any = None
        self._master_lock = threading.Lock()
        self._shared, self._keep_s = None, PERSIST_S
        keep = mux.persist_s() if multiplex else 0
        directory = mux.shared_dir() if keep else None
        self._shared = mux.socket_path(directory, spec, identity) if directory else None
        if self._shared:
            self._keep_s = keep
        # A master kept from an earlier call: this call arms the box's resident helper on it
        # (never the first call of a master, which pays for the handshake already).
        self._kept = bool(self._shared) and resident.enabled() and mux.identity(self._shared) is not None
        self._armed = False

    @property
    def kept_socket(self):
        """The socket of the master kept between calls that this target rides; None without one."""
        return self._shared

    def _control_path(self):
        if self._shared:
            return self._shared
        return f"{self._mux_dir}/%C" if self._mux_dir else None

    def ssh_argv(self, control="auto", log_level="ERROR"):
        """This target's ssh command line (with its master's socket once there is one)."""
        control = "no" if self._rides_only else control
        return ssh_argv(self.spec, self.identity, self._control_path(), control, self._keep_s, log_level)

    def start_master(self) -> None:
        """Begin the handshake now, in the background; the first run() waits for it to finish.
        The master is this target's own ssh command line, so a failure is raised from run() just
        as a direct connection's would be."""
        if self._shared and os.path.exists(self._shared):
            return  # an earlier call's master: the first run rides it, or replaces it if it died
        import subprocess
        import tempfile

        if not self._shared:
            self._mux_dir = tempfile.mkdtemp(prefix="gpuops-ssh-")
        self._master_err = tempfile.TemporaryFile()
        # With ControlPersist the foreground ssh exits once the master is listening, so its exit
        # status is the handshake's outcome; the master itself lives on in the background.
        argv = self.ssh_argv(control="yes", log_level="INFO")
        self._master_since = time.monotonic()
        self._master = subprocess.Popen(argv[:-1] + ["-N", argv[-1]], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=self._master_err, start_new_session=True)

    def _await_master(self, report=True) -> None:
        with self._master_lock:
            proc = self._master
            if proc is None:
                return
            # ssh gives up after its ConnectTimeout: that is the deadline a person is shown
            with patience.connecting(self.name, self.spec.connect_timeout) if report else contextlib.nullcontext():
                code = self._master_exit(proc, time.monotonic() + self.spec.connect_timeout + GRACE_S)
            # cleared only now, so a call from another thread waits for the handshake too
            self._master = None
            self._master_err.seek(0)
            err = self._master_err.read()
            self._master_err.close()
            if code == 0 or (self._shared and _LOST_RACE in err):
                return
            if self._mux_dir:
                _remove_tree(self._mux_dir)
                self._mux_dir = None
            if code == 255 and report:
                self._raise_for(err, f" (during the SSH handshake, after {time.monotonic() - self._master_since:.0f}s)")
            # anything else (the master was killed, or stopped at its deadline: a slow login, a
            # server's reverse DNS lookup, may still finish) is no verdict on the host: go direct

    def handshake_done(self) -> None:
        """Wait until a master being started (start_master) has finished its handshake or given
        up, so that a command line from ssh_argv() rides it instead of opening a connection of its
        own (a whole handshake more, on both ends' CPUs). Its verdict stays for the next command,
        which reports a failed handshake as its own."""
        deadline = time.monotonic() + self.spec.connect_timeout + GRACE_S
        while time.monotonic() < deadline:
            proc = self._master
            if proc is None or proc.poll() is not None:
                return
            time.sleep(0.01)

    def _master_exit(self, proc, deadline):
        """The master's exit code once it has shaken hands (it forks to the background then); a
        master that lost the race for a shared socket to another gpuops call is stopped at once
        (it would carry on as a plain connection that never exits), and the winner's is used."""
        import subprocess

        while True:
            try:
                # short: the call's first command waits on this (Popen.wait backs off up to 50 ms)
                return proc.wait(timeout=0.01)
            except subprocess.TimeoutExpired:
                pass
            lost = False
            if self._shared:
                self._master_err.seek(0)
                lost = _LOST_RACE in self._master_err.read()
            if lost or time.monotonic() >= deadline:
                proc.kill()
                return proc.wait()

    def _known_python(self):
        if not self._shared:
            return super()._known_python()
        from . import knownkeys

        if self._master is not None:
            self._await_master()  # the call waits for it anyway; its socket names the master
        return mux.read_python(self._shared, keys=lambda: knownkeys.of_target(self))

    def _learned_python(self, path, seen):
        if not self._shared:
            return super()._learned_python(path, seen)
        from . import knownkeys

        mux.write_python(self._shared, path, seen, knownkeys.of_target(self))

    def _resident(self, src, args, timeout_s, site):
        if not self._shared or not resident.enabled():
            return None
        if self._master is not None:
            self._await_master()
        path = resident.forward_for(self._shared)
        if path is None:
            self._arm()
            return None
        return lambda: resident.open_call(path, src, args, timeout_s, self.spec.connect_timeout, site)

    def _resident_lost(self, stuck) -> None:
        resident.forget(self._shared)
        if stuck:
            # A master whose forward gets no answer at all is as stuck as a call past its
            # deadline: end it, and this call shakes hands afresh.
            self._on_deadline()
            return
        self._arm()

    def _arm(self) -> None:
        # In a process of its own, which outlives this call: an arm cut short by the call's end
        # (on a loaded box it can take longer than the call) would be tried again by every call.
        if self._kept and not self._armed:
            self._armed = True
            resident.arm_later(self.name, self.identity, self._shared, self._keep_s)

    def _on_deadline(self) -> None:
        # The box's own `timeout -k` ends a command well before this deadline, so reaching it
        # means the link (or the box) is stuck, and every session on this master with it. The
        # master also holds our pipes (a mux client hands them over), so only its exit lets
        # this call return; the next call shakes hands afresh.
        self._close_shared()

    def _close_shared(self) -> None:
        if self._shared and os.path.exists(self._shared):
            mux.close(self._shared)

    def drop_link(self) -> None:
        """Also the kept master: a frozen link keeps it "up" until keepalives give out (most of a
        minute), and a retry riding it would stall the same way."""
        self.close()
        self._close_shared()

    def _spawn(self, command):
        if self._master is not None:
            self._await_master()
        if self._multiplex and not self._shared and self.channels_opened and self._mux_dir is None:
            import tempfile

            self._mux_dir = tempfile.mkdtemp(prefix="gpuops-ssh-")
        self.channels_opened += 1
        proc = _Process(self.ssh_argv() + [wrap.sh(command)])
        with self._in_flight_lock:
            self._in_flight = set(p for p in self._in_flight if not p.done())
            self._in_flight.add(proc)
        return proc

    def _checked(self, result):
        if result.exit == 255:
            self._raise_for(result.stderr)
            if not result.stdout and not result.stderr.strip():
                # At LogLevel=ERROR ssh says nothing when the connection ends during the handshake
                # (it logs that at INFO); a command that ran would have left some trace here (a
                # shipped entry's interpreter always names itself on stderr first).
                raise Unreachable(f"{self._where()}: the SSH connection ended before the command ran (ssh exit "
                                  f"255 without a word: a handshake cut off or refused); `ssh -v {self.name}` shows "
                                  "where it stops")
        if result.exit < 0:  # our ssh client was killed: close() from another thread
            raise Unreachable(f"{self.name}: the connection was closed before the command finished")
        return result

    def _raise_for(self, err: bytes, during=None):
        """The typed error for what ssh said when it failed (exit 255). `during`: the failure was
        the handshake's (the master's stderr is ssh's alone), so even words none of the patterns
        know mean the host could not be reached, said with them and `during` after."""
        text = err.decode("utf-8", "replace")
        for cls, pattern in _FAILURES:
            if pattern.search(text):
                message = self._message(cls, text)
                raise _with_check(cls(message + during if during and cls in (Unreachable, TimedOut) else message),
                                  self.spec.spec)
        if during:
            raise Unreachable(self._message(Unreachable, text) + during)

    def _where(self) -> str:
        return f"{self.name} ({self.spec.hostname}:{self.spec.port})"

    def _message(self, cls, text: str):
        last = [line.strip() for line in text.splitlines() if line.strip()]
        where = self._where()
        if cls is HostKeyRevoked:
            known = ", ".join(self.spec.known_hosts) or "~/.ssh/known_hosts"
            return (f"{where}: the host key it offered is marked @revoked in {known}: refusing it. A revoked "
                    "key is never to be trusted again; do not remove the line, ask the box's provider")
        if cls is HostKeyChanged:
            fp = re.search(r"(SHA256:[A-Za-z0-9+/=]+)", text)
            known = self.spec.known_hosts[0] if self.spec.known_hosts else "~/.ssh/known_hosts"
            return (f"{where}: host key changed" + (f": the server now offers {fp.group(1)}" if fp else "")
                    + f". If the box was re-provisioned, remove the old entry with: "
                      f"ssh-keygen -R '{self.spec.known_hosts_name}' -f {known}")
        if cls is AuthFailed:
            return f"{where}: authentication failed for user {self.spec.user!r}: {last[-1] if last else ''}"
        if cls is UnknownHost:
            said = last[-1].removeprefix("ssh: ") if last else "its name does not resolve"
            return f"{self.name}: no such host: {said}; check the name, or its Host entry in the ssh config"
        return f"{where}: {last[-1] if last else 'ssh failed'}"

    def sftp(self):
        """An SFTP client speaking through this target's own ssh command line (and its master,
        when there is one), so the box is trusted exactly as for every other call."""
        from .sftp_pipe import open_sftp

        return open_sftp(self.ssh_argv(control="no"))

    def close(self) -> None:
        """End the connection, like closing a paramiko transport: in-flight calls return at once."""
        with self._in_flight_lock:
            running, self._in_flight = self._in_flight, set()
        for proc in running:
            proc.kill()
        if self._master is not None:  # still shaking hands (or failed unseen): nobody will use it
            self._master.kill()
            self._await_master(report=False)
        if self._mux_dir:
            if os.listdir(self._mux_dir):
                import subprocess

                subprocess.run(self.ssh_argv()[:-1] + ["-O", "exit", self.ssh_argv()[-1]], capture_output=True,
                               timeout=10)
            _remove_tree(self._mux_dir)
            self._mux_dir = None


def _remove_tree(path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
