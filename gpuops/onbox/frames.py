"""The resident helper's wire format, one home for both ends: the helper on the box
(gpuops.onbox.resident) and the caller here (gpuops.remote.resident).

After HELLO and the request, everything is frames: one type byte, a 4-byte big-endian length,
the payload, at most FRAME_MAX bytes. Caller to helper: STDIN, and an empty STDIN_END. Helper to
caller: STDOUT, STDERR, and last STATUS (a 4-byte signed exit status).
"""

import struct

HELLO = b"gpuops-resident 1\n"
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
