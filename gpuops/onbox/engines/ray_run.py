"""The driver of a Ray job with a run policy, which makes the driver the run's supervisor. Entry:
main(argv), argv = [job dir], as gpuops.onbox.engines.ray_driver's (a job without a policy, a retry of an
attempt, is run by that one); the workstation sends this one, bundled, only with a policy, since it
carries the run loop and triage's classifier.

The run policy is enforced inside the Ray job, on the head, by the box's own run loop
(gpuops.onbox.run.runloop): each attempt is started, watched for a stall and the run's time limit,
classified with triage's classifier when it fails, and retried from the newest complete checkpoint,
while the workstation is asleep or gone. Ray sees one job, the run; it has no retry of a job's
entrypoint of its own, and its task and actor retries do not judge why something failed.

Attempt 1 is the submitted job's own record; each later attempt is a job of its own beside it
(gpuops.onbox.run.supervised.prepare makes it from the same command), recorded as a Ray job of the same
submission, so status, wait, stop and diagnose reach it through Ray's engine like the first. An
attempt's end is written by the loop (exit.json, with what ended it), which the engine believes
over Ray's account of the submission: Ray still says RUNNING while the run retries.

A signal the driver itself receives is Ray stopping the job (`gpuops stop` or `ray job stop`: Ray
signals the driver's whole process tree, then SIGKILLs it). The run cannot go on in a stopped Ray
job, so the stop is recorded on the current attempt before the signal is passed on: the loop then
ends the run as stopped, never retried. The driver ends as the run's last attempt ended.
"""

import os
import signal
import sys
import time

from ..host import jobrecord
from . import ray_driver
from ..run import runloop, runrecord, supervised, wrapper
from ..host.jobrecord import CMD, EXIT, META, STOP

# What each later attempt's record takes from the submission's (gpuops.onbox.engines.ray_submit)
RAY_FIELDS = ("engine", "ray_submission_id", "ray_version", "dashboard", "resources")
# What an attempt is made from (supervised.prepare's spec), as the submission recorded it
SPEC_FIELDS = ("name", "labels", "command", "kind", "args", "workdir", "env", "progress_regex", "profile", "pre",
               "queue")


class RayStopped(wrapper.Supervisor):
    """The run's supervisor in a Ray job's driver: a stop Ray delivers ends the run."""

    def __init__(self, run_id) -> None:
        self.run_id = run_id
        wrapper.Supervisor.__init__(self)

    def _forward(self, signum, frame) -> None:
        stop = jobrecord.path(jobrecord.current(self.run_id), STOP)
        if not os.path.exists(stop):
            jobrecord.write_json(stop, {"requested_at": time.time(), "signals": [], "by": "ray"})
        wrapper.Supervisor._forward(self, signum, frame)


def maker(first):
    """The run loop's `make` for attempts after the first: a job like the supervisor's, recorded as
    one of this Ray submission."""
    def make(spec, body):
        return supervised.prepare(spec, body, dict((k, first.get(k)) for k in RAY_FIELDS))
    return make


def main(argv):
    jdir = argv[0]
    meta = ray_driver.read_json(os.path.join(jdir, META)) or {}
    if not meta.get("policy"):
        return ray_driver.main(argv)
    spec, env, secrets = ray_driver.started(jdir)
    said = "gpuops: run %s under its policy; each attempt's log is in its own job directory beside %s\n"
    sys.stdout.write(said % (meta.get("job_id"), jdir))
    sys.stdout.flush()
    code, sig = run(jdir, spec.get("argv") or [], env, meta, secrets)
    sys.stdout.write("gpuops: run %s ended: %s\n" % (meta.get("job_id"), sig or "exit %s" % code))
    sys.stdout.flush()
    return ray_driver.end_as(-getattr(signal, sig, signal.SIGKILL) if sig else code)


def run(jdir, argv, env, meta, secrets):
    """Run the whole run in this process; (exit code, signal name) of its last attempt."""
    run_id = meta["job_id"]
    os.environ["GPUOPS_JOBS_DIR"] = os.path.dirname(os.path.abspath(jdir))  # later attempts go beside it
    with open(os.path.join(jdir, CMD), "rb") as f:
        body = f.read()
    spec = dict((k, meta.get(k)) for k in SPEC_FIELDS)
    spec["secrets"] = secrets  # in this process's memory only: each attempt's environment is made from it
    env = dict(env, GPUOPS_RUN_ID=run_id, GPUOPS_ATTEMPT="1")
    supervise = runloop.supervisor(spec, body, maker(meta), new_supervisor=lambda: RayStopped(run_id))
    supervise(jdir, argv, env, meta.get("workdir") or None, meta, None)
    return outcome(run_id)


def outcome(run_id):
    """(exit code, signal name) of the run's last attempt, from its exit record."""
    rec = runrecord.read(run_id) or {}
    last = (rec.get("final") or {}).get("job") or rec.get("current") or run_id
    ended = jobrecord.read_json(jobrecord.path(last, EXIT)) or {}
    if ended.get("signal"):
        return None, ended["signal"]
    code = ended.get("exit_code")
    return (code if isinstance(code, int) and not isinstance(code, bool) else 1), None
