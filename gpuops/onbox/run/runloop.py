"""The supervisor of a run: the attempts of one job under its policy (gpuops.onbox.run.boxpolicy), each
started, watched (gpuops.onbox.run.runwatch), judged and, when the failure is worth it, retried from the
newest complete checkpoint (one that failed to load is passed over for the one before it, at
most retrypolicy.MAX_FALLBACKS times a run). All of it on the box, in the one detached process
that outlives the SSH session (gpuops.onbox.run.wrapper), so the policy holds while the workstation
sleeps.

After each attempt the supervisor gathers what it knows first hand (how the attempt ended, whether
the watch or a `gpuops stop` ended it, the cgroup's OOM counter before and after, kernel OOM and
Xid lines, a SIGTERM it received itself) and triage's class of the log (gpuops.onbox.triage.logclass:
triage's own classifier, shipped), and retrypolicy.decide says whether to go on and after what
backoff. Its streak (failures in a row without a new step) resets when an attempt went past the
run's best step, so a run that fails once a day after hours of progress comes back at once.

Attempt n+1 is a job of its own: a new job directory made by the engine's `make` (the supervisor's:
gpuops.onbox.run.supervised.prepare) from the same immutable command, with parent_job_id the attempt
before, the resume argument added for the checkpoint it resumes from, and GPUOPS_RESUME_FROM in
its environment. Secrets stay in this process's memory: each attempt's environment is made from
them again, never written anywhere. Every decision is an event (gpuops.onbox.run.runevents) in the
run's directory, handed to the --notify command in order; run.json says where the run stands
(gpuops.onbox.run.runrecord). What happens next is decided by gpuops.onbox.run.runrules (pure); this
module carries it out.

A stop always wins over a retry: the hand-over to the next attempt (make it, record it as the
current one, spawn it, write its start record) happens under the run's lock, after one last look
at the stop records (gpuops.onbox.run.runrecord.stop), so a `gpuops stop` either lands before it and no
attempt starts, or finds the new attempt recorded and stops it. Events, and so the --notify
command, come after the attempt has started, never inside the hand-over.

A full disk does not end the supervisor: a record it cannot write is kept in memory and written
once it can (each round of the watch tries again), events are still handed to --notify, and an
attempt that cannot be made yet is tried again until the disk takes it, a stop, or the run's time
limit.
"""

import os
import time

from ..host import cgroup, evidence, jobrecord, procs
from . import checkpoints, retention, runevents, boxpolicy
from ..gang import ganglink
from ..triage import retrypolicy
from . import runrecord, runrules, runwatch, wrapper
from ..track import trackwatch
from ..host.jobrecord import EXIT, LOG
from typing import Sequence

BACKOFF_POLL_S = 0.5
MAKE_RETRY_S = 2.0  # an attempt the disk refused to make is tried again this often
PENDING_WAIT_S = 3600.0  # a run that ended on a full disk: how long its supervisor waits to record it
LEFTOVER_GRACE_S = 2.0
DECISIONS_MAX = 200


class Run(object):
    """The run's state in its supervisor: its record, events, and the attempt being run."""

    def __init__(self, run_id, meta, spec, body, make, sup) -> None:
        self.id, self.spec, self.body, self.make, self.sup = run_id, spec, body, make, sup
        self.policy = meta["policy"]
        self.started_at = time.time()  # shown; every limit is judged on `clock`
        self.clock = time.monotonic
        self.started = self.clock()
        self.deadline = runrules.deadline(self.started, self.policy.get("max_runtime_s"))
        self.pending = {}  # {path: record} the disk refused, written again each round
        self.checkpoint_every_s = float(self.policy.get("checkpoint_every_s") or runwatch.CHECKPOINT_EVERY_S)
        self.best, self.streak, self.pruned, self.skipped = None, 0, [], set()
        self.failed, self.refusals = [], set()  # checkpoints that failed to load; retention's refusals told
        self.gang = None  # a gang node's link to the others (gpuops.onbox.gang.ganglink)
        self.events = runevents.Events(jobrecord.job_dir(run_id), run=run_id)
        self.notifier = runevents.Notifier(self.events, self.policy.get("notify"), cwd=meta.get("workdir"))
        self.rec = {"run_id": run_id, "policy": self.policy, "attempts": [run_id], "current": run_id, "attempt": 1,
                    "max_attempts": self.policy["max_retries"] + 1, "phase": "running", "started_at": self.started_at,
                    "next_at": None, "ended_at": None, "resumed_from": None, "final": None, "decisions": [],
                    "supervisor": {"pid": os.getpid(), "start_ticks": sup.ident.get("wrapper_start_ticks"),
                                   "boot_id": procs.boot_id()}}

    def save(self, **changes) -> None:
        self.rec.update(changes)
        self.write(jobrecord.path(self.id, jobrecord.RUN), self.rec)

    def write(self, path, record) -> None:
        """Write a record, or keep it for the next round when the disk refuses it."""
        self.pending[path] = record
        self.flush()

    def flush(self) -> None:
        """Every record and event the disk refused so far, written now where it takes them."""
        for path in list(self.pending):
            try:
                jobrecord.write_json(path, self.pending[path])
            except (OSError, IOError):
                continue
            del self.pending[path]
        self.events.flush()

    def drain(self, seconds) -> None:
        """Once the run has ended: write what the disk refused, trying again for up to `seconds`
        (the run's end is said in its events already; its records say it once the disk takes them).
        Records whose job directory was deleted (someone's `rm -r` of the jobs dir) have nowhere to
        go and nobody to read them: the supervisor ends rather than trying for the hour."""
        until = self.clock() + seconds
        self.flush()
        while (self.pending or self.events.pending) and self.clock() < until and \
                os.path.isdir(jobrecord.job_dir(self.id)):
            time.sleep(MAKE_RETRY_S)
            self.flush()

    def elapsed(self):
        return self.clock() - self.started

    def publish(self, kind, attempt=None, job=None, **fields):
        return self.notifier.publish(kind, attempt=attempt, job=job, **fields)

    def note_pruned(self, done) -> None:
        self.pruned = (self.pruned + list(done.get("deleted") or []))[-50:]
        self.rec["pruned"] = self.pruned

    def retain(self, attempt, job) -> None:
        """Retention once more when the run ends, over two looks (its last save may have just ended)."""
        policy = self.policy
        if not policy.get("keep_checkpoints") or not policy.get("checkpoint_dir"):
            return
        verdict = checkpoints.newest_complete(policy["checkpoint_dir"], policy.get("checkpoint_glob"),
                                              failed=self.failed)
        self.skip_unsafe(verdict, attempt, job)
        self.retention(verdict, attempt, job)

    def retention(self, verdict, attempt, job, spared=()) -> None:
        """Retention over one verdict (gpuops.onbox.run.retention); a refusal is an event once per reason."""
        policy = self.policy
        done = retention.apply(policy["checkpoint_dir"], verdict, policy["keep_checkpoints"], spared,
                               policy.get("keep_best"))
        if done["refused"] and done["refused"] not in self.refusals:
            self.refusals.add(done["refused"])
            self.publish("retention-refused", attempt, job, dir=policy["checkpoint_dir"],
                         why="deleting nothing: %s" % done["refused"])
        if done["deleted"]:
            self.note_pruned(done)

    def skip_unsafe(self, verdict, attempt, job) -> None:
        """A checkpoint-skipped event for each name from the box that is unsafe, once a run."""
        for e in verdict.get("unsafe") or []:
            if e["name"] not in self.skipped:
                self.skipped.add(e["name"])
                self.publish("checkpoint-skipped", attempt, job, name=e["name"], why=e["why"])


def supervisor(spec, body, make, new_supervisor=wrapper.Supervisor):
    """The supervise function wrapper.start runs for a run (in place of a plain job's); also run in
    place by an engine whose job is the run's supervisor (a Ray job's driver: gpuops.onbox.engines.ray_run),
    which brings its own kind of wrapper.Supervisor."""
    def supervise(job_dir, argv, env, workdir, meta, notify_fd) -> None:
        sup = new_supervisor()
        run = Run(meta["job_id"], meta, spec, body, make, sup)
        run.gang = ganglink.open_link(run.policy.get("gang"))
        if isinstance(run.gang, ganglink.Head):  # the launcher hands the port to the other nodes
            meta = dict(meta, gang_port=run.gang.port)
        run.save()
        # the first attempt of a run `gpuops retry` started from a checkpoint resumes from it
        attempt = Attempt(run, 1, meta["job_id"], job_dir, argv, env, workdir, meta, meta.get("resumed_from"))
        attempt.spawn(notify_fd)  # the launch's own: nothing can name the run before it returns
        attempt.announce()
        while attempt is not None:
            attempt = attempt.finish()
        run.drain(PENDING_WAIT_S)
    return supervise


class Attempt(object):
    def __init__(self, run, number: int, job_id, jdir, argv, env, workdir, meta, checkpoint) -> None:
        self.run, self.number, self.job_id, self.jdir = run, number, job_id, jdir
        self.argv, self.env, self.workdir, self.meta, self.checkpoint = argv, env, workdir, meta, checkpoint
        self.child = self.watch = None
        self.skipped = []  # the incomplete checkpoints passed over for `checkpoint`

    def spawn(self, notify_fd=None) -> None:
        """Start the attempt's program and write its start record (the launcher told, for the
        first); the caller holds the run's hand-over lock for every later attempt."""
        run = self.run
        self.meta = dict(self.meta, **run.sup.ident)
        self.oom_before = cgroup.oom_kills()
        out = os.open(os.path.join(self.jdir, LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.log_from = os.fstat(out).st_size  # the watch reads the job's lines from here
        try:
            self.child = run.sup.spawn(self.argv, self.env, self.workdir, out)
        except OSError as e:
            wrapper.spawn_failed(self.jdir, self.meta, e, write=run.write)
        else:
            wrapper.started(self.jdir, self.meta, self.child, write=run.write)
        finally:
            os.close(out)
            if notify_fd is not None:
                wrapper.notify_launcher(notify_fd, self.meta)

    def announce(self) -> None:
        """The attempt's events, once it has started (a --notify command may take seconds)."""
        run = self.run
        if self.checkpoint:
            failed = "; %s failed to load" % ", ".join(run.failed) if run.failed else ""
            run.publish("resumed", self.number, self.job_id, checkpoint=self.checkpoint,
                        step=checkpoints.step_of(os.path.basename(self.checkpoint)),
                        skipped=self.skipped, why="from the newest complete checkpoint" + failed)
        run.publish("attempt-started", self.number, self.job_id, of=run.rec["max_attempts"],
                    checkpoint=self.checkpoint, pid=self.meta.get("pid"))

    def finish(self):
        """Watch the attempt to its end, decide, and return the next attempt (started) or None."""
        run = self.run
        if self.child is None:
            record = jobrecord.read_json(os.path.join(self.jdir, EXIT)) or {}
            ended_by, pids = None, []
            if run.gang is not None:
                run.gang.down(self.number, record)
        else:
            self.watch = runwatch.Watch(run, self.number, self.job_id, self.jdir, self.meta, self.child.pid,
                                        self.checkpoint, self.log_from)
            run.sup.outside = None
            curves = trackwatch.Check(self.jdir, self.env, self.child.pid, self.meta.get("tb_logdir"), self.warn)
            record = run.sup.wait(self.child, self.jdir, self.meta.get("gpus"),
                                  lambda: (run.flush(), self.watch.tick()), curves)
            if run.gang is not None:  # first: the other nodes must not wait on this one's collectives
                run.gang.down(self.number, record)
            # a stop's record comes before its first signal: an attempt that died of it before the
            # watch's next round was still ended by the stop
            ended_by = self.watch.ended_by or (
                retrypolicy.STOP if runrecord.stop_asked(run.id, self.jdir) is not None else None)
            pids = sorted(self.watch.pids)
            left = runwatch.stop_tree(self.job_id, self.child.pid, LEFTOVER_GRACE_S)
            if left:  # workers a dead launcher left: they must not train on beside the next attempt
                record["stopped_leftovers"] = left
            if ended_by:
                record["ended_by"] = ended_by
            if self.watch.evidence:
                record["stall_evidence"] = os.path.basename(self.watch.evidence)
            run.write(os.path.join(self.jdir, EXIT), record)
        decision = self.decide(record, ended_by, pids)
        return self.next(decision)

    def warn(self, finding) -> None:
        """A tracker-warning event for a finding of the attempt's first minutes (trackwatch)."""
        self.run.publish("tracker-warning", self.number, self.job_id, finding=finding.id, gotcha=finding.gotcha,
                         why=finding.title, fix=finding.fix)

    def facts(self, record, ended_by, pids: Sequence[int]):
        """What retrypolicy.decide reads, from the box first hand and triage's class of the log."""
        run = self.run
        facts = {"exit_code": record.get("exit_code"), "signal": record.get("signal"), "ended_by": ended_by,
                 "oom_before": self.oom_before, "oom_after": cgroup.oom_kills(), "job_pids": pids,
                 "outside_signal": run.sup.outside}
        if ended_by or (record.get("exit_code") == 0 and not record.get("signal")):
            return facts
        ev = {}
        evidence.with_kernel(ev, self.meta.get("launched_at") or run.started_at, set(pids))
        kinds = run.policy.get("xid_kinds") or {}
        facts.update(kernel_readable=ev.get("kernel_readable"), kernel_oom=ev.get("kernel_oom_named") or [],
                     xids=[{"code": x["code"], "kind": kinds.get(str(x["code"]), "other")}
                           for x in ev.get("xid_after_launch") or []])
        try:
            from ..triage import logclass  # triage's classifier: shipped, run only for a failed attempt

            facts["triage_class"] = logclass.classify_log(os.path.join(self.jdir, LOG), exit_record=record)["primary"]
        except (OSError, IOError, ValueError):
            facts["triage_class"] = None
        return facts

    def decide(self, record, ended_by, pids: Sequence[int]):
        run = self.run
        facts, told, node = self.facts(record, ended_by, pids), None, None
        if run.gang is not None:  # the head decides for the gang, from the node that failed first
            facts["at"] = record.get("ended_at")
            got = run.gang.settle(self.number, facts)
            if isinstance(got, dict):
                told = got
            else:
                node, facts = got
        # a checkpoint that failed to load: the one before it, a bounded number of times
        fallback = bool(self.checkpoint) and len(run.failed) < retrypolicy.MAX_FALLBACKS
        best = self.watch.max_step if self.watch else None
        account = runrules.progress_account(run.best, run.streak, best, bool(self.watch and self.watch.progressed))
        run.best, run.streak = account["best"], account["streak"]
        decision = told or retrypolicy.decide(
            facts, self.number, run.policy["max_retries"], run.policy.get("retry_on"), run.elapsed(),
            run.policy.get("max_runtime_s"), run.streak, base_s=run.policy.get("backoff_s") or retrypolicy.BACKOFF_BASE_S,
            progressed_to=account["progressed_to"], fallback=fallback)
        if fallback and decision["retry"] and decision["class"] == retrypolicy.LOAD_FAIL:
            run.failed.append(os.path.basename(self.checkpoint))
            run.publish("checkpoint-fallback", self.number, self.job_id, checkpoint=self.checkpoint,
                        why="attempt %d failed to load %s: the next resumes from the complete checkpoint before it "
                            "(fallback %d of %d)" % (self.number, self.checkpoint, len(run.failed),
                                                     retrypolicy.MAX_FALLBACKS))
        if node is not None:
            decision["why"] = "node %d: %s" % (node, decision["why"])
        entry = {"attempt": self.number, "job": self.job_id, "class": decision["class"], "why": decision["why"],
                 "retry": decision["retry"], "step": best, "node": node}
        run.rec["decisions"] = (run.rec["decisions"] + [entry])[-DECISIONS_MAX:]
        return decision

    def next(self, decision):
        run, n = self.run, self.number
        fields = {"class": decision["class"], "why": decision["why"]}
        if not decision["retry"]:
            kind = runrules.end_kind(decision["class"])
            if kind == runrules.GAVE_UP:
                run.publish("attempt-failed", n, self.job_id, **fields)
            if not (kind == runrules.TIMED_OUT and self.watch and self.watch.ended_by == retrypolicy.MAX_RUNTIME):
                run.publish(kind, n, self.job_id, **fields)  # else said already, as the watch ended it
            return self.end_run(decision, fields)
        run.publish("attempt-failed", n, self.job_id, **fields)
        run.publish("retrying", n, self.job_id, backoff_s=decision["backoff_s"], next_attempt=n + 1, **fields)
        run.save(phase="backoff", next_at=time.time() + decision["backoff_s"])
        first = (checkpoints.look(run.policy["checkpoint_dir"], run.policy.get("checkpoint_glob"))
                 if run.policy.get("checkpoint_dir") else None)
        ended = self.backoff(decision["backoff_s"])
        return self.end_stopped(ended) if ended else self.successor(first)

    def end_run(self, decision, fields):
        run = self.run
        run.retain(self.number, self.job_id)
        if run.gang is not None:
            run.gang.finish(decision)
        run.save(phase="ended", ended_at=time.time(), next_at=None,
                 final=dict(fields, job=self.job_id, attempt=self.number))
        run.flush()
        return None

    def end_stopped(self, ended):
        """The run ended between attempts (runrules.handover's decision): a stop, or its time limit."""
        kind = runrules.end_kind(ended["class"])
        self.run.publish(kind, self.number, self.job_id, **ended)
        return self.end_run(ended, ended)

    def handover(self):
        """runrules.handover now: None when the next attempt may start."""
        run = self.run
        return runrules.handover(runrecord.stop_asked(run.id, self.jdir) is not None, run.clock(), run.deadline)

    def backoff(self, seconds):
        """Wait out the backoff (at least long enough for the checkpoint directory's second look);
        the run's end when a stop or its time limit came meanwhile, else None."""
        run = self.run
        until = run.clock() + max(seconds, checkpoints.INTERVAL_S if run.policy.get("checkpoint_dir") else 0)
        while True:
            if run.gang is not None:
                run.gang.pump()
            run.flush()
            ended = self.handover()
            if ended:
                return ended
            left = until - run.clock()
            if left <= 0:
                return None
            time.sleep(min(BACKOFF_POLL_S, left))

    def successor(self, first):
        """The next attempt, made and started: from the newest complete checkpoint when there is one;
        None when the run ended instead (a stop or its time limit during the hand-over)."""
        run, policy, n = self.run, self.run.policy, self.number + 1
        checkpoint, verdict = None, None
        if first is not None:
            glob = policy.get("checkpoint_glob")
            verdict = checkpoints.judge(first, checkpoints.look(policy["checkpoint_dir"], glob), glob, run.failed)
            run.skip_unsafe(verdict, n, self.job_id)
            checkpoint = verdict["path"]
        if run.gang is not None:  # every node resumes from the head's pick
            checkpoint = run.gang.announce(n, checkpoint, run.rec["decisions"][-1])
            verdict = verdict if checkpoint and verdict and checkpoint == verdict["path"] else None
        spec, body = attempt_spec(run.spec, run.body, policy, checkpoint, run.id, n, self.job_id)
        said = "attempt %d/%d of run %s" % (n, run.rec["max_attempts"], run.id)
        if checkpoint:
            failed = "; %s failed to load" % ", ".join(run.failed) if run.failed else ""
            line = "%s resumes from checkpoint %s (the newest complete one%s)" % (said, checkpoint, failed)
        else:
            why = "no complete checkpoint in %s" % policy["checkpoint_dir"] if first is not None else "no --checkpoint-dir"
            line = "%s starts from the beginning (%s)" % (said, why)
        while True:
            with runrecord.HandOver(run.id):
                ended = self.handover()
                if ended:
                    return self.end_stopped(ended)
                attempt = self.made(spec, body, n, checkpoint, line)
                if attempt is not None:
                    attempt.spawn()
                    break
            time.sleep(MAKE_RETRY_S)
            run.flush()
        attempt.skipped = (verdict or {}).get("incomplete", [])[:20]
        attempt.announce()
        return attempt

    def made(self, spec, body, n, checkpoint, line):
        """The next attempt made and recorded as the run's current one, or None when the disk
        refused its directory (tried again after MAKE_RETRY_S)."""
        run = self.run
        try:
            job_id, jdir, argv, env, workdir, meta = run.make(spec, body)
        except (OSError, IOError):
            return None
        try:
            runwatch.log_line(jdir, line)
        except (OSError, IOError):
            pass  # the line is the supervisor's note; the attempt goes on without it
        run.rec["attempts"].append(job_id)
        run.save(phase="running", current=job_id, attempt=n, next_at=None, resumed_from=checkpoint)
        return Attempt(run, n, job_id, jdir, argv, env, workdir, meta, checkpoint)


def attempt_spec(spec, body, policy, checkpoint, run_id, n, parent):
    """The spec and command of attempt `n` of a run (`spec` and `body` its first attempt's), made
    to resume from `checkpoint` (None: from the beginning)."""
    return resume_spec(dict(spec, policy=None, parent_job_id=parent, key=None, run={"id": run_id, "attempt": n}),
                       body, policy, checkpoint)


def resume_spec(spec, body, policy, checkpoint):
    """`spec` and `body` made to resume from `checkpoint` (None: from the beginning) as the run's
    `policy` says: the checkpoint in GPUOPS_RESUME_FROM and the record, and its --resume-arg or
    the command's `{checkpoint}` filled in (with nothing, on a fresh start)."""
    spec = dict(spec, resumed_from=checkpoint)
    spec["env"] = dict(spec.get("env") or {})
    spec["env"].pop(boxpolicy.RESUME_ENV, None)
    if checkpoint:
        spec["env"][boxpolicy.RESUME_ENV] = checkpoint
    if policy.get("checkpoint_dir"):
        body, spec["args"], spec["command"] = boxpolicy.resumed(
            spec.get("kind"), body, spec.get("args"), spec.get("command"), policy.get("resume_arg"), checkpoint)
    return spec, body
