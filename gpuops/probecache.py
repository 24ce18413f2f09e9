"""What a box's probe said about its torch, kept on this workstation so the next preflight of that
box need not import torch again (1-3 s each time, for facts that change only with a reinstall).

Stored as <state dir>/torch-facts.json (state dir as for the pull index), mode 0600:
{host: {"key": the box's name for that torch install, "facts": {version, cuda, arch_list}, "seen_at"}}.
The box names the install (gpuops.onbox.host.torchinfo); a different key, or none, means ask again.
Best effort: a file that cannot be read or written is as good as none.
"""

import time

from .pullindex import read_state, write_per_host

_KEEP = 200  # hosts
_NAME = "torch-facts.json"
FACTS = ("version", "cuda", "arch_list")
# What the box answered is kept only within these: a key or fact longer is a box gone odd, and
# asking it again next time costs one import, while keeping it would grow this file.
KEY_MAX, WORD_MAX, ARCHES_MAX = 4096, 256, 64


def _keepable(torch):
    def word(v):
        return v is None or (isinstance(v, str) and len(v) <= WORD_MAX)

    arches = torch.get("arch_list")
    return (isinstance(torch.get("key"), str) and len(torch["key"]) <= KEY_MAX and word(torch.get("version"))
            and word(torch.get("cuda")) and isinstance(arches, list) and len(arches) <= ARCHES_MAX
            and all(isinstance(a, str) and word(a) for a in arches))


def known(host: str):
    """{"key", "facts"} kept for `host`, or None."""
    entry = read_state(_NAME).get(host)
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not isinstance(entry.get("facts"), dict):
        return None
    return entry


def merged(host: str, torch, kept):
    """The probe's torch facts with what was kept filled in where the box said they still hold;
    a fresh answer with a key is kept for next time."""
    if not isinstance(torch, dict):
        return torch
    if torch.get("known"):
        if kept and kept["key"] == torch.get("key"):
            return dict({k: kept["facts"].get(k) for k in FACTS}, **torch)
        # the box says we kept facts we do not have (another workstation's key): report nothing wrong
        return {"installed": True, "error": "the box named kept torch facts this workstation does not have; "
                                            "run preflight again"}
    if torch.get("key") and not torch.get("error") and _keepable(torch):
        _remember(host, torch["key"], {k: torch.get(k) for k in FACTS})
    return torch


def _remember(host: str, key, facts) -> None:
    data = read_state(_NAME)
    data[host] = {"key": key, "facts": facts, "seen_at": time.time()}
    write_per_host(_NAME, data, _KEEP, "seen_at")
