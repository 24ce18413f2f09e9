"""What a run's supervisor watches while one attempt runs, each round of its loop (about a second;
gpuops.onbox.run.wrapper.Supervisor.wait calls `Watch.tick`):

  * progress: the attempt's log read as it grows and judged by gpuops.onbox.run.progress (a count
    that moves, in any of the shapes trainers print), and the highest step number;
  * a stall (--stall-after): no count moved for that long (before the attempt's first move, for
    STARTUP_S or the limit, whichever is longer: importing torch and a rendezvous are no stall),
    and the checkpoint directory (--checkpoint-dir) did not change meanwhile: a save is a phase,
    not a stall (gpuops.onbox.run.savewatch). Then the evidence first (gpuops.onbox.run.stallevidence),
    then the whole tree is stopped; the attempt ended by a stall (class hang). The phase the
    attempt is in (gpuops.onbox.run.progress.phase) is kept in run.json's `activity` as it changes;
  * the run's --max-runtime, retries included: the tree stopped (SIGTERM, the grace, SIGKILL);
    the attempt ends as TIMEOUT and the run with it;
  * a gang's other nodes (gpuops.onbox.gang.ganglink): when one's process ended badly or the node is
    lost, this node's tree is stopped at once (SIGTERM, GANG_GRACE_S, SIGKILL), ended by
    "peer-lost" (class node-fail), and the gang is retried as a whole;
  * a `gpuops stop` (its stop.json, written before its first signal): the attempt ended by the
    stop, never retried; the stop itself signals the processes. A stop of the run that named
    another attempt (run-stop.json: gpuops.onbox.run.runrecord.stop) is carried out here: the tree
    stopped with the stop's grace;
  * the checkpoint directory, every checkpoint_every_s: retention (gpuops.onbox.run.retention: never
    the newest complete one, nor the best, nor one that changed since the look before, nor the one
    the attempt resumed from; nothing at all when that is ambiguous) and the disk watch (free space
    below what the next checkpoint needs: disk-low).

The order of those looks is gpuops.onbox.run.runrules.watch_action's; every time is the run's monotonic
clock (`run.clock`), so a wall clock step neither ends a run at its limit nor reads as a stall.

The tree is every process of the attempt: the leader, its group and descendants, what the
supervisor adopted as a child subreaper (torchrun starts each worker in a session of its own, so
once torchrun dies its workers are under nothing but the supervisor), and whatever carries the
attempt's GPUOPS_JOB_ID.
"""

import os
import signal
import time

from . import checkpoints, progress, runrecord, runrules, savewatch
from ..triage import logscan, retrypolicy
from ..host import procs
from ..host import signals, telemetry
from . import stallevidence
from ..host.jobrecord import LOG, STOP

STARTUP_S = 300.0
READ_MAX = 4 << 20          # log bytes read in one round: a burst is read over several
CHECKPOINT_EVERY_S = 30.0
PIDS_MAX = 4096             # the attempt's pids remembered, for kernel OOM lines naming one
KILL_WAIT_S = 5.0
STALL_GRACE_S = 5.0         # a stalled tree gets this long for SIGTERM: it is stuck, not saving
EVIDENCE_BUDGET_S = 20.0
GANG_GRACE_S = 5.0          # a node whose peer is gone is blocked in a collective, not saving


def tree(job_id, leader):
    """[(pid, start_ticks)] of the attempt's live processes (see the module's docstring)."""
    me = os.getpid()
    found = set(telemetry.members(leader, leader, adopted_by=me))
    found.update(p for p in procs.pids() if p != me and procs.job_tag(p) == job_id)
    found.discard(me)
    out = []
    for pid in sorted(found):
        st = procs.stat(pid)
        if st and st["state"] not in ("Z", "X"):
            out.append((pid, st["start_ticks"]))
    return out


def stop_tree(job_id, leader, grace_s):
    """SIGTERM (and SIGCONT, so a stopped process takes it) every process of the attempt, SIGKILL
    what is left after `grace_s`; the pids signalled."""
    def send_round(items, sig):
        sent = [pid for pid, ticks in items if signals.send(pid, ticks, sig) == "sent"]
        if sig == signal.SIGTERM:
            for pid, ticks in items:
                signals.send(pid, ticks, signal.SIGCONT)
        return sent

    targets = tree(job_id, leader)
    if not targets:
        return []
    rounds = signals.ladder(targets, grace_s, KILL_WAIT_S, send_round, lambda t: procs.alive(*t),
                            more=lambda: tree(job_id, leader))
    return sorted(set(pid for _, items, _ in rounds for pid, _ in items))


class Watch(object):
    """One attempt's watch. `ended_by` is None until the watch ended the attempt or saw a stop:
    "stall", "max-runtime" or "stop" (retrypolicy.ENDED_BY)."""

    def __init__(self, run, attempt, job_id, jdir, meta, leader, resumed_from=None, log_from=None) -> None:
        self.run, self.attempt, self.job_id, self.jdir, self.leader = run, attempt, job_id, jdir, leader
        self.policy = run.policy
        self.log = os.path.join(jdir, LOG)
        # past what the supervisor wrote before the start: `log_from`, its size then, since the job
        # may have printed its first progress line before this watch began
        self.pos = log_from if log_from is not None else (logscan.size_of(self.log) or 0)
        self.started_at = self.last_progress = run.clock()
        ckpt_dir = self.policy.get("checkpoint_dir")
        self.tracker = progress.Tracker(self.started_at, self.policy.get("stall_after_s"), STARTUP_S,
                                        meta.get("progress_regex"), savewatch.Watch(ckpt_dir) if ckpt_dir else None)
        self.activity = None
        self.progressed, self.max_step = False, None
        self.pids, self.pids_at = set(), 0.0
        self.ended_by, self.evidence = None, None
        self.resumed_from = resumed_from
        self.look, self.look_at, self.disk_low = None, 0.0, False

    # ------------------------------------------------------------ each round

    def tick(self) -> None:
        now = self.run.clock()
        self._read_progress(now)
        if now - self.pids_at >= telemetry.INTERVAL_S and len(self.pids) < PIDS_MAX:
            self.pids.update(p for p, _ in tree(self.job_id, self.leader))
            self.pids_at = now
        gang = self.run.gang.tick(self.attempt) if self.run.gang is not None else None  # its beat, every round
        if self.ended_by:
            return
        own = os.path.exists(os.path.join(self.jdir, STOP))
        run_stop = None if own else runrecord.stop_asked(self.run.id)
        action = runrules.watch_action(own or run_stop is not None, gang, now, self.run.deadline, self._judge(now),
                                       bool(self.policy.get("checkpoint_dir"))
                                       and now - self.look_at >= self.run.checkpoint_every_s)
        if action == retrypolicy.STOP and own:
            self.ended_by = retrypolicy.STOP  # the stop signals the processes itself
        elif action == retrypolicy.STOP:
            self._end(retrypolicy.STOP, float(run_stop.get("grace_s") or self.policy.get("grace_s") or 10.0))
        elif action == retrypolicy.PEER_LOST:
            self.run.publish("peer-lost", self.attempt, self.job_id, why=gang + ": stopping this node")
            self._end(retrypolicy.PEER_LOST, GANG_GRACE_S)
        elif action == retrypolicy.MAX_RUNTIME:
            self.run.publish("timed-out", self.attempt, self.job_id,
                             why="the run reached its --max-runtime of %gs: stopping it" % self.policy["max_runtime_s"])
            self._end(retrypolicy.MAX_RUNTIME, self.policy.get("grace_s") or 10.0)
        elif action == retrypolicy.STALL:
            self._stall(now)
        elif action == runrules.CHECKPOINTS:
            self.checkpoints()

    def _end(self, why, grace_s) -> None:
        self.ended_by = why
        stop_tree(self.job_id, self.leader, grace_s)

    def _judge(self, now):
        """Whether the attempt has stalled; the phase it is in kept in run.json as it changes."""
        phase, stalled = self.tracker.check(now)
        if phase != (self.activity or {}).get("phase"):
            # `since` is read on the workstation: the wall clock's, where the judging is the monotonic one's
            self.activity = {"phase": phase, "since": round(time.time(), 3), "job": self.job_id,
                             "step": self.max_step}
            self.run.save(activity=self.activity)
        return stalled

    def _stall(self, now) -> None:
        silent = now - self.last_progress
        doc = stallevidence.capture(self.log, [p for p, _ in tree(self.job_id, self.leader)],
                                    budget_s=EVIDENCE_BUDGET_S)
        try:
            self.evidence = stallevidence.save(self.jdir, self.attempt, doc)
        except (OSError, IOError):
            self.evidence = None
        self.run.publish("stalled", self.attempt, self.job_id, evidence=self.evidence, silent_s=round(silent, 1),
                         why="no progress for %.0fs (--stall-after %gs) and no checkpoint being written: evidence "
                             "saved, stopping the attempt" % (silent, self.policy["stall_after_s"]))
        self._end(retrypolicy.STALL, STALL_GRACE_S)

    # ------------------------------------------------------------ progress

    def _read_progress(self, now) -> None:
        data = logscan.read_range(self.log, self.pos, READ_MAX)
        if not data:
            return
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if cut == 0:
            if len(data) < READ_MAX:
                return  # the line is not finished yet
            cut = len(data)
        self.pos += cut
        if self.tracker.read(data[:cut], now):
            self.progressed, self.last_progress, self.max_step = True, now, self.tracker.judge.max_step

    # ------------------------------------------------------------ checkpoints

    def checkpoints(self):
        """Retention and the disk watch over two looks a round apart (an entry that changed
        between them is being written: never pruned, never counted). The verdict, or None on the
        first look."""
        now = self.run.clock()
        glob = self.policy.get("checkpoint_glob")
        first, self.look, self.look_at = self.look, checkpoints.look(self.policy["checkpoint_dir"], glob), now
        if first is None:
            return None
        verdict = checkpoints.judge(first, self.look, glob, self.run.failed)
        self.run.skip_unsafe(verdict, self.attempt, self.job_id)
        if self.policy.get("keep_checkpoints"):
            self.run.retention(verdict, self.attempt, self.job_id,
                               [os.path.basename(self.resumed_from)] if self.resumed_from else [])
        disk = checkpoints.disk_watch(self.policy["checkpoint_dir"], verdict)
        if disk["low"] and not self.disk_low:
            self.run.publish("disk-low", self.attempt, self.job_id, free_bytes=disk["free_bytes"],
                             need_bytes=disk["need_bytes"], mount=disk["mount"], dir=self.policy["checkpoint_dir"],
                             why="%d bytes free where the next checkpoint needs about %d" % (
                                 disk["free_bytes"], disk["need_bytes"]))
        self.disk_low = bool(disk["low"])
        return verdict


def log_line(jdir, text: str) -> None:
    """Append one line of the supervisor's own to an attempt's log (before its program starts)."""
    fd = os.open(os.path.join(jdir, LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, ("[gpuops] %s\n" % text).encode("utf-8", "replace"))
    finally:
        os.close(fd)
