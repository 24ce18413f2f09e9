"""Copying one range of a big file over a lane, and putting a file's ranges back together.

A range goes to its own part file beside the file it becomes (stripes.Range.part_name), written
in order, so the part's size says how much of the range has arrived: a range cut off resumes from
there, and a part longer than its range (not gpuops's) starts over. The receiving end tells the
sender where to go on from before any data moves (push: the box prints the part's size; pull:
the part is here). When every range of a file is in, each part's size is checked, the parts are
joined in order under the file's partial name (.NAME.gpuops-part, as the SFTP engine's), given
the source's mode and mtime, and renamed over the final name in one step; only then are the
parts removed. Whether the bytes are right is not taken on trust here either: the file is hashed
on both ends afterwards like every other (gpuops.ops.sync.verify_and_repair).

No write leaves the destination's root: on the box a symlink on the way to a range's part is
replaced by a directory, as rsync's receiver does, never followed; here every write goes through
gpuops.contained. Something else in the way (a file where the source has a directory) is exit 3,
and the engine sends that file whole, over one stream, once the lanes are done.
"""

import os
import posixpath
import subprocess
import threading
import time

from .. import contained
from ..remote import wrap
from .rsync import FULL_MARKS

CHUNK = 1 << 20
SETUP = 3       # the box refused the way to the file (a symlink where a directory must be)
SHORT = 4       # a part is not yet its range's size (the stream was cut)
MARK = "gpuops-range"  # the first line a range's command prints (a login rc may print some before)
RC_LINES = 100
JOIN_TIMEOUT_S = 600  # joining reads and writes the file once on the box


class RangeFailed(Exception):
    """kind: "retry" (the stream broke or stalled), "disk-full", "setup" (something not a directory
    on the way to the file), or "fatal"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _b(rel: str) -> bytes:
    return rel.encode("utf-8", "surrogateescape")


def _q(raw: bytes) -> str:
    return wrap.quote(raw.decode("utf-8", "surrogateescape"))


def _way_in(root: str, rel: str, make: bool) -> str:
    """sh that enters the directory holding `rel` under `root`, never through a symlink. With
    `make` (the receiving end), missing directories are made and a symlink on the way, where the
    source has a directory, is replaced by one (the link itself goes, never what it points at),
    as rsync's receiver does; anything else in the way is exit SETUP. Without, a symlink on the
    way is exit SETUP."""
    head = posixpath.dirname(_b(rel))
    parts = head.split(b"/") if head else []
    steps = [b"/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    line = (f"{{ cd -- {wrap.quote(root)} 2>/dev/null || {{ mkdir -p -- {wrap.quote(root)} && "
            f"cd -- {wrap.quote(root)}; }}; }} || exit {SETUP}; " if make else
            f"cd -- {wrap.quote(root)} || exit {SETUP}; ")
    for step in map(_q, steps):
        if make:  # another lane may make the same directory meanwhile: then it is there
            line += (f"{{ [ ! -L {step} ] || rm -f -- {step}; }} && "
                     f"{{ [ -d {step} ] || mkdir -- {step} 2>/dev/null || [ -d {step} ]; }} || exit {SETUP}; ")
        else:
            line += f"[ ! -L {step} ] || exit {SETUP}; "
    if head:
        line += f"cd -- {_q(head)} || exit {SETUP}; "
    return line


def push_line(root: str, piece) -> str:
    name = posixpath.basename(_b(piece.rel))
    part = _q(piece.part_name(name))
    return (_way_in(root, piece.rel, make=True)
            + f"f={part}; [ ! -L \"$f\" ] || exit {SETUP}; [ -f \"$f\" ] || : > \"$f\" || exit {SETUP}; "
            f"n=$(( $(wc -c < \"$f\") )); [ \"$n\" -le {piece.size} ] || {{ : > \"$f\"; n=0; }}; echo \"{MARK} $n\"; "
            f"head -c $(({piece.size} - n)) >> \"$f\" || exit 1; "
            f"[ \"$(( $(wc -c < \"$f\") ))\" -eq {piece.size} ] || exit {SHORT}")


def pull_line(root: str, piece, have: int) -> str:
    name = _q(posixpath.basename(_b(piece.rel)))
    return (_way_in(root, piece.rel, make=False) + f"[ -f {name} ] && [ ! -L {name} ] || exit {SETUP}; "
            f"echo {MARK}; tail -c +{piece.start + have + 1} -- {name} | head -c {piece.size - have}")


def _after_mark(stream):
    """What follows MARK on its line (b"" when nothing), skipping what a login rc printed before
    it; None when the stream ended first."""
    for _ in range(RC_LINES):
        line = stream.readline()
        if not line:
            return None
        if line.startswith(MARK.encode()):
            return line[len(MARK):].strip()
    return None


class _Watch:
    """Kills `proc` when no byte moved for `stall_s` (a frozen link: ssh's keepalives take most of
    a minute, and a blocked write never returns)."""

    def __init__(self, proc, stall_s) -> None:
        self.proc, self.stall_s = proc, stall_s
        self.last = time.monotonic()
        self.stalled = False
        self._done = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def moved(self) -> None:
        self.last = time.monotonic()

    def _run(self) -> None:
        while not self._done.wait(0.25):
            if time.monotonic() - self.last > self.stall_s and self.proc.poll() is None:
                self.stalled = True
                self.proc.kill()
                return

    def stop(self) -> None:
        self._done.set()


def _verdict(code: int, stderr: bytes, stalled: bool, what: str):
    """Raise RangeFailed for a copy that did not end well."""
    text = stderr.decode("utf-8", "replace").strip()
    last = text.splitlines()[-1][:300] if text else ""
    if stalled:
        raise RangeFailed("retry", f"{what}: nothing moved within the I/O timeout (the link stalled)")
    if any(m in text for m in FULL_MARKS):
        raise RangeFailed("disk-full", f"{what}: {last}")
    if code == SETUP:
        raise RangeFailed("setup", f"{what}: the way to it is not a plain directory")
    raise RangeFailed("retry", f"{what}: the stream ended early (exit {code}{': ' + last if last else ''})")


def push(lane, local_root: str, remote_root: str, piece, on_bytes, stall_s: float) -> tuple:
    """Send one range to the box; (bytes sent, bytes the box had already)."""
    path = os.path.join(os.fsencode(local_root), _b(piece.rel))
    proc = lane.popen(push_line(remote_root, piece))
    watch = _Watch(proc, stall_s)
    sent = have = 0
    try:
        first = _after_mark(proc.stdout)
        watch.moved()
        if first is not None and first.strip().isdigit():
            have = int(first)
            with open(path, "rb") as f:
                f.seek(piece.start + have)
                left = piece.size - have
                while left > 0:
                    data = f.read(min(CHUNK, left))
                    if not data:
                        raise RangeFailed("fatal", f"{piece.rel}: the file got shorter while it was sent")
                    proc.stdin.write(data)
                    watch.moved()
                    sent += len(data)
                    left -= len(data)
                    on_bytes(len(data))
    except FileNotFoundError as e:
        raise RangeFailed("fatal", f"{piece.rel}: {e.strerror}") from None
    except OSError:  # the stream broke: the exit status says how
        pass
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
        code = proc.wait()
        watch.stop()
    if code != 0:
        _verdict(code, proc.stderr.read(), watch.stalled, piece.rel)
    return sent, have


def pull(lane, local_root: str, remote_root: str, piece, on_bytes, stall_s: float) -> tuple:
    """Fetch one range into its part file here; (bytes received, bytes it already held)."""
    with contained.Root(local_root).parent(piece.rel) as (d, name):
        part = piece.part_name(os.fsencode(name))
        fd = d.open(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        have = os.fstat(fd).st_size
        if have > piece.size:
            os.ftruncate(fd, 0)
            have = 0
        proc = lane.popen(pull_line(remote_root, piece, have))
        proc.stdin.close()
        watch = _Watch(proc, stall_s)
        got = 0
        try:
            marked = _after_mark(proc.stdout) is not None
            while marked:
                data = proc.stdout.read1(CHUNK)
                if not data:
                    break
                data = data[:piece.size - have - got]  # never more than the range, whatever the box sends
                os.write(fd, data)
                watch.moved()
                got += len(data)
                on_bytes(len(data))
        finally:
            code = proc.wait()
            watch.stop()
    finally:
        os.close(fd)
    if code != 0 or have + got != piece.size:
        _verdict(code if code else SHORT, proc.stderr.read(), watch.stalled, piece.rel)
    return got, have


def join_remote(lane, remote_root: str, rel: str, pieces, mode: int, mtime: float) -> None:
    """Join a pushed file's parts on the box, give it `mode` and `mtime`, rename it into place."""
    name = posixpath.basename(_b(rel))
    parts = " ".join(_q(p.part_name(name)) for p in pieces)
    checks = "".join(f"[ \"$(( $(wc -c < {_q(p.part_name(name))}) ))\" -eq {p.size} ] || exit {SHORT}; "
                     for p in pieces)
    temp = _q(b".%s.gpuops-part" % name)
    line = (_way_in(remote_root, rel, make=False) + checks
            + f"cat -- {parts} > {temp} && chmod {mode & 0o7777:o} {temp} && "
              f"touch -m -d @{mtime:.9f} -- {temp} && mv -fT -- {temp} {_q(name)} && rm -f -- {parts}")
    _ask(lane, line, rel)


def _ask(lane, line: str, rel: str) -> bytes:
    """What `line` printed on the box; RangeFailed when it failed or took over JOIN_TIMEOUT_S."""
    proc = lane.popen(line)
    try:
        out, err = proc.communicate(timeout=JOIN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RangeFailed("retry", f"{rel}: no answer within {JOIN_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        _verdict(proc.returncode, err, False, rel)
    return out


def join_local(lane, local_root: str, remote_root: str, rel: str, pieces):
    """Join a pulled file's parts here with the box's mode and mtime, rename it into place."""
    out = _ask(lane, _way_in(remote_root, rel, make=False) + f"stat -c '%a %Y' -- {_q(posixpath.basename(_b(rel)))}",
               rel)
    try:
        mode_text, mtime_text = out.split()
        mode, mtime = int(mode_text, 8) & 0o7777, int(mtime_text)
    except ValueError:
        raise RangeFailed("fatal", f"{rel}: the box's stat said {out[:80]!r}") from None
    with contained.Root(local_root).parent(rel) as (d, name):
        name = os.fsencode(name)
        for p in pieces:
            st = d.lstat(p.part_name(name))
            if st is None or st.st_size != p.size:
                raise RangeFailed("retry", f"{rel}: a range is incomplete")
        temp = b".%s.gpuops-part" % name
        out_fd = d.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for p in pieces:
                in_fd = d.open(p.part_name(name), os.O_RDONLY)
                try:
                    left = p.size
                    while left > 0:
                        moved = os.copy_file_range(in_fd, out_fd, left) if hasattr(os, "copy_file_range") \
                            else os.write(out_fd, os.read(in_fd, min(CHUNK, left)))
                        if moved <= 0:
                            raise RangeFailed("retry", f"{rel}: a range got shorter while it was joined")
                        left -= moved
                finally:
                    os.close(in_fd)
            os.fchmod(out_fd, mode)
            os.utime(out_fd, (mtime, mtime))
        finally:
            os.close(out_fd)
        d.replace(temp, name)
        for p in pieces:
            d.unlink(p.part_name(name))
