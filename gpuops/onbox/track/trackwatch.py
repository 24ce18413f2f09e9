"""Will this run's curves reach anyone? Its supervisor looks once in the run's first minutes, and
once more if that look could not tell (U35, U39), so a person learns it while the run is young,
not three days later from an empty dashboard.

The judgements are the preflight's and diagnose's own, shipped with the bundle (no second rule set):

  * W&B: gpuops.onbox.track.wandblines reads the job's log head and tail (the bounded view diagnose
    reads) for the lines wandb prints (wandb/sdk/wandb_run.py, _header_sync_info and
    _header_run_info: "wandb: Syncing run NAME", "wandb: View run at URL"; offline, "W&B syncing is
    set to `offline` in this directory."), and the job's WANDB_MODE. wandb prints its header in one
    go, so a header without the Syncing line is a verdict; a log with no wandb line yet is not.
  * TensorBoard: gpuops.onbox.track.verdicts.tensorboard on what the probe gathers (the running
    TensorBoards' logdirs, the profile's pinned logdir) plus `writes`: the directories of the
    event files ("tfevents", TensorBoard's own test) the job's processes hold open. A job that
    holds none is not judged: nothing tells a run without TensorBoard from one that has not
    written yet.

The verdict goes to trackers.json in the job directory (job_facts reads it for status, diagnose
and triage --job); a run's supervisor also publishes each new finding as a tracker-warning event.
The window is GPUOPS_TRACKER_CHECK_S seconds in the job's environment (default WINDOW_S).
"""

import os
import time

from ..host import evidence, jobrecord, procs, sysroot, telemetry
from . import trackers
from . import verdicts as rules
from . import wandblines as wandb_log
from ...findings import Finding
from typing import Sequence

FILE = "trackers.json"
WINDOW_ENV = "GPUOPS_TRACKER_CHECK_S"
WINDOW_S = 90.0
SECOND_LOOK = 3.0   # the second look, when the first could not tell, this many windows in
LOOKS = 2
MAX_PIDS, MAX_FDS, MAX_WRITES = 64, 1024, 8
EVIDENCE_KEYS = ("state", "run", "url", "dir")
FIXES = {
    "offline": "wandb sync {dir}   # on the box, before teardown; or relaunch with WANDB_MODE=online and "
               "--secret-env WANDB_API_KEY",
    "no-key": "gpuops launch ... --secret-env WANDB_API_KEY   # sent through stdin, never argv",
    "not-syncing": "gpuops preflight --host BOX   # says whether the box has a W&B key; the log says wandb's error",
    "disabled": "unset WANDB_MODE   # or WANDB_MODE=online, and relaunch",
}


def window_s(env):
    """The first look's delay: GPUOPS_TRACKER_CHECK_S in the job's environment, else WINDOW_S."""
    try:
        value = float((env or {}).get(WINDOW_ENV) or WINDOW_S)
    except ValueError:
        return WINDOW_S
    return value if value > 0 else WINDOW_S


def due(elapsed_s, looks, window):
    """Whether a look is due `elapsed_s` into the job, after `looks` looks."""
    if looks >= LOOKS:
        return False
    return elapsed_s >= window * (1.0 if looks == 0 else SECOND_LOOK)


def wandb_findings(head, tail, env):
    """([U35 finding] or [], whether the log told): from the lines wandb printed and WANDB_MODE."""
    found = wandb_log.wandb(head, tail, env)
    if found is None:
        return [], False
    if found["state"] == "syncing":
        return [], True
    why = wandb_log.advice(found)[0]
    fix = FIXES[found["state"]].format(dir=found.get("dir") or "<the run's wandb/offline-run-* dir>")
    return [Finding("tracker.wandb-run", "warn", why, dict((k, found.get(k)) for k in EVIDENCE_KEYS), fix,
                    "U35")], True


def tb_findings(doc):
    """([U39 findings], whether it could tell) from {pinned, servers, writes}: judged only once the
    job holds event files open."""
    if not doc.get("writes"):
        return [], False
    judged = rules.tensorboard({"trackers": {"tensorboard": doc}}, {})
    return [f for f in judged if f.severity in ("warn", "fail")], True


def event_dirs(pids: Sequence[int]):
    """The directories of the TensorBoard event files the processes `pids` hold open (bounded)."""
    found = set()
    for pid in list(pids)[:MAX_PIDS]:
        fd_dir = sysroot.path("/proc/%d/fd" % pid)
        try:
            fds = os.listdir(fd_dir)[:MAX_FDS]
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("/") and "tfevents" in os.path.basename(target):
                found.add(os.path.dirname(target)[:trackers.TEXT_MAX])
        if len(found) >= MAX_WRITES:
            break
    return sorted(found)[:MAX_WRITES]


def read(job_dir):
    """The recorded verdict, or None before the first look."""
    return jobrecord.read_json(os.path.join(job_dir, FILE))


class Check(object):
    """The supervisor's side: `tick()` in its loop looks when one is due, records the verdict, and
    hands each finding not seen before to `on_found`. Never raises."""

    def __init__(self, job_dir, env, leader, tb_logdir=None, on_found=None, clock=time.time) -> None:
        self.job_dir, self.env, self.leader, self.tb_logdir = job_dir, env or {}, leader, tb_logdir
        self.on_found, self.clock = on_found, clock
        self.window, self.started_at = window_s(self.env), clock()
        self.looks, self.looked_at, self.done, self.found = 0, [], False, {}

    def tick(self):
        now = self.clock()
        if self.done or not due(now - self.started_at, self.looks, self.window):
            return []
        self.looks += 1
        self.looked_at.append(round(now, 2))
        record = {"looks": self.looks, "looked_at": self.looked_at, "window_s": self.window, "error": None}
        try:
            findings, told, seen = self.look()
        except Exception as e:  # noqa: the supervisor's loop outlives any one look
            findings, told, seen = [], False, {}
            record["error"] = ("%s: %s" % (type(e).__name__, e))[:300]
        new = [f for f in findings if (f.id, f.title) not in self.found]
        self.found.update(((f.id, f.title), f) for f in findings)
        self.done = told or self.looks >= LOOKS
        record.update(seen, done=self.done, findings=[f.as_dict() for f in self.found.values()])
        try:
            jobrecord.write_json(os.path.join(self.job_dir, FILE), record)
        except (OSError, IOError):
            pass
        for f in new:
            if self.on_found is not None:
                self.on_found(f)
        return new

    def look(self):
        """(findings, whether both trackers were judged, what was seen)"""
        log = os.path.join(self.job_dir, jobrecord.LOG)
        w, w_told = wandb_findings(evidence.head(log), evidence.tail(log), self.env)
        pids = telemetry.members(self.leader, self.leader, adopted_by=os.getpid())
        tb = {"pinned": trackers.events(self.tb_logdir) if self.tb_logdir else None,
              "servers": trackers.servers(procs.ancestry()), "writes": event_dirs(pids)}
        t, t_told = tb_findings(tb)
        seen = {"wandb": (w[0].evidence["state"] if w else ("syncing" if w_told else None)), "tb_writes": tb["writes"]}
        return w + t, w_told and t_told, seen
