"""Where a run's curves would go: W&B's key and mode, and what TensorBoard reads (stdlib only).

W&B (gotchas U34, U35): wandb finds its key in WANDB_API_KEY, WANDB_IDENTITY_TOKEN_FILE, or the
netrc file ($NETRC, else ~/.netrc) under the netloc of its base URL (WANDB_BASE_URL, default
https://api.wandb.ai); see wandb/sdk/lib/wbauth/authenticate.py (_use_system_auth, _try_env_auth)
and wbnetrc.py (_get_netrc_file_path) in wandb/wandb. A detached run finds no terminal to prompt
on and stops with "No API key configured. Use `wandb login` to log in.". Only where the key was
found leaves the box, never the key.

TensorBoard (U39, AD7): a server process's --logdir / --logdir_spec (its own flags, tensorboard's
core plugin), and whether those directories hold event files: TensorBoard takes any file whose
name contains "tfevents" (tensorboard/backend/event_processing/io_wrapper.py,
IsTensorFlowEventsFile), which its writers name events.out.tfevents.<time>.<host>.<pid>.<n>.
"""

import os

from . import procs, sysroot

MAX_SERVERS = 8
MAX_LOGDIRS = 8
MAX_WALK = 5000  # directory entries looked at per logdir; a huge tree is reported as capped
MAX_DEPTH = 6
TEXT_MAX = 300
DEFAULT_BASE_URL = "https://api.wandb.ai"


def _netloc(url):
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0]


def _netrc_path():
    path = os.environ.get("NETRC")
    if path:
        return os.path.expanduser(path)
    for name in ("~/.netrc", "~/_netrc"):
        if os.path.exists(os.path.expanduser(name)):
            return os.path.expanduser(name)
    return os.path.expanduser("~/.netrc")


def _netrc_has(path, host):
    import netrc

    try:
        creds = netrc.netrc(path).authenticators(host)
    except (IOError, OSError, netrc.NetrcParseError):
        return False
    return bool(creds and creds[2])


def wandb_facts():
    """{installed, mode, key (where a key was found, or None), host, netrc}."""
    import importlib.util

    try:
        installed = importlib.util.find_spec("wandb") is not None
    except (ImportError, ValueError):
        installed = False
    host = _netloc(os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL)[:TEXT_MAX]
    path = _netrc_path()
    key = None
    if os.environ.get("WANDB_API_KEY"):
        key = "WANDB_API_KEY"
    elif os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        key = "WANDB_IDENTITY_TOKEN_FILE"
    elif _netrc_has(path, host):
        key = "netrc"
    mode = os.environ.get("WANDB_MODE")
    return {"installed": installed, "mode": mode[:40] if mode is not None else None, "key": key, "host": host,
            "netrc": path[:TEXT_MAX]}


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


def _argv(pid):
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


def facts(pinned=None):
    """{wandb, tensorboard: {pinned: events() or None, servers}}; `pinned` is the logdir the
    platform's own TensorBoard reads (a profile's paths.tensorboard_logdir)."""
    return {"wandb": wandb_facts(),
            "tensorboard": {"pinned": events(pinned) if pinned else None, "servers": servers(procs.ancestry())}}
