"""Free bytes AND free inodes for the directories a run writes to.

Disks on rented boxes die on inodes as often as on bytes (per-sample eval output, HF caches), so
both are read with statvfs. A directory that does not exist yet (a checkpoint dir the run will
create) is measured at its nearest existing parent, and said so. /dev/shm goes through the
GPUOPS_ROOT seam like every other /dev path, and so does /proc/self/mountinfo, which names the
filesystem type a directory is on (a network, FUSE or overlay filesystem under a run's data is
gotcha U8; the verdict is gpuops.checks.disk's).
"""

import os
import re

from . import sysroot

_OCTAL = re.compile(r"\\([0-7]{3})")


def _existing(path):
    p = path
    while p and not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p or "/"


def _mount_point(path):
    p = os.path.realpath(path)
    while not os.path.ismount(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def mounts():
    """[(mount point, fstype, source)] from /proc/self/mountinfo, in mount order. A line is
    `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`, with
    spaces and the like in names written as octal escapes (\\040)."""
    found = []
    for line in (sysroot.read("/proc/self/mountinfo") or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if sep and len(fields) >= 5 and len(rfields) >= 2:
            found.append((_unescape(fields[4]), rfields[0], _unescape(rfields[1])))
    return found


def _unescape(text: str):
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def filesystem(path, table):
    """(mount point, fstype, source) that absolute `path` is on: the deepest mount point above
    it, and of several mounts on one point the last (it hides the others); None if none is."""
    best = None
    for entry in table:
        point = entry[0]
        if path == point or path.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) >= len(best[0]):
                best = entry
    return best


def measure(role, path, table=None):
    """One directory's filesystem numbers (and, given the mount `table`, its filesystem type);
    {'error': ...} instead when it cannot be read."""
    asked = path
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        path = os.path.abspath(path)
    real = sysroot.path(path)
    at = _existing(real)
    doc = {"role": role, "path": path, "exists": at == real}
    if asked != path:
        doc["asked"] = asked  # what the caller named it, so a floor given for that name finds it
    if at != real:
        doc["measured_at"] = sysroot.unroot(at)
    try:
        st = os.statvfs(at)
        dev = os.stat(at).st_dev
    except (OSError, IOError) as e:
        doc["error"] = getattr(e, "strerror", None) or str(e)
        return doc
    doc.update({
        "device": dev,
        "mount": sysroot.unroot(_mount_point(at)),
        "total_bytes": st.f_blocks * st.f_frsize,
        "free_bytes": st.f_bavail * st.f_frsize,
        "total_inodes": st.f_files,
        "free_inodes": st.f_favail,
    })
    found = filesystem(sysroot.unroot(os.path.realpath(at)), table) if table else None
    if found:
        doc.update({"fs_mount": found[0], "fstype": found[1], "fs_source": found[2]})
    return doc


def facts(extra_paths=()) -> list:
    """Numbers for home, the working directory, /dev/shm, /tmp and every extra (role, path)."""
    roles = [("home", os.path.expanduser("~"))]
    try:
        roles.append(("cwd", os.getcwd()))
    except OSError:
        pass  # the working directory was deleted under us: nothing to measure there
    roles += [("shm", "/dev/shm"), ("tmp", "/tmp")]
    roles += list(extra_paths)
    table = mounts()
    return [measure(role, p, table) for role, p in roles]
