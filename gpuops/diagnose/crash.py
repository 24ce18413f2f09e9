"""A native crash, from the core dumps a run left (gpuops.onbox.host.cores) and the signal it died of.

A process killed by SIGSEGV, SIGABRT, SIGBUS and the other signals whose default action is "Core"
(signal(7)) crashed in native code: a CUDA, driver or extension bug, not the Python program's own
error, and the core is where its stack is. Pure: the box's answer is checked here (it is untrusted)
and turned into evidence lines.
"""

from ..boundary import bounded, shaped
from ..units import human_bytes

CORE_SIGNALS = frozenset(("SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGSEGV", "SIGXCPU",
                          "SIGXFSZ", "SIGSYS"))
NUMBER, NONE = (int, float), type(None)
_CORES = {"pattern": (str, NONE), "limit": (int, NONE), "cwd": (str, NONE), "files": list, "coredumpctl": dict}
_FILE = {"path": str, "size": int, "mtime": NUMBER}
_CTL = {"available": bool, "error": (str, NONE), "entries": list}
_ENTRY = {"time": NUMBER + (NONE,), "pid": (int, NONE), "sig": (str, NONE), "corefile": (str, NONE),
          "exe": (str, NONE), "size": (int, NONE)}
MAX_ENTRIES, MAX_TEXT = 20, 300


def checked(doc, host: str):
    """The `cores` part of diagnose's evidence once its shape and sizes are gpuops's (None stays None)."""
    if doc is None:
        return None
    what, answer = "diagnose evidence's cores", "diagnose evidence"
    shaped(doc, _CORES, host, what)
    ctl = shaped(doc["coredumpctl"], _CTL, host, what)
    bounded(len(doc["files"]), 0, MAX_ENTRIES, host, "the core files", answer)
    bounded(len(ctl["entries"]), 0, MAX_ENTRIES, host, "the coredumpctl entries", answer)
    for f in doc["files"]:
        shaped(f, _FILE, host, what)
        bounded(len(f["path"]), 1, MAX_TEXT, host, "a core file's path length", answer)
        bounded(f["size"], 0, 1 << 50, host, "a core file's size", answer)
    for e in ctl["entries"]:
        shaped(e, _ENTRY, host, what)
        for key in ("sig", "corefile", "exe"):
            bounded(len(e[key] or ""), 0, MAX_TEXT, host, f"a coredumpctl {key}'s length", answer)
    for key in ("pattern", "cwd"):
        bounded(len(doc[key] or ""), 0, MAX_TEXT, host, f"the core {key}'s length", answer)
    return doc


def dumps(cores, pid):
    """(lines naming every core since launch, whether one is `pid`'s)."""
    if not cores:
        return [], False
    lines, mine = [], False
    for f in cores["files"]:
        lines.append(f"core file {f['path']} ({human_bytes(f['size'])}): gdb -q \"$(command -v python3)\" "
                     f"{f['path']} -ex bt")
        mine = mine or (pid is not None and f["path"].endswith(f".{pid}"))
    for e in cores["coredumpctl"]["entries"]:
        stored = f", core {e['corefile']}" if e.get("corefile") else ""
        lines.append(f"coredumpctl: pid {e['pid']} ({e['exe'] or '?'}) dumped core on {e['sig'] or 'a signal'}"
                     f"{stored}: coredumpctl debug {e['pid']}")
        mine = mine or (pid is not None and e["pid"] == pid)
    return lines, mine


def why_none(cores):
    """Why no core was found, when the box says: cores switched off, or piped to a handler gpuops
    cannot ask."""
    if not cores:
        return None
    if cores.get("limit") == 0:
        return "no core dump: the core size limit is 0 here (ulimit -c); `ulimit -c unlimited` before launching keeps one"
    pattern, ctl = cores.get("pattern") or "", cores["coredumpctl"]
    if pattern.startswith("|") and not ctl["available"]:
        return f"no core file: kernel.core_pattern hands cores to {pattern[1:].split()[0]}, and coredumpctl is not here"
    if ctl.get("error"):
        return f"no core found; coredumpctl could not list them: {ctl['error']}"
    return None


def crash(ev: dict, sig: str | None, record: dict | None) -> tuple[str, list[str]] | None:
    """(confidence, lines) when the run crashed in native code: it died of a core signal, or left
    a core dump of its own pid with no exit record; None otherwise."""
    lines, mine = dumps(ev.get("cores"), ev.get("pid"))
    if sig in CORE_SIGNALS:
        return "high", [f"the program died of {sig}, a crash in native code"] + (lines or list(
            filter(None, [why_none(ev.get("cores"))])))
    if mine and not record:
        return "high", [f"pid {ev.get('pid')} left a core dump"] + lines
    return None
