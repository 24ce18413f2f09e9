"""One attempt of a kept gang (`launch --torchrun --host a,b --fleet F --vault DIR`): torchrun over
several boxes (gpuops.ops.gang: its preflight, one run per node with the link between their
supervisors). Before the launch every node's box is asked where the run's checkpoints live there and
gets the vault's newest verified checkpoint pushed there, so each rank can load it. The resumed
command names the checkpoint by the run's own --checkpoint-dir (relative to the job's working
directory, as the job sees it), the same words on every node whatever each box's home is.

When a node's box is lost, the keeper stops what still runs of the gang on the others (by the job ids
its own attempt record holds: never another process), keeps them, and fills the gang up again from
the fleet; with --nnodes MIN:MAX it goes on with fewer nodes when the fleet has no fitting box, as
long as MIN are left."""

import time

from .. import errors, fleetfile, placement
from ..ops import fleet, gang, jobs, push
from ..ops import sync as S
from ..remote.targets import target_for
from . import attempt

STOP_GRACE_S = 10.0


def smallest(spec) -> int:
    """The fewest nodes the gang may run on: MIN of --nnodes MIN:MAX, else all it started with."""
    nnodes = spec["gang"].get("nnodes")
    return int(nnodes.split(":")[0]) if nnodes else len(spec["gang"]["hosts"])


def place(spec, lost, keep, identity=None) -> tuple:
    """([Box] of the next attempt: the nodes `keep` (aliases, in order) then fitting boxes of the
    fleet this run never lost, up to the gang's size), why it has fewer (or None)."""
    by_alias = {b.alias: b for b in fleetfile.boxes(spec["fleet"])}
    chosen = [by_alias[a] for a in keep if a in by_alias]
    want = len(spec["gang"]["hosts"]) - len(chosen)
    spare = [b for b in attempt.candidates(spec, lost) if b.alias not in keep]
    if want <= 0 or not spare:
        return chosen, None if want <= 0 else "every other box of the fleet was lost by this run or is in the gang"
    rows = fleet.inventory(spare, window_s=spec.get("window_s", 0.5), identity=identity)["data"]["hosts"]
    why = None
    while want > 0:
        picked = placement.place(rows, spec["request"])
        if picked["host"] is None:
            why = picked["summary"]
            break
        chosen.append(by_alias[picked["host"]])
        rows = [r for r in rows if r["host"] != picked["host"]]
        want -= 1
    return chosen, why


def launch(spec, boxes, resume=None, vault=None, identity=None) -> dict:
    """The gang on `boxes` (node 0 first), from vault checkpoint `resume`: the attempt's record, whose
    box and job are the head's (its checkpoints are the ones copied) and whose nodes are all of them."""
    wheres, command = [], spec["command"]
    for box in boxes:
        target = target_for(box.alias, identity)
        try:
            where = attempt.ask(target, "where", {"workdir": spec.get("workdir"),
                                                  "checkpoint_dir": spec["policy"].get("checkpoint_dir")})
            if not str(where.get("checkpoint_dir") or "").startswith("/"):
                raise errors.BadAnswer(f"{box.alias}: the box named no absolute checkpoint directory for the run")
            if resume:
                attempt.push_checkpoint(target, box.alias, vault, resume, f"{where['checkpoint_dir']}/{resume}")
        finally:
            target.close()
        wheres.append(where)
    if resume:
        command = attempt.command_resuming(spec, f"{spec['policy']['checkpoint_dir'].rstrip('/')}/{resume}")
    g = spec["gang"]
    nnodes = g.get("nnodes")
    if nnodes and int(nnodes.split(":")[0]) > len(boxes):
        raise errors.Refused(f"--nnodes {nnodes}: {len(boxes)} node(s) are fewer than its minimum")
    doc = gang.launch([b.alias for b in boxes], cmd=command, nproc_per_node=g["nproc_per_node"], port=g["rdzv_port"],
                      name=spec.get("name"), env=spec.get("env") or {}, workdir=spec.get("workdir"),
                      jobs_dir=spec.get("jobs_dir"), identity=identity, policy=spec["policy"],
                      max_restarts=g.get("max_restarts"), nnodes=nnodes)
    if not doc["ok"]:
        started = [n for n in ((doc.get("data") or {}).get("gang") or {}).get("nodes") or [] if n.get("job_id")]
        stop([{"box": n["host"], "job": n["job_id"]} for n in started], spec.get("jobs_dir"), identity)
        raise errors.Refused(f"the gang on {', '.join(b.alias for b in boxes)} did not start: {doc['summary']}")
    nodes = [{"box": n["host"], "job": n["job_id"], "boot_id": w.get("boot_id")}
             for n, w in zip(doc["data"]["gang"]["nodes"], wheres)]
    prices = [b.usd_per_hour for b in boxes]
    return {"box": boxes[0].alias, "job": nodes[0]["job"], "boot_id": nodes[0]["boot_id"],
            "gang_id": doc["data"]["gang"]["gang_id"], "nodes": nodes, "workdir": wheres[0]["workdir"],
            "checkpoint_dir": wheres[0]["checkpoint_dir"], "launched_at": time.time(), "resumed_from": resume,
            "usd_per_hour": None if None in prices else sum(prices), "command": command}


def stop(nodes, jobs_dir=None, identity=None) -> list:
    """Stop the runs of `nodes` [{box, job}] (a stop wins over their supervisors' retries): the
    [(box, why)] that could not be stopped (a box that does not answer is left alone)."""
    failed = []
    for node in nodes:
        try:
            target = target_for(node["box"], identity)
            try:
                doc = jobs.stop(target, job=node["job"], grace=STOP_GRACE_S, yes=True, jobs_dir=jobs_dir)
            finally:
                target.close()
            if not doc["ok"]:
                failed.append((node["box"], doc["summary"]))
        except errors.GpuopsError as e:
            failed.append((node["box"], e.message))
    return failed
