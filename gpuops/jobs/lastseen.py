"""The last state this workstation saw for each job, per host: what UNREACHABLE can still say.

Stored as <state dir>/jobs-last-seen.json (state dir as for the pull index), mode 0600.
"""

import json
import os
import time

from ..pullindex import state_dir, write_state
from ..states import UNREACHABLE

_KEEP = 500
_NAME = "jobs-last-seen.json"


def _path():
    return os.path.join(state_dir(), _NAME)


def load():
    try:
        with open(_path(), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def remember(host: str, rows) -> None:
    """Record {job_id: {state, exit_code, signal, seen_at}} for `host`; best effort."""
    data = load()
    seen = data.setdefault(host, {})
    now = time.time()
    for r in rows:
        if r.get("job_id") and r.get("state") and r["state"] != UNREACHABLE:
            seen[r["job_id"]] = {"state": r["state"], "exit_code": r.get("exit_code"), "signal": r.get("signal"),
                                 "key": r.get("key"), "name": r.get("name"), "seen_at": now}
    if len(seen) > _KEEP:
        for job_id in sorted(seen, key=lambda j: seen[j]["seen_at"])[: len(seen) - _KEEP]:
            del seen[job_id]
    try:
        write_state(_NAME, data)
    except OSError:
        pass


def recall(host: str, ref=None):
    """Everything seen on `host`, or the entry for one job named by id, key or name."""
    seen = load().get(host) or {}
    if ref is None:
        return seen
    if ref in seen:
        return dict(seen[ref], job_id=ref)
    for job_id, entry in sorted(seen.items(), key=lambda kv: -kv[1]["seen_at"]):
        if ref in (entry.get("key"), entry.get("name")):
            return dict(entry, job_id=job_id)
    return None
