"""Launch options from flag values: validated here, once, before anything reaches a box."""

import re
import signal

from ..errors import UsageError
from ..onbox.host import gpu_pins

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SLUG = re.compile(r"[^a-z0-9]+")


def pairs(values, flag, env_names=False):
    """{'k': 'v'} from repeated 'k=v' values; the value may itself contain '='."""
    out = {}
    for raw in values or []:
        key, sep, value = str(raw).partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} wants KEY=VALUE, got {raw!r}")
        if env_names and not _ENV_NAME.match(key):
            raise UsageError(f"{flag}: {key!r} is not a valid environment variable name")
        out[key] = value
    return out


def gpus(value):
    """' 0, 1' -> '0,1' (CUDA_VISIBLE_DEVICES); None stays None. Only the syntax is judged here
    (the box judges what it has: gpuops.onbox.host.gpu_pins)."""
    if value is None or value == "":
        return None
    try:
        return ",".join(gpu_pins.parse(value))
    except ValueError as e:
        raise UsageError(f"--gpus {e}") from None


def secrets(names, environ, taken=()):
    """{NAME: value} for --secret-env NAME, values from the LOCAL environment, never echoed."""
    out = {}
    for name in names or []:
        if not _ENV_NAME.match(name):
            raise UsageError(f"--secret-env wants a variable name, got {name!r}")
        if name in taken:
            raise UsageError(f"{name} is given both as --env and as --secret-env")
        if name not in environ:
            raise UsageError(f"--secret-env {name}: {name} is not set in the local environment")
        out[name] = environ[name]
    return out


def check_regex(pattern, flag="--progress-regex"):
    """A regular expression the box will compile, else a usage error naming `flag`."""
    if pattern:
        try:
            re.compile(pattern)
        except re.error as e:
            raise UsageError(f"{flag} is not a valid regular expression: {e}") from None


def slug(text: str, default="queue"):
    s = _SLUG.sub("-", str(text).lower()).strip("-")[:40]
    return s or default


_SHELLS = ("sh", "bash", "dash", "zsh", "ksh")


def script_problem(body: bytes):
    """Why a script would break on the box (CRLF line endings for a shell, U26), or None."""
    if b"\r\n" not in body:
        return None
    first = body.split(b"\n", 1)[0]
    words = first[2:].split() if first.startswith(b"#!") else []
    prog = words[-1] if words and words[0].endswith(b"/env") else (words[0] if words else b"bash")
    if first.endswith(b"\r") or prog.rsplit(b"/", 1)[-1] in [s.encode() for s in _SHELLS]:
        return ("the script has Windows (CRLF) line endings, which break the #! line and shell scripts; "
                "convert it first (dos2unix FILE, or sed -i 's/\\r$//' FILE)")
    return None


def checkpoint_signal(text):
    """('USR1', lead seconds or None) from --signal 'USR1@90', 'SIGTERM' or 'B:USR1@60'."""
    if text is None:
        return None, None
    word, _, lead = str(text).strip().removeprefix("B:").partition("@")
    name = word.upper().removeprefix("SIG")
    # A member of signal.Signals, not any SIG* name the module has: SIG_IGN, SIG_DFL and SIG_BLOCK
    # are handler and mask constants, which the batch script's `trap` then refused.
    if "SIG" + name not in signal.Signals.__members__ or name in ("KILL", "STOP"):
        raise UsageError(f"--signal wants a signal a job can catch, such as USR1 or USR1@120 (sent 120 s "
                         f"before the time limit), not {text!r}")
    if lead and not (lead.isdigit() and 0 < int(lead) <= 65535):
        raise UsageError(f"--signal {text!r}: the lead time after @ is whole seconds from 1 to 65535")
    return name, int(lead) if lead else None
