"""Free bytes AND free inodes for the directories a run writes to.

Disks on rented boxes die on inodes as often as on bytes (per-sample eval output, HF caches), so
both are read with statvfs. A directory that does not exist yet (a checkpoint dir the run will
create) is measured at its nearest existing parent, and said so. /dev/shm goes through the
GPUOPS_ROOT seam like every other /dev path.
"""

import os

from . import sysroot


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


def measure(role, path):
    """One directory's filesystem numbers; {'error': ...} instead when it cannot be read."""
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
    return doc


def facts(extra_paths=()):
    """Numbers for home, the working directory, /dev/shm, /tmp and every extra (role, path)."""
    roles = [("home", os.path.expanduser("~"))]
    try:
        roles.append(("cwd", os.getcwd()))
    except OSError:
        pass  # the working directory was deleted under us: nothing to measure there
    roles += [("shm", "/dev/shm"), ("tmp", "/tmp")]
    roles += list(extra_paths)
    return [measure(role, p) for role, p in roles]
