"""A bounded view of a job's log for triage: its head, step lines, and its tail, as pieces.

`triage --job` reads it through job_facts' `excerpt` (one round trip, base64 over the wire), and
the box's own classifier (logclass) reads it in-process: both classify the same bytes, so the
box's verdict on a failed attempt is the one `gpuops triage --job` gives for it afterwards.
"""

import os
from collections import deque

from . import steps

HEAD, TAIL, STEP_LINES = 256 << 10, 4 << 20, 300
_SCAN_CHUNK = 8 << 20
_STEP_LINE_MAX = 4096


def read(path, head=HEAD, tail=TAIL):
    """(size, lines, [(first line number, bytes)]) of the log at `path`: the whole log when small,
    else its head, the first and the last STEP_LINES step lines between head and tail, and its
    tail. The step lines keep the projection right when the first step is past the head (long
    config dumps) or a hung job printed more noise after its last step than the tail holds.
    OSError when it cannot be read."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= head + tail:
            data = f.read(size)
            return size, data.count(b"\n"), [(1, data)]
        pieces, lines = _pieces(f, size, head, tail)
        return size, lines, pieces


def _pieces(f, size, head, tail):
    first = f.read(head)
    first = first[:first.rfind(b"\n") + 1]
    tail_start = size - tail
    newlines = first.count(b"\n")
    first_step, recent = None, deque(maxlen=STEP_LINES)
    pos, carry = len(first), b""
    f.seek(pos)
    while pos < size:
        chunk = f.read(min(_SCAN_CHUNK, size - pos))
        if not chunk:
            break
        data, start = carry + chunk, pos - len(carry)
        pos += len(chunk)
        cut = data.rfind(b"\n") + 1 if pos < size else len(data)
        counted, line_no = 0, newlines
        at = data.find(steps.STEP_LITERAL, 0, cut)
        while at >= 0:
            ls = data.rfind(b"\n", 0, at) + 1
            if start + ls >= tail_start:
                break
            le = data.find(b"\n", at, cut)
            le = cut if le < 0 else le
            line_no += data.count(b"\n", counted, ls)
            counted = ls
            line = (line_no + 1, data[ls:min(le, ls + _STEP_LINE_MAX)] + b"\n")
            if first_step is None:
                first_step = line
            else:
                recent.append(line)
            at = data.find(steps.STEP_LITERAL, le, cut)
        newlines += data.count(b"\n", 0, cut)
        carry = data[cut:]
    f.seek(tail_start)
    rest = f.read(tail)
    pieces = [(1, first)] + ([first_step] if first_step else []) + list(recent)
    cut = rest.find(b"\n") + 1
    if cut:
        pieces.append((newlines - rest.count(b"\n") + 2, rest[cut:]))
    return pieces, newlines
