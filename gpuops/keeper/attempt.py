"""One attempt of a kept run on a box: place it (the fleet asked at once, gpuops.ops.fleet, judged by
gpuops.placement) on a fitting box the run never lost, push the newest verified checkpoint from the
vault to where the run looks for it there, and launch the run (gpuops.ops.jobs) with its policy and
the resume argument naming that checkpoint. The run's own supervisor on the box then retries it
there as its policy says; the keeper moves it only when the box is lost."""

import json
import os
import posixpath
import time

from .. import errors, fleetfile, placement
from ..onbox.run import boxpolicy as onbox_policy
from ..ops import fleet, jobs, push
from ..ops import sync as S
from ..remote.targets import target_for
from . import vault
from .vault import only

CALL_S = 30.0
MAX_LISTED = 200  # checkpoints of one answer looked at
PUSH_RETRY_S = 60.0


def ask(target, action, opts, timeout_s=CALL_S) -> dict:
    """The box's keeper facts (gpuops.onbox.facts.keeper_facts) for `action`."""
    doc = target.run_onbox("keeper_facts", [action], stdin=json.dumps(opts).encode("utf-8"), timeout_s=timeout_s)
    if doc.get("error"):
        jobs.raise_reported(target, doc["error"])
    return doc


def checked_run(answer) -> dict:
    """The box's `run` answer with only what a keeper may act on: checkpoints with a plain name, a kind
    of "dir" or "file" (none: a directory), a whole step (or none) and a number for an mtime (others
    dropped, never copied); the best only when it is one of them; directories that are absolute paths
    with a plain last part."""
    ck = answer.get("checkpoints")
    if isinstance(ck, dict):
        complete = [c for c in ck.get("complete") or [] if isinstance(c, dict) and vault.plain(c.get("name"))
                    and c.get("kind") in (None, "dir", vault.FILE)
                    and (c.get("step") is None or type(c.get("step")) is int)
                    and (c.get("mtime") is None or type(c.get("mtime")) in (int, float))][:MAX_LISTED]
        names = {c["name"] for c in complete}
        where = ck.get("dir")
        best = ck["best"] if isinstance(ck.get("best"), list) else []
        answer["checkpoints"] = {"dir": where if isinstance(where, str) and where.startswith("/") else None,
                                 "complete": complete, "best": [b for b in best if b in names]}
        if answer["checkpoints"]["dir"] is None:
            answer["checkpoints"] = None
    else:
        answer["checkpoints"] = None
    for key in ("run_dir", "attempt_dir"):
        path = answer.get(key)
        if not (isinstance(path, str) and path.startswith("/") and vault.plain(path.rsplit("/", 1)[-1])):
            answer[key] = None
    return answer


def candidates(spec, lost) -> list:
    """The fleet's boxes (fleetfile.Box) this run may use: its fleet less every box it lost."""
    return [b for b in fleetfile.boxes(spec["fleet"]) if b.alias not in lost]


def place(spec, lost, identity=None):
    """(Box, [GPU indices], the placement's summary) of the box this attempt goes to, or (None, None,
    why) when no box of the fleet fits now."""
    boxes = candidates(spec, lost)
    if not boxes:
        return None, None, "every box of the fleet was lost by this run"
    view = fleet.inventory(boxes, window_s=spec.get("window_s", 0.5), identity=identity)
    chosen = placement.place(view["data"]["hosts"], spec["request"])
    if chosen["host"] is None:
        return None, None, chosen["summary"]
    return next(b for b in boxes if b.alias == chosen["host"]), chosen["gpus"], chosen["summary"]


def command_resuming(spec, checkpoint_path) -> str:
    """The run's command line resuming from `checkpoint_path` (quoted): where its `{checkpoint}`
    stands, else its --resume-arg at its end (gpuops.onbox.run.boxpolicy.resumed, the box's own rule)."""
    _, _, command = onbox_policy.resumed("cmd", spec["command"].encode("utf-8"), None, spec["command"],
                                         spec["policy"].get("resume_arg"), checkpoint_path)
    return command


def push_checkpoint(target, alias, vault, name, dst) -> None:
    """Vault checkpoint `name`, hashed against its manifest first (a remote vault's fetched here by a
    verified pull), pushed (verified) to `dst` on the box. One that is a file goes as the one entry the
    rules carry of the directory holding it, into `dst`'s directory (a push's ends are directories)."""
    try:
        src = vault.checkout(name)
        one = os.path.isfile(src)
        doc = push.push(target, os.path.dirname(src) if one else src, posixpath.dirname(dst) if one else dst,
                        S.Options(excludes=only(os.path.basename(src)) if one else (),
                                  retry_for=PUSH_RETRY_S))
    finally:
        vault.checked_in(name)
    if not doc["ok"]:
        raise errors.HostError(f"{alias}: pushing checkpoint {name} failed: {doc['summary']}")


def launch(spec, box, gpus, resume=None, vault=None, identity=None) -> tuple:
    """Launch the run on `box` (after pushing checkpoint `resume` from `vault` there): (the attempt's
    record {box, job, boot_id, workdir, checkpoint_dir, launched_at, resumed_from, usd_per_hour,
    command}, the launch's envelope)."""
    target = target_for(box.alias, identity)
    try:
        where = ask(target, "where", {"workdir": spec.get("workdir"), "checkpoint_dir":
                                      spec["policy"].get("checkpoint_dir")})
        command = spec["command"]
        if not str(where.get("checkpoint_dir") or "").startswith("/"):
            raise errors.BadAnswer(f"{box.alias}: the box named no absolute checkpoint directory for the run")
        if resume:
            dst = f"{where['checkpoint_dir']}/{resume}"
            push_checkpoint(target, box.alias, vault, resume, dst)
            command = command_resuming(spec, dst)
        doc = jobs.launch(target, command=command, name=spec.get("name"), env=spec.get("env") or {},
                          workdir=spec.get("workdir"), gpus=",".join(map(str, gpus)) if gpus else None,
                          jobs_dir=spec.get("jobs_dir"), policy=spec["policy"])
    finally:
        target.close()
    if not doc["ok"]:
        raise errors.Refused(f"{box.alias}: the launch failed: {doc['summary']}")
    return ({"box": box.alias, "job": doc["data"]["job"]["job_id"], "boot_id": where.get("boot_id"),
            "workdir": where["workdir"], "checkpoint_dir": where.get("checkpoint_dir"), "launched_at": time.time(),
            "resumed_from": resume, "usd_per_hour": box.usd_per_hour, "command": command}, doc)
