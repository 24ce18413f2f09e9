"""A gang: one torchrun job across several boxes, as a record of records (pure rules).

Each node is an ordinary box job (its own directory, supervisor, log and exit record on its box)
labelled with the gang id and its node index; the gang record (gpuops.jobs.gangstore) lists them
with the rendezvous facts. The gang's state is derived from its nodes' states here, by the same
table (gpuops.states):

    a node ended badly, others still alive    DEGRADED, naming the first node that ended badly
    every node ended, some badly              FAILED, naming the first node that ended badly (or
                                              KILLED, VANISHED when every node that ended badly
                                              ended so, as a gang `gpuops stop` took down)
    a node could not be asked, none failed    UNREACHABLE, naming it (says nothing about the job)
    every node COMPLETED                      COMPLETED
    otherwise                                 the least healthy live state (STALLED before
                                              STARTING before RUNNING): RUNNING only when every
                                              node runs (or has completed while the rest run)

"First" is by the node's exit time on its own box's clock; the gang preflight refused clocks
further apart than gpuops.jobs.gangcheck.CLOCK_TOLERANCE_S.
"""

import os
import re
import time

from .. import states

PREFIX = "gang-"
GANG_ID = re.compile(r"^gang-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")
LABEL, NODE_LABEL, NODES_LABEL = "gang", "gang_node", "gang_nodes"


def new_id(now=None) -> str:
    """A fresh gang id ('gang-20261124-194655-a1b2c3'): also the rendezvous id, so a stale
    rendezvous of an earlier run is never joined."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{PREFIX}{stamp}-{os.urandom(3).hex()}"


def is_id(value) -> bool:
    return isinstance(value, str) and bool(GANG_ID.match(value))


def labels(gang_id, index, nnodes) -> dict:
    """The labels of node `index`'s job: `status --label gang=ID` on any box finds its node."""
    return {LABEL: gang_id, NODE_LABEL: str(index), NODES_LABEL: str(nnodes)}


def node_name(index, host: str) -> str:
    return f"node {index} ({host})"


def _describe(node):
    row = node["row"]
    text = f"{node_name(node['index'], node['host'])} {row['state']}"
    if row.get("exit_code") is not None:
        text += f" (exit {row['exit_code']})"
    if row.get("signal"):
        text += f" ({row['signal']})"
    if row.get("reason") and row["state"] in (states.VANISHED, states.UNREACHABLE, states.STALLED):
        text += f": {row['reason']}"
    return text


def first_failed(nodes):
    """The node that ended badly first (by its exit time, then its index), or None."""
    bad = [n for n in nodes if n["row"]["state"] in states.TERMINAL and n["row"]["state"] != states.COMPLETED]
    if not bad:
        return None
    return min(bad, key=lambda n: (n["row"].get("ended_at") is None, n["row"].get("ended_at") or 0, n["index"]))


_LIVE_ORDER = (states.STALLED, states.STARTING, states.RUNNING)


def aggregate(nodes) -> dict:
    """{state, reason, first_failed} of a gang from its nodes ([{index, host, row}], row a status
    row of gpuops.engines.statusrow)."""
    by_state: dict = {}
    for n in nodes:
        by_state.setdefault(n["row"]["state"], []).append(n)
    alive = [n for n in nodes if n["row"]["state"] in states.ALIVE]
    first = first_failed(nodes)
    if first is not None:
        told = _describe(first)
        if alive:
            return {"state": states.DEGRADED, "first_failed": first["index"],
                    "reason": f"{told}; {len(alive)} node(s) still running, but the gang cannot finish as launched"}
        bad = [n for n in nodes if n["row"]["state"] != states.COMPLETED]
        alike = len({n["row"]["state"] for n in bad}) == 1
        others = [_describe(n) for n in bad if n is not first]
        return {"state": first["row"]["state"] if alike else states.FAILED, "first_failed": first["index"],
                "reason": f"{told} first" + (f"; then {', '.join(others)}" if others else "")}
    lost = by_state.get(states.UNREACHABLE)
    if lost:
        return {"state": states.UNREACHABLE, "first_failed": None,
                "reason": "; ".join(_describe(n) for n in lost) + " (this says nothing about the job there)"}
    if len(by_state.get(states.COMPLETED, ())) == len(nodes):
        return {"state": states.COMPLETED, "first_failed": None, "reason": None}
    state = next(s for s in _LIVE_ORDER + tuple(by_state) if s in by_state)
    done = by_state.get(states.COMPLETED)
    reason = None
    if state != states.RUNNING:
        reason = "; ".join(_describe(n) for n in by_state[state])
    elif done:
        reason = f"{', '.join(node_name(n['index'], n['host']) for n in done)} completed; waiting on the rest"
    return {"state": state, "first_failed": None, "reason": reason}
