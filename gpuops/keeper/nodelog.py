"""One node's log of a kept gang (`gpuops logs RUN --node N`), read from the keeper's record and vault.

A node is N, its index in the current attempt (0: the head), or a box's alias: the last attempt that
box was a node of. A node whose box was lost no longer answers, so its log is the vault's copy (the
keeper copies every node's log with each checkpoint and at least each LOGS_EVERY_S, to
VAULT/RUN/boxes/N-BOX/JOB/log: gpuops.keeper.loop): the last bytes copied before the loss. A node on a
box that still answers is read on the box, as any job's log is.
"""

import os

from .. import errors
from ..envelope import envelope
from . import remotevault, vault

MAX_BYTES = 1 << 20  # the most of the vault's copy a page reads
LOG = "log"


def locate(rec: dict, node: str) -> dict:
    """{attempt (from 1), index, box, job, lost (why, or None)} of `node` in the kept run `rec`;
    UsageError when the run has no such node."""
    attempts = rec["attempts"]
    if node.isdigit():
        nodes = attempts[-1].get("nodes") or [{"box": attempts[-1]["box"], "job": attempts[-1]["job"]}]
        if int(node) >= len(nodes):
            raise errors.UsageError(f"--node {node}: attempt {len(attempts)} of run {rec['run_id']} has nodes 0 to "
                                    f"{len(nodes) - 1}")
        n, i = len(attempts), int(node)
    else:
        found = [(k + 1, i) for k, att in enumerate(attempts) for i, x in enumerate(att.get("nodes") or [att])
                 if x["box"] == node]
        if not found:
            boxes = sorted({x["box"] for att in attempts for x in att.get("nodes") or [att]})
            raise errors.UsageError(f"--node {node[:60]!r}: no node of run {rec['run_id']} ran on it (its boxes: "
                                    f"{', '.join(boxes)})")
        n, i = found[-1]
    att = attempts[n - 1]
    picked = (att.get("nodes") or [att])[i]
    return {"attempt": n, "index": i, "box": picked["box"], "job": picked["job"],
            "lost": (rec.get("lost") or {}).get(picked["box"])}


def copied(rec: dict, where: dict) -> str | None:
    """The vault's copy of the node's newest log on this machine (for a HOST:DIR vault, the verified
    copy the keeper pushed from here), or None when none was copied."""
    top = remotevault.vault_of(rec["spec"], rec["run_id"]).landing(vault.BOXES, f"{where['attempt']}-{where['box']}")
    try:
        jobs = [os.path.join(top, j, LOG) for j in os.listdir(top) if vault.plain(j)]
    except OSError:
        return None
    logs = [p for p in jobs if os.path.isfile(p) and not os.path.islink(p)]
    return max(logs, key=lambda p: (os.stat(p).st_mtime, p)) if logs else None


def page(rec: dict, where: dict, tail: int, sink=None) -> dict:
    """The last `tail` lines of the vault's copy of the node's log (at most MAX_BYTES): to `sink`, or
    in data.text for --json. NotFound when the keeper copied none before the box was lost."""
    path = copied(rec, where)
    label = f"node {where['index']} of attempt {where['attempt']} on {where['box']} (job {where['job']})"
    if path is None:
        raise errors.NotFound(f"run {rec['run_id']}: {label}: the vault holds no copy of its log")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(max(0, size - MAX_BYTES))
        raw = f.read(MAX_BYTES)
    lines = raw.splitlines(keepends=True)
    text = b"".join(lines[-tail:]) if tail else b""
    data = {"job_id": where["job"], "node": where["index"], "box": where["box"], "attempt": where["attempt"],
            "lost": where["lost"], "vault_copy": path, "log_size": size, "bytes": len(text)}
    if sink is None:
        data["text"] = text.decode("utf-8", "replace")
    else:
        sink(text)
    return envelope("logs", ok=True, summary=f"run {rec['run_id']}: {label}: its box was lost ({where['lost']}); the "
                                            f"last {len(text)} bytes of the log the vault holds ({size} bytes)",
                    data=data)
