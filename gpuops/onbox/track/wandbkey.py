"""Where a run's curves would go, as the probe reports it: W&B's key and mode (stdlib only), and
what TensorBoard reads (gpuops.onbox.track.trackers).

W&B (gotchas U34, U35): wandb finds its key in WANDB_API_KEY, WANDB_IDENTITY_TOKEN_FILE, or the
netrc file ($NETRC, else ~/.netrc) under the netloc of its base URL (WANDB_BASE_URL, default
https://api.wandb.ai); see wandb/sdk/lib/wbauth/authenticate.py (_use_system_auth, _try_env_auth)
and wbnetrc.py (_get_netrc_file_path) in wandb/wandb. A detached run finds no terminal to prompt
on and stops with "No API key configured. Use `wandb login` to log in.". Only where the key was
found leaves the box, never the key. Whether wandb is installed is the box's site-packages' to
say: only the probe, which runs with them on every path (gpuops.onbox.NEEDS_SITE), asks.
"""

import os

from ..host import procs
from . import trackers
from .trackers import TEXT_MAX

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


def _netrc_has(path, host: str):
    import netrc

    try:
        creds = netrc.netrc(path).authenticators(host)
    except (IOError, OSError, netrc.NetrcParseError):
        return False
    return bool(creds and creds[2])


def wandb_facts() -> dict:
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


def facts(pinned=None) -> dict:
    """{wandb, tensorboard: {pinned: events() or None, servers}}; `pinned` is the logdir the
    platform's own TensorBoard reads (a profile's paths.tensorboard_logdir)."""
    return {"wandb": wandb_facts(),
            "tensorboard": {"pinned": trackers.events(pinned) if pinned else None,
                            "servers": trackers.servers(procs.ancestry())}}
