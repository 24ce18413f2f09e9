"""Local writes that stay inside their root, whatever names the box sends and whatever symlinks
the local tree holds.

Every path written under a root chosen here (pull's --dst, `logs --save`) comes from the box. It
is checked first (relative, no empty, ".", ".." or NUL component), then walked one component at a
time from an open descriptor of the root, each directory opened with O_NOFOLLOW, and the last step
(create, rename, symlink, unlink) is made relative to its parent's descriptor. So no symlink in the
tree, whether an earlier sync put it there or someone plants it meanwhile, is ever followed: where
a directory is needed and a symlink stands, the link itself is replaced by a directory, as rsync's
receiver does. The root itself, and whatever is above it, are the user's choice and are followed.
"""

import contextlib
import errno
import os
import secrets
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_WALK_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


class Outside(ValueError):
    """A path that cannot name anything inside a root. Names from the box are checked at the trust
    boundary (BadAnswer) before they get here, so reaching this is a bug."""


def problem(rel):
    """Why `rel` cannot name a path inside a root (None when it can)."""
    if not isinstance(rel, str):
        return f"is a {type(rel).__name__}, not a path"
    if rel.startswith("/"):
        return "is absolute"
    if "\0" in rel:
        return "holds a NUL byte"
    if any(part in ("", ".", "..") for part in rel.split("/")):
        return "has a '..', '.' or empty component"
    if not rel.isascii():
        try:
            rel.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return "is not a file name (a surrogate no byte maps to)"
    return None


def parts(rel) -> list:
    """The components of `rel` as file-system names, or Outside."""
    why = problem(rel)
    if why:
        raise Outside(f"{rel!r} {why}")
    return [p.encode("utf-8", "surrogateescape") for p in rel.split("/")]


def one_name(value) -> str:
    """`value` when it is one component of a path (a job id as a folder's name), else Outside."""
    names = parts(value)
    if len(names) != 1:
        raise Outside(f"{value!r} is not one file name")
    return value


def _name(name) -> bytes:
    """One component given to a Dir: a name the caller built (a part file's), checked all the same."""
    name = os.fsencode(name)
    if b"/" in name or b"\0" in name or name in (b"", b".", b".."):
        raise Outside(f"{name!r} is not one file name")
    return name


class Dir:
    """An open directory inside a root. Each method takes one name in it and never follows it
    when it is a symlink."""

    def __init__(self, fd) -> None:
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)

    def lstat(self, name):
        try:
            return os.stat(_name(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open(self, name, flags, mode=0o666) -> int:
        """A descriptor of `name`; a symlink there fails (ELOOP) instead of being followed."""
        return os.open(_name(name), flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.fd)

    def unlink(self, name) -> None:
        os.unlink(_name(name), dir_fd=self.fd)

    def replace(self, src, dst) -> None:
        os.replace(_name(src), _name(dst), src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def symlink(self, target, name):
        """`name` -> `target` (stored as given, never resolved here); a file or link already there
        is replaced, a directory is not."""
        name = _name(name)
        st = self.lstat(name)
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "a directory is in the way of the symlink")
            self.unlink(name)
        os.symlink(os.fsencode(target), name, dir_fd=self.fd)

    def subdir(self, name, create: bool):
        """The directory `name` in this one. With `create`, a missing one is made and a symlink
        there is replaced by a directory (the link itself goes, never what it points at)."""
        name = _name(name)
        try:
            return Dir(os.open(name, _DIR_FLAGS, dir_fd=self.fd))
        except OSError as e:
            if not create or e.errno not in _WALK_ERRNOS:
                raise
        st = self.lstat(name)
        if st is not None:
            if not stat.S_ISLNK(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, f"{os.fsdecode(name)} is in the way of a directory")
            self.unlink(name)
        with contextlib.suppress(FileExistsError):  # made meanwhile: the open below checks what it is
            os.mkdir(name, 0o777, dir_fd=self.fd)
        return Dir(os.open(name, _DIR_FLAGS, dir_fd=self.fd))

    def remove_tree(self, name) -> None:
        """Remove `name`: a file or link itself, or a directory with everything in it."""
        name = _name(name)
        st = self.lstat(name)
        if st is None:
            return
        if not stat.S_ISDIR(st.st_mode):
            self.unlink(name)
            return
        sub = self.subdir(name, create=False)
        try:
            with os.scandir(sub.fd) as it:
                names = [e.name for e in it]
            for child in names:
                sub.remove_tree(child)
        finally:
            sub.close()
        os.rmdir(name, dir_fd=self.fd)


class Root:
    """A local directory that box-named paths are written under, and never out of."""

    def __init__(self, path) -> None:
        self.path = os.fsencode(os.path.abspath(path))

    @contextlib.contextmanager
    def parent(self, rel, create: bool = True):
        """(Dir, name): the open directory that holds `rel`, and its last component. With `create`,
        missing directories on the way are made and symlinks on the way replaced by directories;
        without, a symlink on the way fails like a missing directory."""
        names = parts(rel)
        here = Dir(os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        try:
            for name in names[:-1]:
                deeper = here.subdir(name, create)
                here.close()
                here = deeper
            yield here, names[-1]
        finally:
            here.close()

    def makedirs(self, rel) -> None:
        with self.parent(rel) as (d, name):
            d.subdir(name, create=True).close()

    def symlink(self, target, rel) -> None:
        with self.parent(rel) as (d, name):
            d.symlink(target, name)

    def remove(self, rel):
        """Remove `rel` and everything under it; a path whose way in is not a real directory is not
        inside the root, so there is nothing of it to remove."""
        try:
            with self.parent(rel, create=False) as (d, name):
                d.remove_tree(name)
        except OSError as e:
            if e.errno not in _WALK_ERRNOS:
                raise

    def write_atomic(self, rel, data: bytes, temp_suffix=".tmp", mode=0o666):
        """`rel` holds exactly `data`, or is unchanged: written to a new, unique temporary name
        beside it first (O_EXCL: never an existing file or link), created with `mode` (less the
        umask), renamed over it, and removed on any failure."""
        with self.parent(rel) as (d, name):
            temp = b".%s.%s%s" % (name, secrets.token_hex(6).encode(), os.fsencode(temp_suffix))
            fd = d.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                d.replace(temp, name)
            except BaseException:
                with contextlib.suppress(OSError):
                    d.unlink(temp)
                raise
