"""Targets: where a command runs. LocalTarget, SSHTarget (paramiko) and OpenSSHTarget
(remote/openssh.py) share one interface.

    target.run(line, stdin=b"", timeout_s=None, on_stdout=None) -> Result
    target.run_onbox(entry, args, stdin=b"", timeout_s=60) -> dict

`line` is a POSIX sh line; the target wraps it (sh -c, remote-side timeout). Each `run` is
exactly one exec channel, so a verb's round trips can be counted.
"""

import os
import signal
import socket
import subprocess
import threading

from .. import onbox
from ..errors import AuthFailed, HostKeyChanged, TimedOut, Unreachable
from . import wrap
from .result import Result, check_onbox

_LOCAL_GRACE_S = 10


class LocalTarget:
    """This machine, through the same sh line and timeout wrapper as a remote box."""

    name = "local"
    is_local = True

    def run(self, line, stdin=b"", timeout_s=None, on_stdout=None):
        proc = subprocess.Popen(
            ["sh", "-c", line],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        reader = _StderrReader(proc.stderr)
        try:
            kill_after = (timeout_s + _LOCAL_GRACE_S) if timeout_s else None
            out = _pump(proc.stdin, proc.stdout, stdin, on_stdout, kill_after, proc.kill)
            proc.wait(timeout=(timeout_s + _LOCAL_GRACE_S) if timeout_s else None)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise TimedOut(f"local: command ran past {timeout_s:g}s") from None
        return Result(out, reader.join(), proc.returncode)

    def run_onbox(self, entry, args=(), stdin=b"", timeout_s=60, deps=()):
        return _run_onbox(self, entry, args, stdin, timeout_s, deps)

    def close(self):
        pass


class SSHTarget:
    """A remote box over one Fabric/paramiko connection, opened lazily and reused."""

    is_local = False

    def __init__(self, hostspec):
        self.spec = hostspec
        self.name = hostspec.spec
        self._conn = None
        self._lock = threading.Lock()
        self.channels_opened = 0

    def _connect(self):
        with self._lock:
            if self._conn is None:
                self._conn = open_connection(self.spec)
            return self._conn

    def run(self, line, stdin=b"", timeout_s=None, on_stdout=None):
        transport = self._connect().transport
        try:
            chan = transport.open_session(timeout=self.spec.connect_timeout)
        except Exception as e:
            raise Unreachable(f"{self.name}: could not open a channel: {e}") from None
        self.channels_opened += 1
        if timeout_s:
            chan.settimeout(timeout_s + wrap.KILL_AFTER_S + _LOCAL_GRACE_S)
        try:
            chan.exec_command(wrap.sh(line))
            reader = _StderrReader(chan.makefile_stderr("rb"))
            out = _pump_channel(chan, stdin, on_stdout)
            code = chan.recv_exit_status()
            return Result(out, reader.join(), code)
        except socket.timeout:
            raise TimedOut(f"{self.name}: no answer within {timeout_s:g}s") from None
        finally:
            chan.close()

    def run_onbox(self, entry, args=(), stdin=b"", timeout_s=60, deps=()):
        return _run_onbox(self, entry, args, stdin, timeout_s, deps)

    def sftp(self):
        return self._connect().client.open_sftp()

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _run_onbox(target, entry, args, stdin, timeout_s, deps):
    src = onbox.script(entry, tuple(deps))
    line = wrap.python_line(len(src), args, timeout_s, site=entry not in onbox.WITHOUT_SITE)
    result = target.run(line, stdin=src + (stdin or b""), timeout_s=timeout_s)
    return check_onbox(result, target.name, timeout_s)


class _StderrReader(threading.Thread):
    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.data = b""
        self.start()

    def run(self):
        try:
            self.data = self.stream.read()
        except (OSError, ValueError, socket.timeout):
            pass

    def join(self, timeout=None):
        super().join(timeout)
        return self.data


def _pump(stdin_pipe, stdout_pipe, payload, on_stdout, kill_after_s, kill):
    """Feed `payload` to stdin and collect stdout; call kill() if it runs past `kill_after_s`."""
    def feed():
        try:
            if payload:
                stdin_pipe.write(payload)
            stdin_pipe.close()
        except (BrokenPipeError, OSError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    timer = threading.Timer(kill_after_s, kill) if kill_after_s else None
    if timer:
        timer.start()
    chunks = []
    try:
        while True:
            chunk = stdout_pipe.read1(65536) if hasattr(stdout_pipe, "read1") else stdout_pipe.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if on_stdout:
                on_stdout(chunk)
    finally:
        if timer:
            timer.cancel()
    writer.join()
    return b"".join(chunks)


def _pump_channel(chan, payload, on_stdout):
    def feed():
        try:
            if payload:
                chan.sendall(payload)
            chan.shutdown_write()
        except (OSError, EOFError, socket.error):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    chunks = []
    while True:
        chunk = chan.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        if on_stdout:
            on_stdout(chunk)
    writer.join()
    return b"".join(chunks)


def open_connection(spec, _hops=0):
    """A connected fabric.Connection with our host-key policy, keepalive and error taxonomy."""
    import paramiko
    from fabric import Config, Connection

    from . import hostkeys, hostspec

    if _hops > 8:
        raise Unreachable(f"{spec.spec}: ProxyJump chain is longer than 8 hops")
    gateway = None
    if spec.proxy_jump:
        first_hop = spec.proxy_jump.split(",")[0]
        gateway = open_connection(hostspec.resolve(first_hop), _hops + 1)
    config = Config(ssh_config=paramiko.SSHConfig(), overrides={"load_ssh_configs": False})
    kwargs = {"allow_agent": not spec.identities_only, "look_for_keys": not spec.identity_files}
    if spec.identity_files:
        kwargs["key_filename"] = list(spec.identity_files)
    conn = Connection(
        spec.hostname,
        user=spec.user,
        port=spec.port,
        config=config,
        gateway=gateway if gateway is not None else False,
        connect_timeout=spec.connect_timeout,
        connect_kwargs=kwargs,
    )
    policy = hostkeys.install(conn.client, spec.known_hosts)
    where = f"{spec.spec} ({spec.hostname}:{spec.port})"
    try:
        conn.open()
    except paramiko.BadHostKeyException as e:
        raise HostKeyChanged(
            f"{where}: host key changed: the server offered {hostkeys.fingerprint(e.key)}, known_hosts "
            f"expects {hostkeys.fingerprint(e.expected_key)}. If the box was re-provisioned, remove the old "
            f"entry with: ssh-keygen -R '{spec.known_hosts_name}' -f {policy.record_path}"
        ) from None
    except paramiko.AuthenticationException as e:
        raise AuthFailed(f"{where}: authentication failed for user {spec.user!r}: {e}") from None
    except (socket.timeout, TimeoutError):
        raise TimedOut(f"{where}: no SSH answer within {spec.connect_timeout}s") from None
    except paramiko.SSHException as e:
        if "authentication" in str(e).lower():
            raise AuthFailed(f"{where}: authentication failed for user {spec.user!r}: {e}") from None
        raise Unreachable(f"{where}: SSH handshake failed: {e}") from None
    except (OSError, EOFError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise Unreachable(f"{where}: cannot connect: {reason}") from None
    conn.transport.set_keepalive(spec.keepalive_s)
    return conn


def transport() -> str:
    """"openssh" or "paramiko": GPUOPS_TRANSPORT, else the ssh client when it is installed."""
    from . import openssh

    return os.environ.get("GPUOPS_TRANSPORT") or ("openssh" if openssh.available() else "paramiko")


def target_for(spec: str, identity=None):
    """The target for a host spec. GPUOPS_TRANSPORT=paramiko|openssh overrides the choice."""
    from . import hostspec, openssh, warmup

    if hostspec.is_local(spec):
        return LocalTarget()
    warmed = warmup.take(spec, identity)
    if warmed is not None:
        return warmed
    resolved = hostspec.resolve(spec, identity)
    if transport() == "openssh":
        return openssh.OpenSSHTarget(resolved, identity)
    return SSHTarget(resolved)
