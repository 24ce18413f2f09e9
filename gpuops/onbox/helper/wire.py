"""The resident helper's wire format, one home for both ends: the helper on the box
(gpuops.onbox.helper.resident) and the caller here (gpuops.remote.resident).

After HELLO and the request, everything is frames: one type byte, a 4-byte big-endian length,
the payload, at most FRAME_MAX bytes. Caller to helper: STDIN, and an empty STDIN_END. Helper to
caller: STDOUT, STDERR, and last STATUS (a 4-byte signed exit status).
"""

import struct

# The protocol's version is in the greeting: a helper armed by an older gpuops (which would ignore a
# request's "site") does not greet as this one, so nothing is sent to it and the call goes over an
# exec channel while a current helper is armed.
HELLO = b"gpuops-resident 2\n"
# A deadline is kept as coreutils `timeout -k KILL_AFTER_S` keeps it: SIGTERM, then SIGKILL this
# much later (STATUS 124, or 137 when SIGKILL was needed). The same on an exec channel
# (gpuops.remote.wrap) and on the helper.
KILL_AFTER_S = 5
FRAME_MAX = 64 << 10
HEAD = 5
STDIN, STDIN_END, STDOUT, STDERR, STATUS = b"i", b"I", b"o", b"e", b"x"
_LENGTH = struct.Struct(">I")
_STATUS = struct.Struct(">i")


def frame(kind, payload):
    return kind + _LENGTH.pack(len(payload)) + payload


def status(code):
    return frame(STATUS, _STATUS.pack(code))


def head(data):
    """(type byte, payload length) of the frame whose HEAD bytes start `data`."""
    return data[:1], _LENGTH.unpack(data[1:HEAD])[0]


def code_of(payload):
    """The exit status a STATUS frame carries; None when it is not one."""
    return _STATUS.unpack(payload)[0] if len(payload) == _STATUS.size else None


class Input(object):
    """The caller's frames, as they arrive: stdin to hand the worker, and whether it has ended."""

    def __init__(self, data) -> None:
        self.buf, self.pending, self.ended = data, b"", False

    def take(self, chunk) -> bool:
        """False when the frames are not the caller's (the caller is then treated as gone)."""
        self.buf += chunk
        while len(self.buf) >= HEAD:
            kind, size = head(self.buf)
            if kind not in (STDIN, STDIN_END) or size > FRAME_MAX or self.ended:
                return False
            end = HEAD + size
            if len(self.buf) < end:
                break
            self.pending += self.buf[HEAD:end]
            self.buf = self.buf[end:]
            self.ended = kind == STDIN_END
        return True
