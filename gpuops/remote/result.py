"""What one remote (or local) command returned."""

from ..boundary import answer
from ..errors import GpuopsError, PythonMissing, TimedOut
from .wrap import NO_PYTHON_MARK


class Result:
    """stdout and stderr as bytes, and the exit status. A plain class (base strips the interpreter
    mark from stderr in place): dataclasses would cost every call its import (see hostspec)."""

    __slots__ = ("stdout", "stderr", "exit")

    def __init__(self, stdout: bytes, stderr: bytes, exit: int) -> None:
        self.stdout, self.stderr, self.exit = stdout, stderr, exit

    def __repr__(self) -> str:
        return f"Result(stdout={self.stdout!r}, stderr={self.stderr!r}, exit={self.exit!r})"

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def check_onbox(result: Result, host: str, timeout_s) -> dict:
    """Turn the result of a shipped onbox script into its JSON document, or a typed error.

    Nothing printed at all is gpuops' own code failing on the box (exit 70, its last stderr
    line); something printed that is not one JSON object is not gpuops's answer (BadAnswer, exit
    3, its first bytes quoted): a broken or hostile python3 on the box, never a crash here."""
    if result.exit == 127 and NO_PYTHON_MARK in result.err_text:
        raise PythonMissing(f"{host}: python3 is not on the remote PATH (the on-box code needs python3 >= 3.6)")
    if result.exit in (124, 137) and timeout_s:
        raise TimedOut(f"{host}: the remote command ran past {timeout_s:g}s and was killed on the box")
    if not result.stdout.strip():
        tail = result.err_text.strip().splitlines()[-1:] or [f"exit {result.exit}, no output"]
        raise GpuopsError(f"{host}: on-box code failed: {tail[0][:300]}")
    return answer(result.stdout, host)
