"""What this machine knows of a fleet's boxes beyond the fleet file: the boxes a keeper called lost,
and why (gpuops.keeper.loop marks them; `gpuops fleet` shows them).

    <state dir>/fleet-state.json   {alias: {lost_at, why, run}}

The file is replaced whole (a reader sees the old one or the new one).
"""

import time

from .pullindex import read_state, write_state

FLEET_STATE = "fleet-state.json"


def mark_lost(alias: str, why: str, run_id: str) -> None:
    """The fleet's state says box `alias` was lost by run `run_id`, and why."""
    doc = lost_boxes()
    doc[alias] = {"lost_at": time.time(), "why": why, "run": run_id}
    write_state(FLEET_STATE, doc)


def lost_boxes() -> dict:
    """{alias: {lost_at, why, run}} of the boxes a keeper called lost; {} when none was."""
    return read_state(FLEET_STATE)
