"""paramiko as transport (no `ssh` client here, or GPUOPS_TRANSPORT=paramiko): one Fabric
connection per target, opened lazily and reused; each command one exec channel on it."""

import threading

from ..errors import Unreachable
from . import wrap
from .base import Target
from .connection import open_connection


class _In:
    def __init__(self, chan) -> None:
        self._chan = chan

    def write(self, data) -> None:
        self._chan.sendall(data)

    def close(self) -> None:
        self._chan.shutdown_write()


class _Out:
    def __init__(self, chan) -> None:
        self._chan = chan

    def read1(self, n):
        return self._chan.recv(n)


class _Process:
    """An exec channel with a subprocess's face: kill() closes it, which ends every read."""

    def __init__(self, chan) -> None:
        self._chan = chan
        self.stdin, self.stdout, self.stderr = _In(chan), _Out(chan), chan.makefile_stderr("rb")

    def kill(self) -> None:
        # A deadline's kill races the connection's end: closing a channel whose transport is gone
        # raises from the timer thread (EOFError), and there is nothing left to end.
        try:
            self._chan.close()
        except (EOFError, OSError):
            pass

    def wait(self):
        code = self._chan.recv_exit_status()
        self._chan.close()
        return code


class SSHTarget(Target):
    """A remote box over one Fabric/paramiko connection, opened lazily and reused."""

    def __init__(self, hostspec) -> None:
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

    def _spawn(self, command):
        transport = self._connect().transport
        try:
            chan = transport.open_session(timeout=self.spec.connect_timeout)
        except Exception as e:
            raise Unreachable(f"{self.name}: could not open a channel: {e}") from None
        self.channels_opened += 1
        chan.exec_command(wrap.sh(command))
        return _Process(chan)

    def _checked(self, result):
        if result.exit < 0:  # the channel closed without an exit status: the link, not the command
            raise Unreachable(f"{self.name}: the connection was closed before the command finished")
        return result

    def sftp(self):
        return self._connect().client.open_sftp()

    def ssh_argv(self, control=None):
        """The ssh command line for tools that need one (rsync), with the same settings (there is
        no master connection to share: `control` does not apply)."""
        from .openssh import ssh_argv

        return ssh_argv(self.spec)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
