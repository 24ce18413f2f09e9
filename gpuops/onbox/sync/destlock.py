"""One writer per destination: a push holds this lock on the box for as long as it writes there,
and a pull holds the same kind of lock on this machine (imported, not shipped).

Reads one JSON request from stdin and prints one line:

    request  {"path": DESTINATION, "owner": {"verb", "pid", "host", "token"}, "wait_s": SECONDS,
              "manifest": MANIFEST REQUEST (optional)}
    answer   {"holding": LOCK FILE}       then holds it until the client is gone
             {"held_by": OWNER + {"started_at", "lock_pid"}}   another writer has it; exits

With "manifest", the line after "holding" is the manifest of the destination (gpuops.onbox.sync.manifest,
one JSON line), taken once the lock is held: a push learns what is there, with no other transfer
changing it, without a channel (and a login rc, an interpreter start) of its own.

The lock is an flock(2) on a file beside the destination, on its filesystem: `.NAME.gpuops-lock` in
the directory that holds the destination NAME (its real path: two spellings share it). So every
writer sees it, whichever login it came through: two accounts, or two boxes sharing an NFS path
(Linux's NFS client takes an flock as a lock on the server), where a lock under each writer's own
HOME let two pushes mix one tree. A writer that may not write that directory (another account's,
or read-only) opens the lock file read-only (an flock needs no more, though its record then names
an earlier holder), and where none exists there yet it falls back to a file in its per-user cache
directory ($XDG_CACHE_HOME/gpuops/locks/, default ~/.cache), named by a hash of the real path: such
a writer then sees only locks taken through its own HOME. The kernel drops a lock when the process
holding it dies, so a lock whose owner died is simply free for the next taker; the JSON kept in the
file only names the holder for the refusal. A holder that lets go removes its lock file first, while
it still holds it (`release`), so no `.NAME.gpuops-lock` stays beside a destination once its transfer
ended; a taker that was waiting on the removed file then holds an inode no path leads to, so every
taker checks, once it holds a lock, that its file is the one at the path, and takes again if not
(`_current`): two takers can never each hold a lock on the same destination. A holder killed outright
leaves its file, which the next transfer takes over and removes.

The client's channel closes stdin as soon as the request is sent, so the end of the push is seen
on stdout instead: when the client closes the channel (the push is over) or loses it (the client
died, the link dropped), stdout breaks, and the lock goes with this process. A heartbeat (a space
every BEAT_S) both tests stdout and gives the client a moment to end the channel.
"""

import errno
import fcntl
import hashlib
import json
import os
import select
import sys
import time

from . import manifest

BEAT_S = 0.5
POLL_S = 0.05
HOLDER_BYTES = 4096


def directory(environ=None):
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuops", "locks")


def beside(path, suffix: str = ".gpuops-lock"):
    """gpuops' own file for destination `path` (its lock; a pull's manifest, by `suffix`), in the
    directory that holds it, outside the tree that is synced (resolved: two spellings of one
    directory share it)."""
    parent, name = os.path.split(os.path.realpath(os.path.expanduser(path)))
    return os.path.join(parent, ".%s%s" % (name or "root", suffix))


def file_for(path, where):
    """The per-user lock file of destination `path` in directory `where` (the fallback)."""
    real = os.path.realpath(os.path.expanduser(path))
    return os.path.join(where, hashlib.sha256(os.fsencode(real)).hexdigest()[:40] + ".lock")


def take_for(path, owner, fallback_dir, wait_s=0.0):
    """take() on destination `path`'s lock: beside it, else in `fallback_dir` (see the module
    docstring). (lock file, descriptor or None, holder's record or None)."""
    lock_file = beside(path)
    try:
        os.makedirs(os.path.dirname(lock_file), exist_ok=True)  # the push would make it anyway
        fd, holder = take(lock_file, owner, wait_s)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        lock_file = file_for(path, fallback_dir)
        os.makedirs(fallback_dir, mode=0o700, exist_ok=True)
        fd, holder = take(lock_file, owner, wait_s)
    return lock_file, fd, holder


def take(lock_file, owner, wait_s=0.0):
    """(descriptor, None) holding the lock, which closing the descriptor releases; or (None, the
    holder's record) when another holds it for longer than `wait_s`. The file is made 0644 (its
    record names a holder, nothing secret), so another account may open it to lock it too."""
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | flags, 0o644)
    except PermissionError:  # another account's lock file: a read-only descriptor locks it as well
        if not os.path.lexists(lock_file):
            raise
        fd = os.open(lock_file, os.O_RDONLY | flags)
    deadline = time.time() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _current(fd, lock_file):
                break
            os.close(fd)  # its holder removed it as it let go: take the file at the path now
            return take(lock_file, owner, max(0.0, deadline - time.time()))
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                raise
        if time.time() >= deadline:
            holder = _holder(fd)
            os.close(fd)
            return None, holder
        time.sleep(POLL_S)
    record = dict(owner, started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), lock_pid=os.getpid())
    if os.O_RDWR & fcntl.fcntl(fd, fcntl.F_GETFL):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode("ascii"), 0)
    return fd, None


def _current(fd, lock_file):
    """Whether the file `fd` locks is still the one at `lock_file`."""
    try:
        there = os.stat(lock_file, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)


def release(fd, lock_file) -> None:
    """Let go of a lock `take` gave: its file removed while still held (where this writer may remove
    it: another account's stays), then the descriptor closed."""
    try:
        if _current(fd, lock_file):
            os.unlink(lock_file)
    except OSError:
        pass
    finally:
        os.close(fd)


def _holder(fd):
    try:
        doc = json.loads(os.pread(fd, HOLDER_BYTES, 0).decode("utf-8", "replace"))
    except (OSError, ValueError):
        doc = None
    return doc if isinstance(doc, dict) else {}


def hold(out) -> None:
    """Until stdout breaks: the client closed the channel or lost it."""
    poller = select.poll()
    poller.register(out.fileno(), select.POLLERR | select.POLLHUP)
    while not poller.poll(BEAT_S * 1000):
        try:
            out.write(b" ")
            out.flush()
        except (OSError, ValueError):
            return


def _listing(request):
    """The destination's manifest as one line (an error document when it could not be made)."""
    try:
        doc = manifest.build(request)
    except Exception as e:  # noqa: BLE001 - said to the client, which holds the lock and must learn why
        doc = {"error": "manifest failed: {}: {}".format(type(e).__name__, str(e)[:300])}
    return json.dumps(doc).encode("ascii") + b"\n"


def main(argv) -> int:
    out = sys.stdout.buffer
    try:
        request = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogateescape"))
        path, owner = request["path"], dict(request.get("owner") or {})
        wait_s = float(request.get("wait_s") or 0)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        out.write(json.dumps({"error": "bad request: {}".format(e)}).encode("ascii") + b"\n")
        return 2
    try:
        lock_file, fd, holder = take_for(path, owner, directory(), wait_s)
    except OSError as e:
        lock_file = beside(path)
        out.write(json.dumps({"error": "cannot lock {}: {}".format(lock_file, e.strerror or e)}).encode("ascii")
                  + b"\n")
        return 1
    if fd is None:
        out.write(json.dumps({"held_by": holder}).encode("ascii") + b"\n")
        return 0
    try:
        out.write(json.dumps({"holding": lock_file}).encode("ascii") + b"\n")
        out.flush()
        if isinstance(request.get("manifest"), dict):
            out.write(_listing(request["manifest"]))
            out.flush()
        hold(out)
    except (OSError, ValueError):
        pass
    finally:
        release(fd, lock_file)
    return 0
