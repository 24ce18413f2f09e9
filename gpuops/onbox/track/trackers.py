"""What TensorBoard reads on a box (stdlib only): a server process's --logdir / --logdir_spec (its
own flags, tensorboard's core plugin), and whether those directories hold event files: TensorBoard
takes any file whose name contains "tfevents" (tensorboard/backend/event_processing/io_wrapper.py,
IsTensorFlowEventsFile), which its writers name events.out.tfevents.<time>.<host>.<pid>.<n>
(U39, AD7). W&B's side is gpuops.onbox.track.wandbkey; the probe reads both through its `facts`.
"""

import os

from ..host import procs, sysroot

MAX_SERVERS = 8
MAX_LOGDIRS = 8
MAX_WALK = 5000  # directory entries looked at per logdir; a huge tree is reported as capped
MAX_DEPTH = 6
TEXT_MAX = 300


def events(path):
    """{path, exists, events (files whose name holds "tfevents", counted up to MAX_WALK entries), capped}."""
    out = {"path": path[:TEXT_MAX], "exists": os.path.isdir(path), "events": 0, "capped": False}
    if not out["exists"]:
        return out
    seen, base = 0, path.rstrip("/").count("/")
    for top, dirs, files in os.walk(path):
        if top.count("/") - base >= MAX_DEPTH:
            dirs[:] = []
        seen += len(dirs) + len(files)
        out["events"] += sum(1 for f in files if "tfevents" in f)
        if seen >= MAX_WALK:
            out["capped"] = True
            break
    return out


def logdirs(argv):
    """The directories a TensorBoard command line reads: --logdir DIR and --logdir_spec
    [NAME:]DIR,... (either as `--flag value` or `--flag=value`)."""
    found = []
    for i, word in enumerate(argv):
        flag, eq, value = word.partition("=")
        if flag not in ("--logdir", "--logdir_spec"):
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        parts = value.split(",") if flag == "--logdir_spec" else [value]
        for part in parts:
            if "://" in part:  # gs://, s3://: nothing on this box to look at
                continue
            # NAME:DIR, except that a bare absolute path may itself hold no colon before its slash
            name, colon, rest = part.partition(":")
            path = rest if colon and not name.startswith("/") and "/" not in name else part
            if path:
                found.append(path)
    return found[:MAX_LOGDIRS]


def _argv(pid: int):
    try:
        with open(sysroot.path("/proc/%d/cmdline" % pid), "rb") as f:
            raw = f.read(8192)
    except (OSError, IOError):
        return []
    return [w.decode("utf-8", "replace") for w in raw.rstrip(b"\0").split(b"\0")]


def _is_tensorboard(argv):
    """`tensorboard ...`, `python .../bin/tensorboard ...` or `python -m tensorboard.main ...`."""
    head = [os.path.basename(w) for w in argv[:2]]
    if "tensorboard" in head:
        return True
    return len(argv) > 2 and argv[1] == "-m" and argv[2].split(".")[0] == "tensorboard"


def servers(own=()):
    """[{pid, logdirs: [events()]}] of the TensorBoard processes running here."""
    out = []
    for pid in procs.pids():
        if pid in own:
            continue
        argv = _argv(pid)
        if argv and _is_tensorboard(argv):
            try:
                cwd = os.readlink(sysroot.path("/proc/%d/cwd" % pid))
            except OSError:
                cwd = "/"
            out.append({"pid": pid, "logdirs": [events(os.path.join(cwd, d)) for d in logdirs(argv)]})
            if len(out) >= MAX_SERVERS:
                break
    return out
