"""The closed set of exit codes and the errors that map onto them.

Every verb, the CLI and any agent adapter share these codes, so a caller can branch on the
number alone: 0 nothing failed, 1 a check failed, 2 usage/config, 3 the host could not be
used, 4 something named was not found, 5 refused or needs --yes, 6 a wait ran out of time before
what it waited for happened, 70 a bug in gpuops; 130 and 143: stopped by SIGINT or SIGTERM while
waiting (the envelope still says where to resume).
"""

OK = 0
CHECK_FAILED = 1
USAGE = 2
HOST = 3
NOT_FOUND = 4
REFUSED = 5
WAIT_TIMED_OUT = 6
INTERNAL = 70
INTERRUPTED = {"SIGINT": 130, "SIGTERM": 143}


class GpuopsError(Exception):
    """An expected failure: reported as one line, never as a traceback."""

    exit_code = INTERNAL
    kind = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def as_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message}


class UsageError(GpuopsError):
    exit_code = USAGE
    kind = "usage"


class Ambiguous(UsageError):
    """A job named by a name several jobs share: the caller picks one by id."""

    kind = "ambiguous"


class Rejected(UsageError):
    """The scheduler refused the request as given (sbatch's own words, and the option at fault)."""

    kind = "rejected"


class NotFound(GpuopsError):
    exit_code = NOT_FOUND
    kind = "not-found"
    listing: tuple = ()  # the command that lists what is there (a box's jobs), set where the box is known


class UnknownHost(NotFound):
    """The host's name does not resolve (no such alias in the ssh config, no such name in DNS):
    no wait will change that, so it is not a HostError, which a caller retries. `check` is the
    command that shows what ssh makes of the name (set where the name is known)."""

    check = ()


class Refused(GpuopsError):
    exit_code = REFUSED
    kind = "refused"


class Busy(Refused):
    """Another holds what this needs for a while (a transfer writing the same destination): the
    same call again later is the fix, not a change to it."""

    kind = "busy"


class HostError(GpuopsError):
    """The host could not be asked. Never to be read as 'the job is dead'."""

    exit_code = HOST
    kind = "unreachable"


class Unreachable(HostError):
    kind = "unreachable"


class AuthFailed(HostError):
    kind = "auth-failed"
    check = ()  # as UnknownHost's


class HostKeyChanged(HostError):
    kind = "host-key-changed"


class HostKeyRevoked(HostError):
    """known_hosts marks the key the box offered as @revoked: never to be trusted again."""

    kind = "host-key-revoked"


class HostKeyUnverifiable(HostError):
    """known_hosts trusts the box through a certificate authority this transport cannot check."""

    kind = "host-key-unverifiable"


class HostKeyShared(HostError):
    """The box answered under a host key another box of the same fleet or gang answers under: one
    machine under two names, or machines cloned with one image's keys. Counted twice, it would
    run two nodes of a gang or double a fleet's capacity."""

    kind = "host-key-shared"


class TimedOut(HostError):
    kind = "timed-out"


class PythonMissing(HostError):
    kind = "python3-missing"


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived while a verb was waiting on a box. A BaseException, like
    KeyboardInterrupt, so that no `except Exception` on the way swallows it; the verb catches it
    to report how far it got."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class BadAnswer(HostError):
    """The box answered with something that is not gpuops's: too big, not JSON, the wrong shape,
    or a path that would lead out of where it belongs. A box is untrusted input."""

    kind = "bad-answer"


KINDS = {cls.kind: cls for cls in (UsageError, Ambiguous, Rejected, NotFound, Refused, Busy, Unreachable, AuthFailed,
                                   HostKeyChanged, HostKeyRevoked, HostKeyUnverifiable, HostKeyShared, TimedOut,
                                   PythonMissing, BadAnswer)}


def for_kind(kind):
    """The error class of a kind as it appears in an envelope or an on-box error document."""
    return KINDS.get(kind, GpuopsError)


def code_for_kind(kind) -> int:
    return for_kind(kind).exit_code
