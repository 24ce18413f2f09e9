"""The last `preflight --qualify` verdict of each host, kept on this workstation: `fleet` shows it and
placement passes over a box that was returned (gpuops.placement).

Stored as <state dir>/qualify.json (state dir as for the pull index), mode 0600:
{host: {"verdict": keep|return|unmeasured, "at": epoch, "models": [str], "failed": [title]}}.
Best effort, like gpuops.probecache: a file that cannot be read or written is as good as none.
"""

import time

from .pullindex import read_state, write_per_host

_NAME = "qualify.json"
_KEEP = 500  # hosts
VERDICTS = ("keep", "return", "unmeasured")
FAILED_MAX, TEXT_MAX = 5, 200


def verdict(host: str):
    """{"verdict", "at", "models", "failed"} last recorded for `host`, or None."""
    entry = read_state(_NAME).get(host)
    if not isinstance(entry, dict) or entry.get("verdict") not in VERDICTS or not isinstance(entry.get("at"), (int, float)):
        return None
    return {"verdict": entry["verdict"], "at": entry["at"],
            "models": [str(m)[:TEXT_MAX] for m in entry.get("models") or []][:8],
            "failed": [str(t)[:TEXT_MAX] for t in entry.get("failed") or []][:FAILED_MAX]}


def record(host: str, judged: dict, models, now=None) -> None:
    data = read_state(_NAME)
    data[host] = {"verdict": judged["verdict"], "at": time.time() if now is None else now,
                  "models": sorted(set(models))[:8],
                  "failed": [r["what"][:TEXT_MAX] for r in judged["rows"] if r["verdict"] == "return"][:FAILED_MAX]}
    write_per_host(_NAME, data, _KEEP, "at")
