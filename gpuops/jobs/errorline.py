"""The line of a short log that says why a job died: what a person needs instead of "started"
when a launch fails at once (`pythn: command not found`, `No module named 'torch'`)."""

import re

TRACEBACK = "Traceback (most recent call last):"
# What bash or sh puts before its own complaint about the job's command file.
_SHELL_PREFIX = re.compile(r"^(?:\S*/cmd|bash|sh): (?:line )?\d+: ")
_ERRORISH = re.compile(r"error|not found|no such file|denied|cannot|can't|fatal|exception|invalid|unknown|"
                       r"unrecognized|missing|killed", re.I)
MAX_CHARS = 300


def first_error(text: str):
    """The line of `text` that says why: after a Python traceback's first line, the first line
    that is not indented (the exception, named); else the first line that reads as an error
    (error, not found, denied ...) without the shell's prefix; else the last line. None for an
    empty log."""
    raw = [line.rstrip() for line in text.splitlines() if line.strip()]
    if TRACEBACK in raw:
        named = next((line for line in raw[raw.index(TRACEBACK) + 1:] if not line[:1].isspace()), None)
        if named:
            return named[:MAX_CHARS]
    lines = [_SHELL_PREFIX.sub("", line.strip()) for line in raw]
    if not lines:
        return None
    return next((line for line in lines if _ERRORISH.search(line)), lines[-1])[:MAX_CHARS]
