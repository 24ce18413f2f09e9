"""The SFTP engine, for boxes without rsync: per-file resume, temporary names, atomic rename.

Each file is written to `.<name>.gpuops-part` beside its final name, continuing from whatever
size that partial already has (a dropped connection costs only the bytes in flight), then its
size is checked, its mode and mtime are set, and it is renamed over the final name in one step
(posix-rename@openssh.com upstream, os.replace downstream). So a reader never sees a half-written
file under its final name, even when the destination fills up. A stalled channel raises after
the I/O timeout; a dead connection is reopened with backoff and the transfer goes on from the
file it was in. The part name is fixed, not per transfer, so that a later run resumes what a
killed one left; the destination lock (gpuops.sync.lock) keeps it to one writer at a time.

Names come from the box's manifest (checked in gpuops.sync.plan), and no write may leave its root
through a symlink: downstream every local write goes through gpuops.contained, upstream every
directory below the destination is lstat'ed, and a symlink where the source has a directory is
replaced by a directory, never followed (rsync's receiver does the same on both ends).
"""

import contextlib
import errno
import os
import posixpath
import socket
import stat
import time

from .. import contained
from .outcome import DISK_FULL, PARTIAL, TRANSPORT, Attempt, Outcome
from .rules import PART_SUFFIX

CHUNK = 1 << 20
PREFETCH_REQUESTS = 64
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(Exception):
    pass


class FileProblem(Exception):
    pass


def part_name(path: bytes) -> bytes:
    head, tail = posixpath.split(path)
    return posixpath.join(head, b"." + tail + PART_SUFFIX.encode())


def _b(rel: str) -> bytes:
    return rel.encode("utf-8", "surrogateescape")


class SftpEngine:
    name = "sftp"

    def __init__(self, target, direction, local_root, remote_root, entries, io_timeout=30, backoff=None,
                 progress=None, remote_free=None) -> None:
        self.target = target
        self.direction = direction
        self.local_root = os.fsencode(local_root)
        self.local = contained.Root(local_root)
        self.remote_root = _b(remote_root)
        self.entries = entries
        self.io_timeout = io_timeout
        self.backoff = backoff
        self.progress = progress
        self.remote_free = remote_free  # () -> (free bytes, free inodes) at the remote root
        self._made: set = set()
        self._done_bytes = 0
        self._done_files = 0
        self._restarted: set = set()
        self._resumed = 0  # bytes of part files a transfer went on from (the summary says it resumed)

    def run(self, rels, force: bool = False) -> Outcome:
        outcome = Outcome(self.name)
        self._resumed = 0
        pending = list(rels)
        while pending:
            started, sent = time.monotonic(), [0]
            sftp = None
            try:
                sftp = self.target.sftp()
                sftp.get_channel().settimeout(self.io_timeout)
                while pending:
                    self._step(sftp, pending[0], force, sent, outcome)
                    pending.pop(0)
            except DiskFull as e:
                self._record(outcome, None, "disk-full", "the destination filled up", started, sent[0], str(e))
                outcome.fail(DISK_FULL, f"the destination filled up: {e}")
                return outcome
            except _Lost as lost:
                cause = lost.args[0]
                meaning = "no data moved within the I/O timeout" if isinstance(cause, socket.timeout) else \
                    "the connection dropped"
                self._record(outcome, None, "retry", meaning, started, sent[0], f"{type(cause).__name__}: {cause}")
                self.target.drop_link()
                if self.progress:
                    self.progress.note(f"sftp: {meaning}; retrying")
                if self.backoff is None or not self.backoff.wait():
                    outcome.fail(TRANSPORT, f"SFTP kept failing ({meaning}) after {len(outcome.attempts)} attempts")
                    return outcome
                continue
            except (OSError, EOFError) + _ssh_errors() as e:
                # Opening the session itself failed: the connection is the problem.
                self._record(outcome, None, "retry", "could not open an SFTP session", started, sent[0], str(e))
                self.target.drop_link()
                if self.backoff is None or not self.backoff.wait():
                    outcome.fail(TRANSPORT, f"could not open an SFTP session: {e}")
                    return outcome
                continue
            finally:
                if sftp is not None:
                    _quietly(sftp.close)
            self._record(outcome, 0, "ok", "success", started, sent[0], "")
        if outcome.file_errors:
            outcome.fail(PARTIAL, f"{len(outcome.file_errors)} file(s) could not be transferred: "
                                  f"{outcome.file_errors[0]}")
        outcome.bytes_reused += self._resumed
        return outcome

    def _step(self, sftp, rel, force: bool, sent, outcome):
        """One path; a file-level failure is recorded and the transfer goes on, a lost link raises."""
        try:
            self._one(sftp, rel, force, sent)
        except FileProblem as e:
            outcome.file_errors.append(f"{rel}: {e}")
        except (OSError, EOFError) + _ssh_errors() as e:
            if _alive(sftp) and not isinstance(e, (EOFError, socket.timeout) + _ssh_errors()):
                outcome.file_errors.append(f"{rel}: {getattr(e, 'strerror', None) or e or type(e).__name__}")
            else:
                raise _Lost(e) from None

    def _record(self, outcome, code, kind, meaning, started, sent, message) -> None:
        outcome.attempts.append(Attempt(code, kind, meaning, round(time.monotonic() - started, 3), sent, message))
        outcome.bytes_sent += sent
        outcome.wire_bytes += sent

    def _one(self, sftp, rel, force: bool, sent):
        e = self.entries[rel]
        if e.kind == "d":
            if self.direction == "push":
                self._rmkdir(sftp, self.remote_root + b"/" + _b(rel))
            else:
                self.local.makedirs(rel)
        elif e.kind == "l":
            if e.link is None:
                raise FileProblem("its link target could not be read")
            self._link(sftp, rel, e.link)
        elif e.kind == "f":
            restart = force and rel not in self._restarted
            self._restarted.add(rel)
            if self.direction == "push":
                self._upload(sftp, rel, restart, sent)
            else:
                self._download(sftp, rel, restart, sent)
            self._done_files += 1
            if self.progress:
                self.progress.update(self._done_bytes, self._done_files)

    def _copy(self, read, write, sent) -> None:
        while True:
            buf = read(CHUNK)
            if not buf:
                return
            write(buf)
            self._bump(len(buf), sent)

    def _bump(self, n, sent) -> None:
        sent[0] += n
        self._done_bytes += n
        if self.progress:
            self.progress.update(self._done_bytes)

    # push ---------------------------------------------------------------------------------

    def _rmkdir(self, sftp, path: bytes):
        """Make `path` a directory on the box. Below the destination each component is made in
        turn and lstat'ed, so a symlink there is replaced, never written through; the destination
        and what is above it are the user's to name and are followed."""
        if path in self._made:
            return
        below = path.startswith(self.remote_root + b"/")
        parent = posixpath.dirname(path)
        if below:
            self._rmkdir(sftp, parent)
        st = _lstat(sftp, path) if below else _stat(sftp, path)
        if st is not None and below and stat.S_ISLNK(st.st_mode):
            sftp.remove(path)
            st = None
        if st is None:
            if not below and parent and parent != path:
                self._rmkdir(sftp, parent)
            try:
                sftp.mkdir(path)
            except IOError:
                st = _lstat(sftp, path)
                if st is None or not stat.S_ISDIR(st.st_mode):
                    raise
        elif not stat.S_ISDIR(st.st_mode):
            raise FileProblem(f"{os.fsdecode(path)} exists and is not a directory")
        self._made.add(path)

    def _upload(self, sftp, rel, restart, sent):
        local = os.path.join(self.local_root, _b(rel))
        final = self.remote_root + b"/" + _b(rel)
        part = part_name(final)
        self._rmkdir(sftp, posixpath.dirname(final))
        st = os.stat(local)
        try:
            have = sftp.stat(part).st_size
        except FileNotFoundError:
            have = 0
        if restart or have > st.st_size:
            have = 0
        self._resumed += have
        try:
            with open(local, "rb") as lf:
                lf.seek(have)
                rf = sftp.open(part, "r+" if have else "w")
                with _closing(rf, sftp):
                    rf.set_pipelined(True)
                    rf.seek(have)
                    self._copy(lf.read, rf.write, sent)
            got = sftp.stat(part).st_size
            if got != st.st_size:
                # Pipelined writes can fail without an error at close(); the size tells.
                self._maybe_full(sftp, part, st.st_size, f"only {got} of {st.st_size} bytes were written")
                raise FileProblem(f"only {got} of {st.st_size} bytes were written")
            sftp.chmod(part, stat.S_IMODE(st.st_mode))
            sftp.utime(part, (st.st_atime, st.st_mtime))
            self._replace_remote(sftp, part, final)
        except FileNotFoundError as err:
            raise FileProblem(f"vanished while sending: {err}") from None
        except IOError as err:
            if isinstance(err, socket.timeout) or not _alive(sftp):
                raise
            self._maybe_full(sftp, part, st.st_size, err)
            raise

    def _maybe_full(self, sftp, part, size: int, err):
        """SFTP reports a full disk as a bare 'Failure': ask the box how much room is left."""
        free = self.remote_free() if self.remote_free else None
        if not free:
            return
        have = (_lstat(sftp, part) or _NoStat).st_size
        free_bytes, free_inodes = free
        if (free_bytes is not None and free_bytes < max(size - have, 65536)) or free_inodes == 0:
            _quietly(lambda: sftp.remove(part))
            raise DiskFull(f"writing {os.fsdecode(part)} failed ({err or 'Failure'}) with {free_bytes} bytes and "
                           f"{free_inodes} inodes free at the destination; the partial file was removed and no "
                           f"final name was written")

    def _replace_remote(self, sftp, part, final):
        try:
            sftp.posix_rename(part, final)
        except IOError:
            st = _lstat(sftp, final)
            if st is None or not stat.S_ISDIR(st.st_mode):
                raise
            raise FileProblem(f"{os.fsdecode(final)} is a directory at the destination") from None

    def _link(self, sftp, rel, target):
        if self.direction == "push":
            path = self.remote_root + b"/" + _b(rel)
            self._rmkdir(sftp, posixpath.dirname(path))
            st = _lstat(sftp, path)
            if st is not None:
                if stat.S_ISDIR(st.st_mode):
                    raise FileProblem("a directory is in the way of the symlink")
                sftp.remove(path)
            sftp.symlink(_b(target), path)
        else:
            try:
                self.local.symlink(_b(target), rel)
            except IsADirectoryError as err:
                raise FileProblem(err.strerror) from None

    # pull ---------------------------------------------------------------------------------

    def _download(self, sftp, rel, restart, sent):
        remote = self.remote_root + b"/" + _b(rel)
        try:
            rst = sftp.stat(remote)
        except FileNotFoundError:
            raise FileProblem("vanished on the box before it was sent") from None
        with self.local.parent(rel) as (d, name):
            part = part_name(name)
            old = d.lstat(part)
            if old is not None and not stat.S_ISREG(old.st_mode):
                d.unlink(part)  # not a partial of ours: never written through
                old = None
            have = old.st_size if old is not None else 0
            if restart or have > rst.st_size:
                have = 0
            self._resumed += have
            try:
                with os.fdopen(d.open(part, os.O_RDWR | os.O_CREAT), "r+b") as lf:
                    lf.seek(have)
                    lf.truncate()
                    rf = sftp.open(remote, "r")
                    with _closing(rf, sftp):
                        rf.seek(have)
                        if rst.st_size > have:
                            rf.prefetch(rst.st_size, max_concurrent_requests=PREFETCH_REQUESTS)
                        self._copy(rf.read, lf.write, sent)
                    lf.flush()
                    got = os.fstat(lf.fileno()).st_size
                    if got == rst.st_size:
                        os.fchmod(lf.fileno(), stat.S_IMODE(rst.st_mode))
                        os.utime(lf.fileno(), (rst.st_atime, rst.st_mtime))
            except OSError as err:
                if err.errno in _FULL_ERRNOS:
                    _quietly(lambda: d.unlink(part))
                    shown = os.fsdecode(part_name(os.path.join(self.local_root, _b(rel))))
                    raise DiskFull(f"writing {shown} failed: {err.strerror}; the partial file was removed, no "
                                   f"final name was written") from None
                raise
            if got != rst.st_size:
                raise FileProblem(f"received {got} of {rst.st_size} bytes")
            final = d.lstat(name)
            if final is not None and stat.S_ISDIR(final.st_mode):
                raise FileProblem("a directory is in the way of the file")
            d.replace(part, name)


class _Lost(Exception):
    """The connection under the SFTP session is gone (or stalled): reconnect and resume."""


class _NoStat:
    st_size = 0


def _alive(sftp) -> bool:
    chan = sftp.get_channel() if sftp is not None else None
    return bool(chan is not None and not chan.closed and chan.get_transport().is_active())


@contextlib.contextmanager
def _closing(handle, sftp):
    """Close a remote file handle, except when the link under it is gone or stalled: closing
    would only wait out the I/O timeout a second time."""
    try:
        yield handle
    except BaseException as e:
        if _alive(sftp) and not isinstance(e, socket.timeout):
            _quietly(handle.close)
        raise
    handle.close()


def _lstat(sftp, path):
    try:
        return sftp.lstat(path)
    except FileNotFoundError:
        return None


def _stat(sftp, path):
    try:
        return sftp.stat(path)
    except FileNotFoundError:
        return None


def _quietly(fn) -> None:
    try:
        fn()
    except Exception:  # best-effort cleanup on a path that is already failing
        pass


def _ssh_errors() -> tuple:
    import paramiko

    return (paramiko.SSHException,)
