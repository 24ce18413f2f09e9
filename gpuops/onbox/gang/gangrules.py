"""The rules of a gang run's link between its nodes' supervisors (pure; the sockets are
gpuops.onbox.gang.ganglink's): when the survivors are stopped, which node's failure decides the gang's
retry, and what a message from another box may hold.

A gang run has one supervisor per node (each runs its own attempts, gpuops.onbox.run.runloop); the
head's (node 0, the rendezvous host) listens, every other node's connects to it and says each
round that it is alive. The head decides for the gang; the workers report and obey.

When the survivors are stopped, during an attempt (`verdict`):

    a node's process ended other than exit 0      at once: the collective it was in can never
                                                  complete (NCCL blocks on a dead peer until its
                                                  timeout, 10 to 30 minutes, or forever)
    a node fell silent for LOST_S (or its link    its box or its supervisor is gone (a lost node
    closed, or it never joined within JOIN_S)     sends no exit)
    a node completed and this one still runs      after CLEAN_GRACE_S: the last steps of a run end
    CLEAN_GRACE_S later                           at slightly different times on each node

Which node decides (`deciding`): one ended by `gpuops stop` (the user's word ends the gang), else
the node whose attempt ended badly first by its own clock (the gang preflight refused clocks far
apart), never one the gang itself stopped ("peer-lost"); else a lost node, as a peer loss; else
(every node exited 0) the head.
"""

import json

BEAT_S = 2.0
LOST_S = 20.0
JOIN_S = 120.0
CLEAN_GRACE_S = 60.0
LINE_MAX = 64 << 10
TOKEN_LEN = 32
KINDS = ("hello", "beat", "down", "ended", "stop", "next", "end")
# What one node's facts may carry to the head (retrypolicy.decide's inputs), and their types.
FACTS = {"exit_code": int, "signal": str, "ended_by": str, "oom_before": int, "oom_after": int, "job_pids": list,
         "outside_signal": str, "kernel_readable": bool, "kernel_oom": list, "xids": list, "triage_class": str,
         "vanished": bool, "at": float}
LIST_MAX = 256
TEXT_MAX = 200


def _text(value, most=TEXT_MAX):
    return value[:most] if isinstance(value, str) else None


def clean_facts(raw):
    """A node's facts as the head may use them: known keys of the right type, lists and text
    bounded; the rest dropped. The other box is untrusted input."""
    out = {}
    if not isinstance(raw, dict):
        return out
    for key, kind in FACTS.items():
        value = raw.get(key)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and kind is not bool:
            continue
        if not isinstance(value, kind):
            continue
        if kind is str:
            value = value[:TEXT_MAX]
        elif kind is list:
            value = [v for v in value[:LIST_MAX] if isinstance(v, (int, dict))
                     and not isinstance(v, bool)]
            value = [dict((str(k)[:40], v2 if isinstance(v2, (int, float)) else _text(v2))
                          for k, v2 in list(v.items())[:8]) if isinstance(v, dict) else v for v in value]
        out[key] = value
    return out


def parse(line, token):
    """The message of one line from the other end, or None when it is not one of ours: not JSON,
    too long, an unknown kind, or (a hello) the wrong token."""
    if not isinstance(line, bytes) or len(line) > LINE_MAX:
        return None
    try:
        msg = json.loads(line.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("t") not in KINDS:
        return None
    attempt = msg.get("attempt")
    if attempt is not None and (isinstance(attempt, bool) or not isinstance(attempt, int) or not 0 < attempt < 1000):
        return None
    if msg["t"] == "hello":
        node = msg.get("node")
        if msg.get("token") != token or isinstance(node, bool) or not isinstance(node, int) or not 0 < node < 1000:
            return None
    out = {"t": msg["t"], "attempt": attempt}
    if msg["t"] == "hello":
        out["node"] = msg["node"]
    elif msg["t"] == "down":
        out.update(clean=msg.get("clean") is True, at=clean_facts({"at": msg.get("at")}).get("at"))
    elif msg["t"] == "ended":
        out["facts"] = clean_facts(msg.get("facts"))
    elif msg["t"] in ("stop", "end", "next"):
        out["why"] = _text(msg.get("why"), 2000)
        out["class"] = _text(msg.get("class"))
        out["checkpoint"] = _text(msg.get("checkpoint"), 4096)
        out["retry"] = msg.get("retry") is True
    return out


def encode(msg):
    return (json.dumps(msg, sort_keys=True) + "\n").encode("utf-8")


def verdict(now, attempt, nodes, started_at, own_clean_at=None):
    """Why this node's attempt must stop now (a sentence), or None. `nodes` is {index: {seen,
    joined, closed, down: {attempt, clean, at}}} of the OTHER nodes as this node knows them;
    `started_at` when this link started listening for them; `own_clean_at` when this node's own
    attempt exited 0 (the head, waiting on the rest)."""
    for index in sorted(nodes):
        n = nodes[index]
        down = n.get("down") or {}
        if down.get("attempt") == attempt and not down.get("clean"):
            return "node %d's process ended (attempt %d): its peers' collectives can never complete" % (index, attempt)
    for index in sorted(nodes):
        n = nodes[index]
        down = n.get("down") or {}
        if down.get("attempt") == attempt:
            continue  # ended and said so: not lost
        if n.get("closed"):
            return "node %d's supervisor closed its link to the gang: the node is lost" % index
        if n.get("seen") is None:
            if now - started_at > JOIN_S:
                return "node %d never joined the gang's link in %gs" % (index, JOIN_S)
        elif now - n["seen"] > LOST_S:
            return "node %d has not been heard from for %.0fs: the node is lost" % (index, now - n["seen"])
    clean = [n["down"]["at"] or now for n in nodes.values()
             if (n.get("down") or {}).get("attempt") == attempt and n["down"].get("clean")]
    if own_clean_at is None and clean and now - min(clean) > CLEAN_GRACE_S:
        return "another node completed %.0fs ago and this one still runs" % (now - min(clean))
    return None


def all_reported(nodes, attempt):
    """Whether every other node has sent its facts for `attempt`."""
    return all((n.get("ended") or {}).get("attempt") == attempt for n in nodes.values())


def deciding(own, reports, attempt):
    """(node index, facts) whose end decides the gang's attempt: see the module's docstring.
    `own` is the head's facts; `reports` is {index: facts, or None for a node lost before it
    reported}."""
    every = dict(reports)
    every[0] = own
    stopped = [i for i in sorted(every) if (every[i] or {}).get("ended_by") == "stop"]
    if stopped:
        return stopped[0], every[stopped[0]]
    failed = [(f.get("at") is None, f.get("at") or 0.0, i) for i, f in every.items()
              if f is not None and f.get("ended_by") != "peer-lost"
              and not (f.get("exit_code") == 0 and not f.get("signal"))]
    if failed:
        index = min(failed)[2]
        return index, every[index]
    lost = [i for i in sorted(every) if every[i] is None]
    if lost:
        return lost[0], {"ended_by": "peer-lost", "exit_code": None}
    peer = [i for i in sorted(every) if every[i].get("ended_by") == "peer-lost"]
    if peer:
        return peer[0], every[peer[0]]
    return 0, own
