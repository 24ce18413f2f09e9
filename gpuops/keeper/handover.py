"""`python -m gpuops.keeper.handover VERB [RUN]`: the keeper host's side of `launch --keeper-host`
(gpuops.keeper.remotehost is this machine's). Each verb reads at most one JSON document on stdin
and answers one JSON document on stdout; nothing of the run rides argv but its id.

    check        {boxes, vault_host}: which of them this host cannot reach over SSH (gpuops's own
                 remote layer, as the keeper will reach them), {unreachable: {name: why}}
    take RUN     {record, fleet, stop}: the run's fleet file and record written to this host's
                 state dir (0600), a stop already asked kept, the keeper started detached; {pid, log}
    show RUN     {record, keeper}: the run's record here and whether its keeper lives
    stop RUN     `gpuops stop` of the run, for the keeper here to act on at its next look
    restart RUN  the run's keeper started again, detached as `take` starts it (what `status` offers
                 when the keeper died); refused while one lives or once the run has ended; {pid, log}
"""

import concurrent.futures
import json
import os
import sys

from .. import contained, errors
from ..remote.targets import target_for
from . import record, start, vault

STDIN_BYTES = 8 << 20
REACH_S = 30.0
FLEET = "fleet.toml"
WHY_CHARS = 300


def _stdin() -> dict:
    raw = sys.stdin.buffer.read(STDIN_BYTES + 1)
    if len(raw) > STDIN_BYTES:
        raise errors.UsageError("handover: more than 8 MiB on stdin")
    doc = json.loads(raw.decode("utf-8") or "{}")
    if not isinstance(doc, dict):
        raise errors.UsageError("handover: stdin is not a JSON object")
    return doc


def _reach(name: str) -> str | None:
    """None when `name` answers a command over SSH from here, else why not (one line)."""
    try:
        target = target_for(name)
        try:
            result = target.run("true", timeout_s=REACH_S)
        finally:
            target.close()
    except errors.GpuopsError as e:
        return e.message.splitlines()[0][:WHY_CHARS] if e.message else type(e).__name__
    return None if result.exit == 0 else f"`true` exited {result.exit}"


def check(doc: dict) -> dict:
    names = [n for n in list(doc.get("boxes") or []) + [doc.get("vault_host")] if isinstance(n, str) and n]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(names) or 1)) as pool:
        whys = dict(zip(names, pool.map(_reach, names)))
    return {"unreachable": {n: w for n, w in whys.items() if w is not None}}


def take(run_id: str, doc: dict) -> dict:
    rec, fleet = doc.get("record"), doc.get("fleet")
    if not isinstance(rec, dict) or rec.get("run_id") != run_id or not isinstance(fleet, str):
        raise errors.UsageError(f"handover take {run_id}: no record of that run, or no fleet file")
    if (record.keeper_alive(run_id) or {}).get("alive"):
        raise errors.Refused(f"run {run_id} already has a live keeper on this host")
    where = record.run_dir(run_id)
    os.makedirs(where, mode=0o700, exist_ok=True)
    contained.Root(where).write_atomic(FLEET, fleet.encode("utf-8"), mode=0o600)
    rec.pop("keeper_host", None)  # here it is the keeper's own record
    rec["spec"]["fleet"] = record.path(run_id, FLEET)
    if doc.get("stop"):
        record.ask_stop(run_id, str(doc["stop"])[:WHY_CHARS])
    record.write(rec)
    return {"pid": start.spawn(run_id), "log": record.path(run_id, record.LOG)}


def restart(run_id: str) -> dict:
    rec = record.read(run_id)
    if rec is None:
        raise errors.NotFound(f"handover restart {run_id}: no keeper record of that run on this host")
    if rec["phase"] in record.ENDED:
        raise errors.Refused(f"run {run_id} has ended ({rec['phase']}): it needs no keeper")
    return {"pid": start.spawn(run_id), "log": record.path(run_id, record.LOG)}  # Refused while one lives


def show(run_id: str) -> dict:
    return {"record": record.read(run_id), "keeper": record.keeper_alive(run_id)}


def main(argv) -> int:
    verb, run_id = (argv[0], argv[1] if len(argv) == 2 else "") if len(argv) in (1, 2) else ("", "")
    if verb not in ("check", "take", "show", "stop", "restart") or (verb != "check") != bool(run_id) \
            or (run_id and not vault.plain(run_id)):
        print("usage: python -m gpuops.keeper.handover check | take RUN | show RUN | stop RUN | restart RUN",
              file=sys.stderr)
        return 2
    try:
        if verb == "check":
            out = check(_stdin())
        elif verb == "take":
            out = take(run_id, _stdin())
        elif verb == "show":
            out = show(run_id)
        elif verb == "restart":
            out = restart(run_id)
        else:
            record.ask_stop(run_id, "gpuops stop, sent from another machine")
            out = {"stopping": run_id}
    except errors.GpuopsError as e:
        print(e.message, file=sys.stderr)
        return e.exit_code
    except ValueError as e:
        print(f"handover {verb}: {e}", file=sys.stderr)
        return 2
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
