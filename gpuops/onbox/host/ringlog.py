"""A JSON-lines file with a ceiling: records are appended, and once the file would pass its byte or
row limit the oldest records are dropped.

A run's telemetry and its events live in the job directory for as long as the run lasts, which can
be weeks: a file that only grows fills the very disk the checkpoints need (U6). Records are
compact JSON with every non-ASCII and control character escaped, so a line is one line whatever a
box-supplied string holds.

An append is one write(2) on an O_APPEND descriptor, so a reader sees whole records, except the
last one when the writer died mid-write: readers skip a line that does not parse, and the next
writer cuts it off before appending (glued to a torn line its first record would be lost too).
Dropping the oldest rewrites the newest KEEP share of the limits to a temporary file renamed into
place (jobrecord.atomic_write), so a reader sees the old file or the new one, and the rewrite
costs a constant share of the appends. One writer per file: the job's supervisor.
"""

import json
import os

from . import jobrecord

KEEP = 0.75      # what a rewrite keeps of the limits: the next rewrite is a quarter of them away
TAIL_READ = 64 << 10


def encode(record):
    """The record as one line of bytes."""
    return (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode("ascii")


def _parsed(lines):
    out = []
    for line in lines:
        try:
            record = json.loads(line.decode("utf-8"))
        except ValueError:
            continue  # a torn line left by a writer that died mid-write
        if isinstance(record, dict):
            out.append(record)
    return out


def tail_bytes(path, limit: int):
    """The file's last `limit` bytes, starting at a line's start (b"" when it is missing), and
    whether they end in a newline: the end of a log or a ring, read without reading it all."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - limit))
            data = f.read(limit)
    except (OSError, IOError):
        return b"", True
    if size > limit:
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    return data, data.endswith(b"\n") or not data


def read(path, max_bytes=None):
    """Every whole record in the file (its last `max_bytes` when given), oldest first."""
    if max_bytes is None:
        try:
            max_bytes = os.stat(path).st_size
        except OSError:
            return []
    data, _ = tail_bytes(path, max(1, max_bytes))
    return _parsed(data.split(b"\n"))


def last(path):
    """The newest whole record, or None: read from the end, so cheap on a full file."""
    limit = TAIL_READ
    while True:
        data, _ = tail_bytes(path, limit)
        found = _parsed(data.split(b"\n"))
        if found:
            return found[-1]
        try:
            if limit >= os.stat(path).st_size:
                return None
        except OSError:
            return None
        limit *= 4


class Ring(object):
    """Appends records to `path`, keeping it under max_bytes and max_rows."""

    def __init__(self, path, max_bytes=1 << 20, max_rows=10000) -> None:
        if max_bytes < 1024 or max_rows < 4:
            raise ValueError("a ring needs at least 1 KiB and 4 rows")
        self.path, self.max_bytes, self.max_rows = path, int(max_bytes), int(max_rows)
        self.max_line = self.max_bytes // 4
        self._size = self._rows = None
        self.dropped = 0  # records dropped by this writer, for a caller that reports it

    def _load(self) -> None:
        data, whole = tail_bytes(self.path, self.max_bytes)
        try:
            size = os.stat(self.path).st_size
        except OSError:
            size = 0
        lines = [l for l in data.split(b"\n") if l]
        if not whole or size > len(data):
            # A torn last line, or a file larger than this writer's limit: start from a clean copy.
            keep = lines[:-1] if not whole else lines
            self._rewrite(keep[-self.max_rows:])
        else:
            self._size, self._rows = size, len(lines)

    def _rewrite(self, lines) -> None:
        body = b"".join(l + b"\n" for l in lines)
        jobrecord.atomic_write(self.path, body)
        self._size, self._rows = len(body), len(lines)

    def _compact(self, incoming) -> None:
        data, _ = tail_bytes(self.path, self.max_bytes)
        lines = [l for l in data.split(b"\n") if l]
        budget, rows = int(self.max_bytes * KEEP) - incoming, int(self.max_rows * KEEP) - 1
        kept, used = [], 0
        for line in reversed(lines):
            if len(kept) >= rows or used + len(line) + 1 > budget:
                break
            kept.append(line)
            used += len(line) + 1
        self.dropped += len(lines) - len(kept)
        self._rewrite(list(reversed(kept)))

    def append(self, record):
        """Append one record. OSError when the disk refuses it (a full disk is one of the things a
        run's supervisor must report, not die of: callers catch it); ValueError when its line
        alone is over a quarter of max_bytes (a caller's bug: records are bounded before here)."""
        line = encode(record)
        if len(line) > self.max_line:
            raise ValueError("a %d-byte record is over this ring's %d-byte line limit" % (len(line), self.max_line))
        if self._size is None:
            self._load()
        if self._size + len(line) > self.max_bytes or self._rows + 1 > self.max_rows:
            self._compact(len(line))
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            written = os.write(fd, line)
        except OSError:
            self._size = None  # a full disk may have taken part of it: the next append looks again
            raise
        finally:
            os.close(fd)
        if written != len(line):
            self._size = None
            raise OSError("only %d of a %d-byte record was written to %s" % (written, len(line), self.path))
        self._size += len(line)
        self._rows += 1
        return record
