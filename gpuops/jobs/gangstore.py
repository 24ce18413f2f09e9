"""Where a gang's record lives: on this machine, <state dir>/gangs/<gang id>.json (mode 0600).

Why here and not on the head box: the record's hosts are this machine's names for the boxes (its
ssh_config aliases), which mean nothing on the boxes themselves, and the gang verbs run here. What
a box needs to know is on the box already: each node's job carries the labels gang, gang_node and
gang_nodes, so `gpuops status --host H --label gang=ID` finds a node from anywhere even when this
record is gone. Job ids in the record come from the boxes, so the record is written through
gpuops.contained (no symlink in the state dir is followed) and read back shape-checked.
"""

import json
import os

from .. import contained
from ..errors import NotFound, UsageError
from ..pullindex import state_dir
from . import gang

DIRECTORY = "gangs"
_RECORD = {"gang_id": str, "created_at": (int, float), "spec": dict, "rendezvous": dict, "nodes": list}
_NODE = {"index": int, "host": str}


def _root():
    os.makedirs(state_dir(), mode=0o700, exist_ok=True)
    return contained.Root(state_dir())


def save(record) -> str:
    """Write `record` (atomically); its path."""
    gang_id = record["gang_id"]
    if not gang.is_id(gang_id):
        raise ValueError(f"not a gang id: {gang_id!r}")
    root = _root()
    root.makedirs(DIRECTORY)
    rel = f"{DIRECTORY}/{gang_id}.json"
    root.write_atomic(rel, json.dumps(record, indent=2, sort_keys=True).encode("utf-8"), mode=0o600)
    return os.path.join(state_dir(), rel)


def load(gang_id) -> dict:
    """The record of `gang_id`; NotFound when this machine has none, UsageError when it is not
    one gpuops wrote."""
    if not gang.is_id(gang_id):
        raise UsageError(f"--gang {gang_id!r} is not a gang id (launch --torchrun prints one: gang-YYYYMMDD-...)")
    path = os.path.join(state_dir(), DIRECTORY, f"{gang_id}.json")
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except FileNotFoundError:
        raise NotFound(f"no record of gang {gang_id} on this machine ({path}); its nodes carry the label "
                       f"gang={gang_id}: gpuops status --host H --label gang={gang_id}") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not a gang record gpuops can read: {e}") from None
    problem = _problem(record)
    if problem:
        raise UsageError(f"{path}: not a gang record gpuops wrote: {problem}")
    return record


def _problem(record):
    if not isinstance(record, dict):
        return "not an object"
    for key, kind in _RECORD.items():
        if not isinstance(record.get(key), kind):
            return f"{key!r} is missing or of the wrong type"
    for node in record["nodes"]:
        if not isinstance(node, dict) or any(not isinstance(node.get(k), t) for k, t in _NODE.items()):
            return "a node entry lacks its index or host"
    return None
