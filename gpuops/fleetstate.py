"""What this machine knows of a fleet's boxes beyond the fleet file: the boxes a keeper called lost,
and why (gpuops.keeper.loop marks them; `gpuops fleet` shows them).

    <state dir>/fleet-state.json   {alias: {lost_at, why, run}}

The file is replaced whole (a reader sees the old one or the new one).
"""

import json
import os
import time

from . import contained
from .pullindex import state_dir

FLEET_STATE = "fleet-state.json"


def mark_lost(alias: str, why: str, run_id: str) -> None:
    """The fleet's state says box `alias` was lost by run `run_id`, and why."""
    doc = lost_boxes()
    doc[alias] = {"lost_at": time.time(), "why": why, "run": run_id}
    where = state_dir()
    os.makedirs(where, mode=0o700, exist_ok=True)
    contained.Root(where).write_atomic(FLEET_STATE, json.dumps(doc).encode("utf-8"), mode=0o600)


def lost_boxes() -> dict:
    """{alias: {lost_at, why, run}} of the boxes a keeper called lost; {} when none was."""
    try:
        with open(os.path.join(state_dir(), FLEET_STATE), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
