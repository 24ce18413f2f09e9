"""The supervisor's job, started: a job directory, its immutable command, and the supervisor
(gpuops.onbox.run.wrapper) that runs it (gpuops.onbox.engines.box_engine's submit). A job with a run policy is
a run: the same supervisor runs its attempts (gpuops.onbox.run.runloop), each made by `prepare`."""

import os

from ..run import command, runloop, boxpolicy, runrecord, supervised, wrapper
from ..host import gpu_pins, jobrecord

NAME = "box"


def create(spec, body):
    """Start one job from `spec` and the bytes of its command; returns the job id. With a run
    policy, the job is a run's first attempt and its supervisor runs the whole run.

    The caller holds the jobs-dir lock, so the GPUs --gpus names are judged against the pins of
    the jobs running (gpuops.onbox.host.gpu_pins) with no other launch between. `body` becomes the
    immutable `cmd` file (mode 0500).
    """
    policy = boxpolicy.check(spec.get("policy"), command.workdir(spec.get("workdir")))
    if policy is not None:
        spec = dict(spec, policy=policy)
        boxpolicy.placed(spec.get("kind"), spec.get("command"), spec.get("args"), policy.get("resume_arg"))
        boxpolicy.check_sharing(policy, live_runs())
    if spec.get("gpus"):  # judged once, at launch: a run's later attempts take back its own GPUs
        spec = dict(spec, gpu_check=gpu_pins.admit(spec))
    # the run keeps `spec` and `body` as given: each attempt's {checkpoint} is filled in from them,
    # attempt 1's as a fresh start, or from the checkpoint a retried run resumes from
    first, first_body = spec, body
    if policy is not None and (spec.get("resumed_from") or policy.get("checkpoint_dir")):
        first, first_body = runloop.resume_spec(spec, body, policy, spec.get("resumed_from"))
        spec = dict(spec, resumed_from=None)  # each later attempt resumes from its own checkpoint
    job_id, jdir, argv, env, workdir, meta = prepare(first, first_body)
    if policy is None:
        wrapper.start(jdir, argv, env, workdir, meta)
    else:
        wrapper.start(jdir, argv, env, workdir, meta, supervise=runloop.supervisor(spec, body, prepare),
                      log_path=os.path.join(jdir, SUPERVISOR_LOG))
    return job_id


def live_runs():
    """[(run id, policy)] of the runs whose supervisor is still at work."""
    out = []
    for job_id in jobrecord.all_ids():
        rec = runrecord.read(job_id)
        if rec and not runrecord.ended(rec):
            out.append((job_id, rec.get("policy")))
    return out


SUPERVISOR_LOG = "supervisor.log"  # a run's supervisor's own output (its attempts' go to their logs)


def prepare(spec, body):
    """A job of this engine made ready for a supervisor to start (gpuops.onbox.run.supervised)."""
    return supervised.prepare(spec, body, {"engine": NAME})
