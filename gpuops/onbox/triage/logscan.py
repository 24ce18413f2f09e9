"""Reading a job log on the box: tail offsets, training-progress lines, and when a line was written.

Progress is judged from step lines, never from the log's mtime: a hung run can keep printing
warnings while no step advances. Which lines are steps is the progress policy's (gpuops.onbox.triage.steps),
read with the line's escape sequences removed (gpuops.onbox.triage.escapes: a coloured `step 5` is a step
line) and a backspace taken for the redraw it is; the offsets stay the log's own.

The time a line was written comes from the supervisor's `growth` samples ("epoch size" lines):
the first sample whose size covers the line's end offset is an upper bound on its write time.

Stream frames (logs/follow): one type byte, a 4-byte big-endian length, the payload.
H = header JSON, D = log bytes, K = keepalive (empty), E = end JSON.
"""

import json
import os
import re
import struct

from . import escapes, steps
from typing import Sequence

HEAD_BYTES = 256 << 10
_LINE_END = re.compile(br"[\r\n]")


def read_range(path, start, length: int):
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(length)
    except (OSError, IOError):
        return b""


def size_of(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def tail_offset(path, lines, window=1 << 20):
    """Byte offset where the last `lines` lines of the file begin (bounded look-back)."""
    size = size_of(path) or 0
    if lines <= 0 or size == 0:
        return size
    start = max(0, size - window)
    data = read_range(path, start, size - start)
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    count = 0
    pos = end
    while pos > 0:
        pos = data.rfind(b"\n", 0, pos)
        if pos < 0:
            break
        count += 1
        if count == lines:
            return start + pos + 1
    return start


def form(data, patterns, user=False):
    """The forms that count in this log: a user pattern (the first one, when `user`), and of the
    default forms only the first that occurs at all (steps.pick). A log that prints MaxText's step
    lines is judged by them alone, so its noise (`iteration 1234` in a busy-wait warning) never
    passes for progress."""
    head, defaults = (patterns[:1], patterns[1:]) if user else ([], patterns)
    return head + [steps.pick(escapes.plain(data), defaults) or defaults[0]] if defaults else head


def progress(path, patterns, window, keep=8, user=False):
    """Up to `keep` most recent progress lines: [{end, step, seconds, text}], oldest first."""
    size = size_of(path) or 0
    start = max(0, size - window)
    data = read_range(path, start, size - start)
    if start > 0:
        cut = _LINE_END.search(data)
        if not cut:
            return []
        data, start = data[cut.end():], start + cut.end()
    patterns = form(data, patterns, user)
    found = []
    end = len(data)
    while end > 0 and len(found) < keep:
        m = None
        begin = max(data.rfind(b"\n", 0, end), data.rfind(b"\r", 0, end), data.rfind(b"\x08", 0, end)) + 1
        line = escapes.plain(data[begin:end])
        for pat in patterns:
            m = pat.search(line)
            if m:
                break
        if m:
            found.append(_event(m, line, start + end))
        end = begin - 1
    found.reverse()
    return found


def _event(step, line, end):
    return {
        "end": end,
        "step": step.step,
        "seconds": step.seconds,
        "text": line.decode("utf-8", "replace").strip()[:200],
    }


def first_step(path, patterns, head=HEAD_BYTES, user=False):
    """The step number of the first progress line in the log's head, or None (warm-up is counted
    from it)."""
    data = read_range(path, 0, head)
    patterns = form(data, patterns, user)
    for line in _LINE_END.split(escapes.plain(data)):
        for pat in patterns:
            m = pat.search(line)
            if m:
                return m.step
    return None


def growth_samples(path, tail_bytes=65536, cap=32 << 20):
    """[(epoch, size)] from a growth file: its tail, or all of it (bounded) when asked."""
    size = size_of(path)
    if not size:
        return []
    start = max(0, size - min(tail_bytes, cap))
    data = read_range(path, start, size - start)
    if start > 0:
        data = data[data.find(b"\n") + 1:]
    out = []
    for line in data.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out.append((float(parts[0]), int(parts[1])))
            except ValueError:
                pass
    return out


def written_at(growth_path, offsets: Sequence[int]):
    """{offset: epoch or None}: when the log first reached each byte offset."""
    samples = growth_samples(growth_path)
    if samples and offsets and min(offsets) <= samples[0][1] and (size_of(growth_path) or 0) > 65536:
        samples = growth_samples(growth_path, tail_bytes=1 << 40)
    out = {}
    for off in offsets:
        out[off] = next((t for t, s in samples if s >= off), None)
    return out


def frame(kind, payload=b""):
    if isinstance(payload, dict):
        payload = json.dumps(payload).encode("utf-8")
    return kind + struct.pack(">I", len(payload)) + payload
