"""The watcher of a Slurm job under a run policy, inside its allocation: the box's supervisor
(gpuops.onbox.run.runloop's Run and Attempt, with runwatch's watch) runs the command in the batch
script, as it does a Ray job's driver (gpuops.onbox.engines.ray_run), so --stall-after (stall kill with
evidence: gpuops.onbox.run.stallevidence), --notify, --keep-checkpoints and --retry-on hold under
Slurm too. Entry: main([command file, extra arguments...]), shipped into the job's record
directory as watch.py by the submission (gpuops.engines.slurm's with_policy), as resume.py is:
a compute node has nothing else of gpuops. The batch script runs it after resume.py has
recorded the start (gpuops.onbox.engines.slurm_script).

One allocation runs one attempt. A retry is a requeue of the same Slurm job (`scontrol
requeue`), never a second attempt inside the allocation, so the engine's state stays Slurm's own
word (gpuops.engines.slurm_state, from scontrol and sacct): one gpuops job is one Slurm job, each
attempt one of its starts (Restarts, sacct's REQUEUED rows), as a preemption's retry already is.
A retry in place would leave Slurm saying RUNNING over attempts that ended, and count retries in
two places. So resume.py alone counts retries against --max-retries (each start after a requeue,
whoever requeued), decides whether a start may run at all, and picks its checkpoint; the watcher
decides only whether the attempt it watched is worth another (retrypolicy, with the attempt's
number from resume.py's start event), and asks Slurm for it. The requeue hands the nodes back
while the job waits (Slurm keeps a requeued job back a while: that is its backoff), and another
node may take it. --max-runtime is Slurm's --time (lowered at each requeue), not the watcher's.

Who ends an allocation decides:
  * the watcher (a stall, a failed exit of a class --retry-on names): the attempt is judged
    and requeued, or ends the job (gave-up: the batch script exits with the command's code and
    the job's reason says why);
  * `gpuops stop`: it records the stop (stop.json) before its scancel, so the attempt is ended
    by the stop and never retried. Slurm requeues a job it has already cancelled, so the watcher
    looks for a stop (and asks the controller that the job still runs) before it requeues and
    again after, when it cancels the job once more: a stop always wins over a retry;
  * Slurm itself (a signal the watcher did not send, from its time limit, a preemption, a
    pause's requeuehold, a plain scancel): Slurm requeues the job or ends it, and its state says
    which; the watcher records the attempt's end and requeues nothing.

Each attempt's own record (meta.json, exit.json, telemetry, the stall's evidence) is kept in
attempt-N/ inside the job's directory, whose log is the job's: Slurm's record of the job is the
job directory's own, never overwritten by an attempt's. The watcher writes no run.json (see
WatchedRun.save): what status says of the run comes from the events (events.jsonl).
"""

import os
import shlex
import shutil
import signal
import sys
import time

from ..run import command, runevents, runloop, wrapper
from ..host import jobrecord
from . import slurm, slurm_resume
from ..host.jobrecord import EXIT, LOG, META, STOP

ATTEMPT_DIR = "attempt-%d"
# How long a watcher whose attempt has ended keeps trying to write what a full disk refused: Slurm
# holds the allocation until the batch script ends, so not the box's hour.
DRAIN_S = 30.0
# What the watcher leaves to Slurm: --max-runtime is the job's --time, lowered at each requeue.
NOT_WATCHED = ("max_runtime_s",)


def _say(text: str) -> None:
    sys.stderr.write("[gpuops] %s\n" % text)
    sys.stderr.flush()


def stop_asked(jdir):
    """Whether `gpuops stop` recorded a stop of the job (before its first scancel)."""
    return os.path.exists(os.path.join(jdir, STOP))


class SlurmWatched(wrapper.Supervisor):
    """The supervisor in a batch script: a `gpuops stop` is put on the attempt before its signal
    is passed on (the watch then ends the attempt as stopped), and the checkpoint signal the
    batch shell hands on (`gpuops pause`, sbatch --signal) goes to the command, as it does
    without a watcher: it ends nothing."""

    def __init__(self, jdir, checkpoint) -> None:
        self.jdir, self.attempt_dir = jdir, None
        wrapper.Supervisor.__init__(self)
        sig = getattr(signal, "SIG" + checkpoint_signal(checkpoint), None)
        if sig is not None and sig not in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._checkpoint)

    def _checkpoint(self, signum, _frame) -> None:
        if self.pgid:
            try:
                os.killpg(self.pgid, signum)
            except OSError:
                pass

    def _forward(self, signum, frame) -> None:
        self.mark_stop()
        wrapper.Supervisor._forward(self, signum, frame)

    def mark_stop(self) -> None:
        """Put the job's stop record on the attempt, once (what the watch reads)."""
        if self.attempt_dir and stop_asked(self.jdir) and not stop_asked(self.attempt_dir):
            rec = jobrecord.read_json(os.path.join(self.jdir, STOP)) or {"requested_at": time.time()}
            jobrecord.write_json(os.path.join(self.attempt_dir, STOP), rec)


class WatchedRun(runloop.Run):
    """The run's state in the watcher of one allocation: the job's directory and Slurm job id too."""

    def __init__(self, jdir, meta, body, sup) -> None:
        runloop.Run.__init__(self, meta["job_id"], dict(meta, policy=watched_policy(meta["policy"])), None, body,
                             None, sup)
        self.jdir = jdir
        self.slurm_id = str(meta.get("slurm_job_id") or os.environ.get("SLURM_JOB_ID") or "")
        # checkpoints earlier attempts failed to load: passed over, and the fallback's bound kept, across requeues
        self.failed = slurm_resume.failed_checkpoints(runevents.read(jdir))

    def save(self, **changes) -> None:
        """Kept in this process only: no run.json. The job's record is Slurm's and its events
        (slurm_resume.run_facts), and a run.json naming this process as the run's supervisor would
        be judged on the login node, where it never lives."""
        self.rec.update(changes)


class Requeued(runloop.Attempt):
    """An attempt whose retry is a requeue of its Slurm job (see the module's docstring)."""

    def next(self, decision):
        run, n, jdir = self.run, self.number, self.run.jdir
        run.sup.mark_stop()
        if stop_asked(jdir) and decision["class"] != "cancelled":  # a stop that came as the attempt ended
            decision = dict(decision, retry=False, why="gpuops stop ended it: never retried")
            decision["class"] = "cancelled"
        outside = run.sup.outside
        if outside and decision["class"] not in (None, "cancelled"):
            _say("attempt %d ended as Slurm ended the allocation (%s): Slurm requeues the job or ends it, and its "
                 "state says which; the watcher requeues nothing" % (n, outside))
            run.save(phase="ended", ended_at=time.time(), next_at=None)
            return None
        if not decision["retry"]:
            return runloop.Attempt.next(self, decision)
        return self.requeue(decision)

    def requeue(self, decision):
        run, n = self.run, self.number
        klass, reason = decision["class"], decision.get("reason") or decision["why"]
        run.publish("attempt-failed", n, self.job_id, **{"class": klass, "why": "%s (%s)" % (reason, klass)})
        if stop_asked(run.jdir):
            return self.stopped("gpuops stop ended the run: not requeued")
        refused = requeue_refused(run.slurm_id)
        if refused:
            return self.gave_up(klass, refused)
        why = "%s (%s): Slurm requeues the job for attempt %d of %d" % (reason, klass, n + 1, run.rec["max_attempts"])
        run.publish("retrying", n, self.job_id, next_attempt=n + 1, requeue=True, backoff_s=None,
                    **{"class": klass, "why": why})
        run.save(phase="backoff", next_at=None)
        _say(why)
        rc, _, err = slurm.run(["scontrol", "requeue", run.slurm_id])
        if rc != 0:
            return self.gave_up(klass, "scontrol requeue %s refused: %s" % (run.slurm_id, slurm.last_line(err)))
        if stop_asked(run.jdir):  # the stop came as Slurm took the requeue: it may have revived a cancelled job
            slurm.run(["scancel", run.slurm_id])
            return self.stopped("gpuops stop came while the job was requeued: cancelled again, a stop wins over "
                                "a retry")
        return None

    def stopped(self, why):
        return self.ended("stopped", "cancelled", why)

    def gave_up(self, klass, why):
        return self.ended("gave-up", klass, why)

    def ended(self, kind, klass, why):
        run = self.run
        _say(why)
        run.publish(kind, self.number, self.job_id, why=why, **{"class": klass})
        run.save(phase="ended", ended_at=time.time(), next_at=None,
                 final={"class": klass, "why": why, "job": self.job_id, "attempt": self.number})
        return None


def requeue_refused(slurm_id):
    """Why the job cannot be requeued now (the controller does not say it runs: a scancel or
    Slurm's own end came first, or it could not be asked), or None."""
    try:
        job = slurm.show_job(slurm_id) or {}
    except jobrecord.JobError as e:
        return "the Slurm controller could not say the job still runs (%s): not requeued" % e
    state = (job.get("JobState") or "").split(" ")[0]
    if state != "RUNNING":
        return "Slurm says the job is %s, no longer running: not requeued" % (state or "unknown")
    return None


def watched_policy(policy) -> dict:
    return dict((k, v) for k, v in policy.items() if k not in NOT_WATCHED)


def attempt_dir(jdir, number: int):
    """attempt-N/ in the job's directory, its log the job's own (Slurm appends the job's output there)."""
    adir = os.path.join(jdir, ATTEMPT_DIR % number)
    if not os.path.isdir(adir):
        os.mkdir(adir, 0o700)
    log = os.path.join(adir, LOG)
    if not os.path.lexists(log):
        os.symlink(os.path.join("..", LOG), log)
    return adir


def exit_status(record):
    """The batch script's exit status for an attempt's exit record, as a shell would say it."""
    if record.get("signal"):
        number = getattr(signal, str(record["signal"]), None)
        return 128 + int(number) if number is not None else 1
    code = record.get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else 1


def command_argv(meta, cmdfile, body, extra):
    """The argv of the command, as the batch script runs it without a watcher (the platform's hook
    is the batch script's): a script exec'd with its arguments, a command line read by a bash that
    survives the checkpoint signal (a trap, so the programs it starts get the default back) while
    the programs it started get it."""
    if meta.get("kind") == "script":
        return command.interpreter_argv(cmdfile, body, list(meta.get("args") or []) + list(extra))[0]
    sig = checkpoint_signal(meta.get("signal"))
    return [shutil.which("bash") or "/bin/bash", "-c", 'trap : %s; . "$1"' % shlex.quote(sig), "gpuops-cmd", cmdfile]


def checkpoint_signal(name: str):
    """The checkpoint signal's name without SIG (USR1 unless the job's --signal says another)."""
    return str(name or "USR1").upper().replace("SIG", "", 1)


def main(argv):
    if not argv:
        _say("watch.py needs the command file to run")
        return 2
    jdir = os.environ.get("GPUOPS_JOB_DIR") or os.getcwd()
    os.environ["GPUOPS_JOBS_DIR"] = os.path.dirname(os.path.abspath(jdir))
    meta = jobrecord.read_json(os.path.join(jdir, META)) or {}
    job_id = meta["job_id"]
    start = slurm_resume.last_start(jdir) or {}
    number = int(start.get("attempt") or 1)
    checkpoint = start.get("checkpoint") or None
    with open(argv[0], "rb") as f:
        body = f.read()
    run_argv = command_argv(meta, argv[0], body, argv[1:])
    adir = attempt_dir(jdir, number)
    sup = SlurmWatched(jdir, meta.get("signal"))
    sup.attempt_dir = adir
    run = WatchedRun(jdir, meta, body, sup)
    run.rec.update(attempt=number, current=job_id)
    env = dict(os.environ, GPUOPS_RUN_ID=job_id, GPUOPS_ATTEMPT=str(number))
    ameta = {"job_id": job_id, "engine": slurm.NAME, "slurm_job_id": run.slurm_id, "attempt": number,
             "restart": start.get("restart"), "node": os.uname()[1], "launched_at": time.time(),
             "progress_regex": meta.get("progress_regex"), "log": os.path.join(jdir, LOG), "argv": run_argv}
    attempt = Requeued(run, number, job_id, adir, run_argv, env, meta.get("workdir") or None, ameta, checkpoint)
    attempt.spawn()
    attempt.announce()
    attempt.finish()
    run.drain(DRAIN_S)
    return exit_status(jobrecord.read_json(os.path.join(adir, EXIT)) or {})
