"""Core dumps a run left since it started: core files where the kernel writes them, and
systemd-coredump's list where coredumpctl is present (stdlib only).

The kernel names a core after kernel.core_pattern: a bare pattern ("core", "core.%e.%p") is a file
in the dying process's cwd, a pattern with a slash a file in that directory, and a pattern that
starts with "|" hands the core to a program instead (systemd-coredump, apport), which is what
coredumpctl lists. `coredumpctl list` prints the columns time, pid, uid, gid, sig, corefile, exe,
size (systemd's src/coredump/coredumpctl.c, dump_list); --json=short prints the same as objects,
time in microseconds and sig as a number (src/shared/format-table.c, table_data_to_json).
"""

import json
import os
import re
import resource
import signal
import stat

from . import runcmd, sysroot

MAX_FILES = 20
MAX_LISTED = 500  # directory entries looked at
TEXT_MAX = 300
COREDUMPCTL_S = 10.0
_TOKEN = re.compile(r"%(.)")


def pattern():
    return (sysroot.read("/proc/sys/kernel/core_pattern") or "").strip()[:TEXT_MAX] or None


def _name_rx(pat):
    """A regex for the file names `pat` (its last path component) gives, with the ".PID" the
    kernel appends when core_uses_pid is set."""
    base = pat.rsplit("/", 1)[-1] or "core"
    out, last = "", 0
    for m in _TOKEN.finditer(base):
        out += re.escape(base[last:m.start()])
        out += r"\d+" if m.group(1) in "pPiIsgutc" else (r"%" if m.group(1) == "%" else r".+")
        last = m.end()
    out += re.escape(base[last:])
    return re.compile("^" + out + r"(?:\.\d+)?$")


def files(cwd, since, pat):
    """[{path, size, mtime}] of core files written at or after `since` where `pat` puts them
    (the cwd for a bare pattern; the plain name "core" there too when cores are piped)."""
    if pat and pat.startswith("|"):
        where, rx = cwd, _name_rx("core")
    elif pat and "/" in pat:
        where, rx = pat.rsplit("/", 1)[0] or "/", _name_rx(pat)
    else:
        where, rx = cwd, _name_rx(pat or "core")
    if not where or not os.path.isdir(where):
        return []
    out = []
    try:
        names = sorted(os.listdir(where))[:MAX_LISTED]
    except OSError:
        return []
    for name in names:
        if not rx.match(name):
            continue
        path = os.path.join(where, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mtime >= since - 5:
            out.append({"path": path[:TEXT_MAX], "size": st.st_size, "mtime": st.st_mtime})
    out.sort(key=lambda f: f["mtime"])
    return out[:MAX_FILES]


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _row(doc) -> dict:
    """One coredumpctl list entry as gpuops keeps it; time in epoch seconds."""
    t = doc.get("time")
    when = t / 1e6 if isinstance(t, (int, float)) and t > 1e12 else None
    sig = _int(doc.get("sig"))  # a signal number in the JSON, as SIGSEGV in the table
    try:
        name = signal.Signals(sig).name if sig else None
    except ValueError:
        name = "signal %d" % sig
    return {"time": when, "pid": _int(doc.get("pid")), "sig": name,
            "corefile": str(doc.get("corefile") or "")[:40] or None, "exe": str(doc.get("exe") or "")[:TEXT_MAX] or None,
            "size": _int(doc.get("size"))}


def coredumpctl(since):
    """{available, error, entries: [{time, pid, sig, corefile, exe, size}]} since `since`."""
    if not runcmd.available(["coredumpctl"])["coredumpctl"]:
        return {"available": False, "error": None, "entries": []}
    done = runcmd.run(["coredumpctl", "list", "--no-pager", "--json=short", "--since=@%d" % int(since)],
                      COREDUMPCTL_S)
    out = {"available": True, "error": done["error"], "entries": []}
    if done["error"]:
        return out
    if done["rc"] != 0:
        # "No coredumps found." is an empty list; anything else (no journal access) is said.
        if "No coredumps found" not in done["err"]:
            out["error"] = (done["err"].strip().splitlines() or ["exit %s" % done["rc"]])[-1][:TEXT_MAX]
        return out
    try:
        rows = json.loads(done["out"] or "[]")
    except ValueError:
        out["error"] = "coredumpctl's list is not JSON (systemd older than --json)"
        return out
    out["entries"] = [_row(r) for r in rows if isinstance(r, dict)][-MAX_FILES:]
    return out


def facts(cwd, since) -> dict:
    """{pattern, limit (this shell's ulimit -c in bytes; -1 is unlimited), files, coredumpctl}."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_CORE)[0]
        limit = -1 if soft == resource.RLIM_INFINITY else soft
    except (ValueError, OSError):
        limit = None
    pat = pattern()
    return {"pattern": pat, "limit": limit, "cwd": (cwd or "")[:TEXT_MAX] or None, "files": files(cwd, since, pat),
            "coredumpctl": coredumpctl(since)}
