"""What the keeper keeps on this machine, in the state dir (gpuops.pullindex.state_dir):

    keeper/RUN/record.json   the run across boxes: its launch spec, attempts (box, job, boot id,
                             why it ended), lost boxes, vault, ledger marks, events, phase (the boxes it lost are in gpuops.fleetstate)
    keeper/RUN/keeper.pid    {pid, start_ticks} of the keeper process looking after it
    keeper/RUN/keeper.log    what that process wrote
    keeper/RUN/stop.json     `gpuops stop` of the run: written by the stop, read by the keeper at each look

Each file is replaced whole (a reader sees the old one or the new one).
"""

import json
import os
import time

from .. import contained, errors
from ..onbox.host import procs
from ..pullindex import state_dir
from . import vault

RECORD, PID, LOG, STOP = "record.json", "keeper.pid", "keeper.log", "stop.json"
EVENTS_MAX = 500

# phases of a kept run; the last six are its end
RUNNING, RELAUNCHING, COMPLETED = "running", "relaunching", "completed"
FINISHED, FAILED, STOP_FAILED, GAVE_UP, OVER_BUDGET = "finished", "failed", "stop-failed", "gave-up", "over-budget"
STOPPED = "stopped"  # by `gpuops stop RUN`: asked, so no failure
ENDED = (FINISHED, FAILED, STOP_FAILED, GAVE_UP, OVER_BUDGET, STOPPED)


def run_dir(run_id) -> str:
    if not vault.plain(run_id):
        raise errors.UsageError(f"{run_id!r} is not a run id")
    return os.path.join(state_dir(), "keeper", run_id)


def path(run_id, name: str) -> str:
    return os.path.join(run_dir(run_id), name)


def _write(where, name: str, doc) -> None:
    os.makedirs(where, mode=0o700, exist_ok=True)
    contained.Root(where).write_atomic(name, json.dumps(doc).encode("utf-8"), mode=0o600)


def _read(file):
    try:
        with open(file, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def read(run_id):
    """The run's record, or None when no keeper looks after a run of that id."""
    return _read(path(run_id, RECORD))


def write(rec) -> None:
    _write(run_dir(rec["run_id"]), RECORD, rec)


def event(rec, kind, **fields) -> dict:
    """An event appended to the record (the newest EVENTS_MAX kept); the caller writes the record."""
    e = dict(fields, kind=kind, at=time.time(), seq=(rec["events"][-1]["seq"] + 1) if rec.get("events") else 1)
    rec["events"] = (rec.get("events") or [])[-(EVENTS_MAX - 1):] + [e]
    return e


def claim_pid(run_id) -> bool:
    """This process becomes the run's keeper: False when another live keeper holds the run."""
    held = _read(path(run_id, PID))
    if held and held.get("pid") != os.getpid() and procs.alive(held.get("pid"), held.get("start_ticks")):
        return False
    name_keeper(run_id, os.getpid())
    return True


def name_keeper(run_id, pid: int) -> None:
    """The pid file names process `pid` (with its start time, so a reused pid is not taken for it)."""
    _write(run_dir(run_id), PID, {"pid": pid, "start_ticks": (procs.stat(pid) or {}).get("start_ticks")})


def keeper_alive(run_id):
    """{pid, alive} of the keeper named in the pid file, or None when there is none."""
    held = _read(path(run_id, PID))
    if not held:
        return None
    return {"pid": held.get("pid"), "alive": bool(held.get("pid")) and procs.alive(held["pid"], held.get("start_ticks"))}


def ask_stop(run_id, why: str) -> None:
    """`gpuops stop` of the run: its keeper stops the run at its next look and relaunches nothing
    after (a stop wins over a relaunch). Written even before the run's record is, so a stop that
    arrives while the keeper is being handed to its host is kept for it."""
    _write(run_dir(run_id), STOP, {"at": time.time(), "why": why})


def stop_asked(run_id):
    """{at, why} of a `gpuops stop` of the run, or None."""
    return _read(path(run_id, STOP))
