"""The scan's readers: how candidate lines are found and the log is read in chunks.

      - python: one literal-prefix regex per first character (matcher.CHUNK_RXS) over each chunk;
      - grep:   `grep -aobE` over the file, started beside the scan (several times faster on big
                logs; used for files of GREP_MIN_BYTES or more when grep is on PATH).
Each candidate line is re-read with every signature by the Scanner, so both readers give the same
facts. Chunks are cut at line ends, so memory stays bounded whatever the log's size (a line longer
than MAX_LINE_BYTES is cut for scanning). grep holds a whole line in memory, so it runs under an
address-space cap (GREP_AS_BYTES): a log with one 2 GB line makes it fail with "memory exhausted",
and the scan starts over with the python reader instead of growing with the line.
"""

import os
import resource
import shutil
import subprocess

from .matcher import CHUNK_RXS, grep_patterns
from .scan import STEP_WINDOW_BYTES, Scanner

CHUNK_BYTES = 8 << 20
MAX_LINE_BYTES = 16 << 20
GREP_MIN_BYTES = 1 << 20
GREP_AS_BYTES = 128 << 20   # grep with these patterns runs in under 16 MiB on ordinary logs


def _python_candidates(chunk, offset):
    found = []
    for rx in CHUNK_RXS:
        found.extend(m.start() for m in rx.finditer(chunk))
    found.sort()
    return found


def _chunks(read):
    """(chunk, offset) pieces of the stream, cut after a newline (or at MAX_LINE_BYTES)."""
    carry = b""
    offset = 0
    while True:
        block = read(CHUNK_BYTES)
        if not block:
            break
        data = carry + block if carry else block
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if len(data) < MAX_LINE_BYTES:
                carry = data
                continue
            cut = len(data)
        chunk, carry = data[:cut], data[cut:]
        yield chunk, offset
        offset += len(chunk)
    if carry:
        yield carry, offset


def _run(scanner, read, candidates):
    truncated = False
    for chunk, offset in _chunks(read):
        truncated = not chunk.endswith(b"\n")
        scanner.feed(chunk, candidates(chunk, offset))
    return truncated


class _GrepUnusable(Exception):
    pass


class _GrepFeed:
    """Match offsets from a running grep -aob, handed out chunk by chunk (in order)."""

    def __init__(self, stream, limit):
        self.stream = stream
        self.limit = limit
        self.pending = None
        self.eof = False

    def _next(self):
        if self.pending is not None:
            value, self.pending = self.pending, None
            return value
        line = self.stream.readline()
        if not line:
            self.eof = True
            return None
        colon = line.find(b":")
        if colon <= 0 or not line[:colon].isdigit():
            raise _GrepUnusable(f"unexpected grep output: {line[:80]!r}")
        return int(line[:colon])

    def take(self, chunk, offset):
        end = min(offset + len(chunk), self.limit)
        out = []
        while True:
            value = self._next()
            if value is None:
                return out
            if value >= end:
                self.pending = value
                return out
            if value >= offset:
                out.append(value - offset)


def _reader(fh, size):
    """read(n) over the first `size` bytes of fh: a log that grows meanwhile is read as it was."""
    remaining = [size]

    def read(n):
        n = min(n, remaining[0])
        data = fh.read(n) if n > 0 else b""
        remaining[0] -= len(data)
        return data

    return read


def _cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (GREP_AS_BYTES, GREP_AS_BYTES))


def _scan_grep(fh, path, size):
    argv = ["grep", "-a", "-o", "-b", "-E"]
    for pattern in grep_patterns():
        argv += ["-e", pattern]
    argv += ["--", path]
    env = {"LC_ALL": "C", "PATH": os.environ.get("PATH", os.defpath)}
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env, preexec_fn=_cap_memory)
    except OSError as e:
        raise _GrepUnusable(str(e)) from None
    feed = _GrepFeed(proc.stdout, size)
    scanner = Scanner()
    scanner.f.engine = "grep"
    try:
        truncated = _run(scanner, _reader(fh, size), feed.take)
    finally:
        if not feed.eof and proc.poll() is None:
            proc.kill()  # the file grew past the size we read: the rest is not ours to scan
        proc.stdout.close()
        rc = proc.wait()
    if feed.eof and rc not in (0, 1):
        raise _GrepUnusable(f"grep exited {rc}")
    return scanner.finish(truncated)


def _scan_python(fh, size):
    scanner = Scanner()
    return scanner.finish(_run(scanner, _reader(fh, size), _python_candidates))


def scan_file(path, engine=None):
    """Facts of the log at `path` (as it is now; bytes appended meanwhile are left out).

    engine: 'auto' (grep for big files when available), 'grep' or 'python'; the environment
    variable GPUOPS_TRIAGE_ENGINE sets the default.
    """
    engine = (engine or os.environ.get("GPUOPS_TRIAGE_ENGINE") or "auto").lower()
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        want_grep = engine == "grep" or (engine == "auto" and size >= GREP_MIN_BYTES)
        if want_grep and shutil.which("grep"):
            try:
                return _scan_grep(fh, path, size)
            except _GrepUnusable:
                fh.seek(0)
        return _scan_python(fh, size)


def scan_bytes(data):
    """Facts of a log held in memory."""
    return scan_pieces([(1, data)])


def scan_pieces(pieces):
    """Facts of a log known only in pieces: [(line number of the piece's first line, bytes)].

    Each piece must start at a line start; the line numbers let evidence point into the real
    file even when only its head and its tail were read.
    """
    scanner = Scanner()
    truncated = False
    for first_line, data in pieces:
        scanner.begin_piece(first_line, data[:STEP_WINDOW_BYTES])
        view = memoryview(data)
        pos = [0]

        def read(n, view=view, pos=pos):
            out = bytes(view[pos[0]:pos[0] + n])
            pos[0] += len(out)
            return out

        truncated = _run(scanner, read, _python_candidates)
    return scanner.finish(truncated)
