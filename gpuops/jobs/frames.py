"""Decoder for the framed log stream written by gpuops.onbox.logscan.frame.

A frame is one type byte, a 4-byte big-endian length and the payload. Only complete frames come
out, so the byte count of the D frames delivered is exactly what reached the reader: resuming
from header.start + that count never loses or repeats a byte.
"""

import struct

HEADER, DATA, KEEPALIVE, END = b"H", b"D", b"K", b"E"
_HEAD = 5


class FrameReader:
    def __init__(self):
        self._buf = bytearray()

    def feed(self, chunk):
        """[(kind, payload)] for every frame completed by `chunk`."""
        self._buf += chunk
        out = []
        while len(self._buf) >= _HEAD:
            (size,) = struct.unpack(">I", bytes(self._buf[1:_HEAD]))
            if len(self._buf) < _HEAD + size:
                break
            out.append((bytes(self._buf[:1]), bytes(self._buf[_HEAD:_HEAD + size])))
            del self._buf[:_HEAD + size]
        return out

    @property
    def pending(self):
        return len(self._buf)
