"""SFTP over the OpenSSH client: paramiko's SFTP client speaking through `ssh -s HOST sftp`.

Under the OpenSSH transport the SFTP engine must trust the box exactly as every other call does:
the user's ssh_config, known_hosts with its @cert-authority and @revoked lines, certificates,
agents, and the target's master connection. So the SFTP protocol runs over an ssh subprocess's
pipes. PipeChannel gives those pipes the few methods paramiko's SFTPClient and the SFTP engine
use (send, recv, recv_ready, settimeout, close, closed, get_name, get_transport().is_active()); a
read or write that waits longer than the timeout raises socket.timeout, as a channel's would.
"""

import os
import select
import socket
import subprocess
import threading

CHUNK = 1 << 16
STDERR_BYTES = 4096


class PipeChannel:
    def __init__(self, argv):
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True)
        self._in, self._out = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        # A blocking write waits until the whole chunk fits, however long a stalled link takes:
        # non-blocking, it writes what fits and the timeout governs the wait for the rest.
        os.set_blocking(self._in, False)
        self._timeout = None
        self._closed = False
        self.stderr = b""
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self):
        for chunk in iter(lambda: self._proc.stderr.read1(CHUNK), b""):
            self.stderr = (self.stderr + chunk)[-STDERR_BYTES:]

    def settimeout(self, seconds):
        self._timeout = seconds

    def gettimeout(self):
        return self._timeout

    def recv_ready(self):
        return bool(select.select([self._out], [], [], 0)[0])

    def _wait(self, readable):
        fds = ([self._out], []) if readable else ([], [self._in])
        ready = select.select(fds[0], fds[1], [], self._timeout)
        if not (ready[0] or ready[1]):
            raise socket.timeout("timed out")

    def send(self, data):
        if self._closed:
            raise EOFError("the sftp connection is closed")
        while True:
            self._wait(readable=False)
            try:
                return os.write(self._in, data[:CHUNK])
            except BlockingIOError:
                continue  # writable by select's measure, not for this much: wait again
            except BrokenPipeError:
                raise EOFError("ssh ended the sftp session") from None

    def recv(self, n):
        if self._closed:
            return b""
        self._wait(readable=True)
        return os.read(self._out, n)

    @property
    def closed(self):
        return self._closed or self._proc.poll() is not None

    def get_transport(self):
        return self

    def get_name(self):
        return "ssh -s sftp"

    def is_active(self):
        return not self.closed

    def close(self):
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def open_sftp(ssh_argv):
    """A paramiko SFTPClient over `ssh ... -s HOST sftp` (ssh_argv ends with the host)."""
    import paramiko

    chan = PipeChannel(ssh_argv[:-1] + ["-s", ssh_argv[-1], "sftp"])
    try:
        return paramiko.SFTPClient(chan)
    except (EOFError, OSError, paramiko.SSHException) as e:
        chan.close()
        why = chan.stderr.decode("utf-8", "replace").strip().splitlines()
        raise EOFError(f"the sftp session did not start: {why[-1] if why else e}") from None
