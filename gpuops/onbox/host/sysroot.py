"""Where the on-box code reads kernel state from: the real system, or an overlay for tests.

The seam (node_exporter style): when the environment variable GPUOPS_ROOT=R is set, every file
the on-box code reads under /proc, /sys, /dev or /var/log is taken from R when it exists there
and from the real system otherwise. A test can therefore fake boot_id, uptime, cgroup files,
kern.log and /dev/nvidia* while real processes stay visible through the real /proc. While the
overlay is active, commands that read the kernel log (dmesg, journalctl) are not run: the kernel
log is R/var/log/kern.log or nothing. nvidia-smi is always found on PATH, so tests put a fake
one first. Every on-box verb (probe, jobs, diagnose, reap) reads through this module.
"""

import os

OVERLAID = ("/proc/", "/sys/", "/dev/", "/var/log/")


def root():
    return os.environ.get("GPUOPS_ROOT") or ""


def overlay_active():
    return bool(root())


def path(p):
    """The file to read for absolute path `p`, honouring the overlay."""
    r = root()
    if r and (p.startswith(OVERLAID) or p + "/" in OVERLAID):
        candidate = r.rstrip("/") + p
        if os.path.lexists(candidate):
            return candidate
    return p


def unroot(p):
    """Map a path that points into the overlay back to the path it stands in for."""
    r = root().rstrip("/")
    if r and p.startswith(r + "/"):
        rest = p[len(r):]
        if rest.startswith(OVERLAID):
            return rest
    return p


def read(p, default=None):
    """Text of a file, stripped; `default` when it is missing or unreadable."""
    try:
        with open(path(p), "rb") as f:
            return f.read().decode("utf-8", "replace").strip()
    except (OSError, IOError):
        return default


def listdir(p):
    """Entries of directory `p` from the real system and the overlay together."""
    names = set()
    for d in (p, path(p)):
        try:
            names.update(os.listdir(d))
        except OSError:
            pass
    return sorted(names)


def keyvals(p):
    """'key value' lines (memory.events, memory.stat, cpu.stat) as a dict of ints."""
    out = {}
    text = read(p)
    if not text:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                pass
    return out
