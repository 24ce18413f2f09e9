"""`launch --fleet FILE --vault DIR`: the run's first attempt, launched here and now (so a fleet with
no fitting box, or a launch the box refuses, is answered at once), then its keeper, detached: a
process of its own session that outlives the terminal, with a pid file and a log in the state dir
(gpuops.keeper.record). The run's id is its first attempt's; it stays the run's on every box."""

import os
import subprocess
import sys
import time

from .. import errors
from ..onbox.run import boxpolicy as onbox_policy
from ..envelope import CODE_KEY, envelope
from . import attempt, gangattempt, loop, record, remotehost, remotevault, rules, vault
from typing import Optional

MIN_POLL_S = 1.0
GPUOPS_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spec_of(*, command, fleet, vault_dir, policy, request, lost_after_s=None, keep=None, stop_when_done=False,
            outputs=(), name: Optional[str]=None, env=None, workdir=None, jobs_dir=None, poll_s=None, gang=None, budget_usd=None,
            stop_idle_s=None) -> dict:
    """What the keeper needs to launch the run again anywhere, checked: a vault needs the run's
    checkpoints (--checkpoint-dir) and a way to resume from one (--resume-arg, or `{checkpoint}` in
    the command itself). `gang`: {hosts (the first attempt's nodes, each a box of the fleet),
    nproc_per_node, rdzv_port, nnodes ('MIN:MAX' or None), max_restarts} for a torchrun gang.
    `budget_usd`: the ledger's money at which the run is evacuated and its boxes stopped;
    `stop_idle_s`: once the run completed, each box idle this long is stopped."""
    if stop_when_done and stop_idle_s:
        raise errors.UsageError("give --stop-when-done (stop at once) or --stop-idle DURATION (once idle), not both")
    resumes = bool(policy and (policy.get("resume_arg") or onbox_policy.PLACEHOLDER in (command or "")))
    if not policy or not policy.get("checkpoint_dir") or not resumes:
        raise errors.UsageError("--vault keeps the run's checkpoints: give --checkpoint-dir DIR[:GLOB] and "
                                "--resume-arg '... {checkpoint}' (or {checkpoint} in --cmd) too")
    for out in outputs:
        if not out or "\0" in out or not vault.plain(os.path.basename(out.rstrip("/"))):
            raise errors.UsageError(f"--output {out!r}: a path on the box whose last part is a plain name")
    if os.sep in fleet or fleet.endswith(".toml"):  # a fleet file of its own: the keeper runs elsewhere (cwd /)
        fleet = os.path.abspath(os.path.expanduser(fleet))
    host, where = vault.parse(vault_dir)
    spec = {"command": command, "fleet": fleet, "vault_host": host,
            "vault": where if host else os.path.abspath(os.path.expanduser(where)),
            "policy": policy, "request": request, "lost_after_s": lost_after_s or rules.LOST_AFTER_S,
            "keep": keep or policy.get("keep_checkpoints") or rules.KEEP, "stop_when_done": bool(stop_when_done),
            "outputs": list(outputs), "name": name, "env": env or {}, "workdir": workdir, "jobs_dir": jobs_dir,
            "gang": gang, "budget_usd": budget_usd, "stop_idle_s": stop_idle_s}
    # at least four looks within --lost-after, at most one each POLL_S
    spec["poll_s"] = poll_s or max(MIN_POLL_S, min(loop.POLL_S, spec["lost_after_s"] / 4))
    return spec


def launch(spec, identity=None, keeper_host: Optional[str] = None) -> dict:
    """The launch envelope of the run's first attempt, with data.keeper; exit 5 when no box fits.
    With `keeper_host`, the keeper runs there (gpuops.keeper.remotehost), checked before anything starts."""
    began = time.time()
    away = remotehost.KeeperHost.ready(keeper_host, spec) if keeper_host else None
    if spec.get("gang"):
        att, doc = _gang(spec, identity)
        run_id, box = att["gang_id"], None
    else:
        box, gpus, why = attempt.place(spec, set(), identity)
        if box is None:
            out = envelope("launch", ok=False, summary=f"{why}; nothing was launched", data={"placement": why})
            out[CODE_KEY] = errors.REFUSED
            return out
        att, doc = attempt.launch(spec, box, gpus, identity=identity)
        run_id = att["job"]
    label = ",".join(n["box"] for n in att.get("nodes") or [att])
    kept = remotevault.vault_of(spec, run_id).make()  # made now: a vault that cannot be written fails here
    if isinstance(kept, remotevault.RemoteVault):
        spec["vault"] = kept.base  # the host's DIR, absolute
    rec = {"run_id": run_id, "spec": spec, "phase": record.RUNNING, "attempts": [att], "lost": {}, "events": [],
           "marks": [{"kind": "launch", "at": began, "box": label, "usd_per_hour": att["usd_per_hour"]},
                     {"kind": "running", "at": att["launched_at"], "box": label, "usd_per_hour": att["usd_per_hour"]}],
           "started_at": began}
    record.event(rec, "launched", box=label, job=run_id,
                 why=f"placed on {box.alias}: GPUs {gpus}" if box else f"gang {run_id} on {label}")
    if away is not None:
        rec["keeper_host"] = away.where  # before the hand-over: a stop asked meanwhile follows it there
    record.write(rec)
    doc["host"] = att["box"]
    if away is None:
        there = {"pid": spawn(run_id), "log": record.path(run_id, record.LOG)}
    else:
        try:
            there = away.take(rec)
        except errors.GpuopsError as e:  # the run is started: said, and never a second keeper started here
            doc.update(ok=False, summary=f"{doc['summary']}; but its keeper did not start on {keeper_host}: "
                                         f"{e.message} (gpuops status {run_id} asks it again)")
            doc[CODE_KEY] = e.exit_code
            return doc
    on = f" on {keeper_host}" if away else ""
    doc["summary"] += f"; kept by keeper pid {there['pid']}{on}, vault {kept.root}"
    doc["data"]["keeper"] = {"pid": there["pid"], "host": keeper_host, "vault": kept.root,
                             "record": record.path(run_id, record.RECORD), "log": there["log"],
                             "lost_after_s": spec["lost_after_s"]}
    return doc


def _gang(spec, identity) -> tuple:
    """The first attempt of a kept gang on its --host boxes (each of the fleet file, for its price and
    stop command): (its record, the launch envelope)."""
    by_alias = {b.alias: b for b in attempt.candidates(spec, set())}
    missing = [h for h in spec["gang"]["hosts"] if h not in by_alias]
    if missing:
        raise errors.UsageError(f"--vault --torchrun: {', '.join(missing)} is not a box of the fleet {spec['fleet']} "
                                "(the keeper needs its price and its stop command)")
    att = gangattempt.launch(spec, [by_alias[h] for h in spec["gang"]["hosts"]], identity=identity)
    doc = envelope("launch", ok=True, summary=f"started gang {att['gang_id']} on {', '.join(spec['gang']['hosts'])}",
                   data={"job": {"job_id": att["gang_id"]}, "gang": {"gang_id": att["gang_id"], "nodes": att["nodes"]}})
    return att, doc


def spawn(run_id) -> int:
    """The keeper of `run_id` as a detached process (its own session, stdin closed, output to its
    log), named in the pid file before this returns; its pid. Refused while another keeper lives."""
    if (record.keeper_alive(run_id) or {}).get("alive"):
        raise errors.Refused(f"run {run_id} already has a live keeper")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (GPUOPS_ROOT, env.get("PYTHONPATH")) if p)
    with open(record.path(run_id, record.LOG), "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gpuops.keeper", run_id], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd="/")
    record.name_keeper(run_id, proc.pid)
    return proc.pid
