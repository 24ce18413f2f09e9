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
    tail (from its first line start). The step lines keep the projection right when the first step is past the head (long
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
        # Only lines that start before the tail count: data[:bound] holds them.
        lim = tail_start - start
        bound = 0 if lim <= 0 else (data.find(b"\n", lim - 1, cut) + 1 or cut)
        lines, after = [], 0
        at = data.find(steps.STEP_LITERAL, 0, bound) if first_step is None else -1
        if at >= 0:
            lines.append(_line(data, at, cut))
            after = lines[0][1]
        # A chunk may hold millions of step lines and only the last STEP_LINES are kept: they are
        # searched for from its end, and the lines before them only counted.
        last, end = [], bound
        while len(last) < STEP_LINES:
            at = data.rfind(steps.STEP_LITERAL, after, end)
            if at < 0:
                break
            last.append(_line(data, at, cut))
            end = last[-1][0]
        lines += reversed(last)
        counted, line_no, numbered = 0, newlines, []
        for ls, _, text in lines:
            line_no += data.count(b"\n", counted, ls)
            counted = ls
            numbered.append((line_no + 1, text))
        if after:
            first_step = numbered.pop(0)
        recent.extend(numbered)
        newlines += data.count(b"\n", 0, cut)
        carry = data[cut:]
    # The tail starts at the first line start at or after tail_start (the byte before tells).
    f.seek(tail_start - 1)
    rest = f.read(tail + 1)
    pieces = [(1, first)] + ([first_step] if first_step else []) + list(recent)
    cut = rest.find(b"\n") + 1
    if cut:
        pieces.append((newlines - rest.count(b"\n", cut) + 1, rest[cut:]))
    return pieces, newlines


def _line(data, at, cut):
    """(where the line holding data[at] starts, where it ends, its first _STEP_LINE_MAX bytes and
    a newline)"""
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at, cut)
    end = cut if end < 0 else end
    return start, end, data[start:min(end, start + _STEP_LINE_MAX)] + b"\n"
