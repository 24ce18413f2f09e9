"""This machine as a target: the same sh line, deadline and answer as a remote box."""

import os

from .base import Target


class _Process:
    def __init__(self, command) -> None:
        import subprocess  # imported by the first local command, not by every remote call's imports

        self._proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, start_new_session=True)
        self.stdin, self.stdout, self.stderr = self._proc.stdin, self._proc.stdout, self._proc.stderr

    def kill(self) -> None:
        import signal  # an enum module: ~2 ms that a remote call, which imports this module too, need not pay

        try:
            os.killpg(self._proc.pid, signal.SIGKILL)  # the whole command, not just its sh
        except OSError:
            pass

    def wait(self):
        return self._proc.wait()


class LocalTarget(Target):
    name = "local"
    is_local = True

    def _spawn(self, command):
        return _Process(command)
