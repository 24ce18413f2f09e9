"""Decoder for the framed log stream written by gpuops.onbox.triage.logscan.frame.

A frame is one type byte, a 4-byte big-endian length and the payload. Only complete frames come
out, so the byte count of the D frames delivered is exactly what reached the reader: resuming
from header.start + that count never loses or repeats a byte.
"""

import struct

from ..errors import BadAnswer

HEADER, DATA, KEEPALIVE, END = b"H", b"D", b"K", b"E"
KINDS = (HEADER, DATA, KEEPALIVE, END)
_HEAD = 5
# The box writes data frames of 64 KiB and small JSON frames: anything bigger is not gpuops's,
# and buffering it on this side's trust would let a box fill this machine's memory.
MAX_FRAME = 1 << 20


class FrameReader:
    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk):
        """[(kind, payload)] for every frame completed by `chunk`."""
        self._buf += chunk
        out = []
        while len(self._buf) >= _HEAD:
            (size,) = struct.unpack(">I", bytes(self._buf[1:_HEAD]))
            kind = bytes(self._buf[:1])
            if kind not in KINDS or size > MAX_FRAME:
                raise BadAnswer(f"the log stream is not gpuops's: a {kind!r} frame of {size} bytes")
            if len(self._buf) < _HEAD + size:
                break
            out.append((kind, bytes(self._buf[_HEAD:_HEAD + size])))
            del self._buf[:_HEAD + size]
        return out

    @property
    def pending(self):
        return len(self._buf)
