"""Stopping a kept run's boxes: the fleet file's `stop = "..."` command for a box (the provider's CLI),
run on this machine, and whether a box has been idle long enough for `--stop-idle`.

A stop command runs under bash with GPUOPS_BOX, GPUOPS_RUN_ID and GPUOPS_VAULT set, stdin closed, for
at most STOP_TIMEOUT_S; what it printed is made inert before it is kept. Only exit 0 is a stop."""

import os
import subprocess

from .. import fleetfile
from ..ops import fleet
from ..render import inert

STOP_TIMEOUT_S = 600.0
TAIL = 2000


def commands(spec) -> dict:
    """{alias: stop command} of the run's fleet ('' where the fleet file names none)."""
    return {b.alias: b.stop for b in fleetfile.boxes(spec["fleet"])}


def run(box, command, run_id, vault_root) -> tuple:
    """(True, None) when `command` stopped `box` (exit 0), else (False, why)."""
    if not command:
        return False, "the fleet file gives this box no stop command"
    env = dict(os.environ, GPUOPS_BOX=box, GPUOPS_RUN_ID=run_id, GPUOPS_VAULT=vault_root)
    try:
        done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, timeout=STOP_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        code, said = done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        code, said = None, f"still running after {STOP_TIMEOUT_S:g}s; left alone"
    if code != 0:
        return False, f"stop command exited {code}: {inert.text(said[-TAIL:]).strip()}"
    return True, None


def idle(spec, aliases) -> dict:
    """{alias: (state, idle seconds or None, why)} from the fleet's own view of idleness (no gpuops job
    running and no GPU in use, since the last job's end: gpuops.ops.fleet.idleness)."""
    boxes = [b for b in fleetfile.boxes(spec["fleet"]) if b.alias in set(aliases)]
    rows = fleet.inventory(boxes, window_s=spec.get("window_s", 0.5))["data"]["hosts"]
    out = {}
    for r in rows:
        if not r["ok"]:
            out[r["host"]] = ("unknown", None, f"not answering: {r['error']['message']}")
        else:
            out[r["host"]] = (r["idle"]["state"], r["idle"]["idle_s"], r["idle"]["why"])
    return out
