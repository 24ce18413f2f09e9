"""Ray Jobs as an engine, on this side (its box half: gpuops.onbox.engines.ray_engine, on the Ray head):
`launch --engine ray --host HEAD` submits the job to the cluster through the head's Jobs API.
Ray is needed on the head, never here: the driver gpuops ships (gpuops.onbox.engines.ray_driver) is the
standard library, and this module imports nothing of Ray.

Ray's PENDING, RUNNING, STOPPED, SUCCEEDED and FAILED map onto the state table (a stopped job has
ended: CANCELLED); a FAILED job carries the driver's exit code when Ray has it, and one whose
driver died of a signal is KILLED. Its flags reserve resources for the driver (which runs on the
head); they are passed as given, so Ray judges them in its own words, like sbatch does Slurm's.

A run policy is enforced inside the Ray job: its driver is the run's supervisor (gpuops.onbox.
ray_run), and each attempt's end is the one that supervisor recorded (TIMEOUT at the run's
--max-runtime, a stall's reason), while Ray runs the submission on.
"""

import base64

from .. import errors
from ..jobs import records, rows, runpolicy
from .. import states
from ..jobs.records import ExitRecord, JobFacts, Meta, SchedulerSaid
from ..states import CANCELLED, COMPLETED, FAILED, KILLED, PENDING, UNREACHABLE, VANISHED
from .base import Engine

FLAGS = {
    "entrypoint_num_gpus": "Ray: GPUs reserved for the job's driver, which runs on the head (its tasks ask for "
                           "their own with @ray.remote(num_gpus=...))",
    "entrypoint_num_cpus": "Ray: CPUs reserved for the job's driver on the head",
    "entrypoint_memory": "Ray: memory in bytes reserved for the job's driver on the head",
    "ship_workdir": "Ray: also upload --workdir as the job's runtime_env working_dir, so Ray's workers on every "
                    "node run in a copy of it (at most 100 MiB zipped)",
}


class Ray(Engine):
    name, title = "ray", "Ray"
    help = "a Ray Jobs submission to the cluster whose head is --host; ray on the head, not here"
    flags = FLAGS
    switches = ("ship_workdir",)
    states = {"PENDING": PENDING, "RUNNING": states.RUNNING, "STOPPED": CANCELLED, "SUCCEEDED": COMPLETED,
              "FAILED": FAILED}
    meta_fields = {"ray_submission_id": (str, type(None))}
    job_id_key = "ray_submission_id"
    # The job's driver runs the box's run loop around the command, inside the Ray job on the head
    # (gpuops.onbox.engines.ray_run): the whole policy holds there, judged by triage's classifier.
    policy_fields = runpolicy.ENFORCED
    stop_target = {"ray_submission_id": str, "status": (str, type(None))}

    def decide(self, row: dict, facts: dict, meta: dict) -> None:
        f = records.read(JobFacts, facts)
        sched, rec = records.read(SchedulerSaid, f.scheduler), records.read(ExitRecord, f.exit)
        job = sched.job or rec.scheduler or {}
        if sched.source == "supervisor":  # an attempt of a run, ended while Ray runs the run on
            job = dict(job, status=_attempt_word(rec))
        sid = meta.get("ray_submission_id")
        row.update(ray_submission_id=sid, engine_job_id=sid, scheduler_state=job.get("status") or None,
                   scheduler_reason=job.get("message") or None)
        if sched.known is None and not f.exit:
            row.update(state=UNREACHABLE, reason=sched.error or "the Ray dashboard did not answer")
            return
        if not sched.known and not f.exit:
            row.update(state=VANISHED, reason="the Ray cluster no longer knows this job (restarted?) and gpuops never "
                                              "saw it end")
            return
        row["state"] = self.state_of(job.get("status")) or PENDING
        if rec.ended_at is not None:
            row["ended_at"] = rec.ended_at
            row["duration_s"] = rows.since(rec.ended_at, records.read(Meta, meta).launched_at)
        if row["state"] == FAILED and rec.signal:
            row.update(state=KILLED, signal=rec.signal)
        elif row["state"] == FAILED and rec.exit_code:
            row.update(exit_code=rec.exit_code, hint=rows.code_hint(rec.exit_code))
        elif row["state"] == FAILED:
            row["reason"] = "Ray: %s%s" % (job.get("error_type") or "failed", ": " + job["message"]
                                           if job.get("message") else "")
        elif row["state"] == CANCELLED:
            row["reason"] = "stopped through Ray (gpuops stop or ray job stop)"
        elif row["state"] == PENDING:
            row["reason"] = "Ray has not started it: %s" % (job.get("message") or "waiting for the head's resources")
        if sched.source == "supervisor":  # an attempt of a run its driver ended (a limit, a stall)
            rows.ended_by_supervisor(row, rec)

    def submission(self, opts, asked, torchrun=None):
        from .. import onbox

        self._takes_nothing({k: v for k, v in asked.items() if k not in self.flags}, torchrun)
        if opts.get("gpus"):
            raise errors.UsageError("--gpus pins devices on one box; Ray assigns GPUs: ask with --entrypoint-num-gpus "
                                    "(and in the code, @ray.remote(num_gpus=...))")
        opts.update(engine=self.name, resources=_asked(asked),
                    driver_b64=base64.b64encode(onbox.script("ray_driver")).decode("ascii"))
        return asked

    def with_policy(self, opts, policy, given):
        """A run's driver is its supervisor (gpuops.onbox.engines.ray_run, a bundle of the run loop and
        triage's classifier); a job without a policy keeps the small driver."""
        from .. import onbox
        from ..onbox.run.boxpolicy import PLACEHOLDER

        if policy.get("checkpoint_dir") and PLACEHOLDER in (opts.get("command") or ""):
            # the driver starts attempt 1 from the submitted command as it is: nothing fills its {checkpoint}
            raise errors.UsageError(f"under Ray, {PLACEHOLDER} cannot stand in --cmd: give --resume-arg "
                                    f"'--resume {PLACEHOLDER}' (added at the end of the command)")
        opts.update(policy=policy, driver_b64=base64.b64encode(onbox.script("ray_run")).decode("ascii"))
        return []

    def queue_submission(self, opts, asked):
        raise errors.UsageError("queue --engine ray: a queue runs on the box's supervisor or Slurm; launch each "
                                "entry as its own Ray job")

    def retry_opts(self, asked):
        return {"engine": self.name, "resources": _asked(asked)}

    def explain_rejection(self, err: errors.Rejected, asked: dict) -> errors.GpuopsError:
        """Ray's refusal with the gpuops flag it names (Ray's words name its fields)."""
        host, _, said = err.message.partition(": ")
        flag = next((f"--{k.replace('_', '-')}" for k in asked if k in said), None)
        said = said.removeprefix("Ray refused it: ")
        return errors.Rejected(f"{host}: Ray refused the job" + (f" ({flag})" if flag else "") + f": {said}")

    def plan(self, targets):
        return ({"ray_submission_ids": [t["ray_submission_id"] for t in targets]},
                [[t["ray_submission_id"]] for t in targets])

    def diagnosis(self, ev, row, host, jobs_dir, triaged=None, pid=None):
        from .ray_diagnose import diagnosis

        return diagnosis(self, ev, row, host, jobs_dir, triaged)

    def triage_inputs(self, row, facts):
        """gpuops' state, and the exit record a log's triage may believe: the driver's own exit
        where Ray says it succeeded or failed with a code; none where Ray stopped it."""
        rec = facts.get("exit") or {}
        believed = rec if row.get("state") in (COMPLETED, FAILED, KILLED) else None
        return row["state"], ({"exit_code": believed.get("exit_code"), "signal": believed.get("signal")}
                              if believed else None)

    def present(self, facts):
        from .ray_preflight import present

        return present(facts)

    def preflight(self, facts, cluster):
        from .ray_preflight import findings

        return findings(cluster)


ENGINE = Ray()


def _attempt_word(rec: ExitRecord) -> str:
    """Ray's word for a run's attempt, from the exit record the run's supervisor (the Ray job's
    driver) wrote of it: Ray itself never saw the attempt end."""
    if rec.ended_by == "stop":
        return "STOPPED"
    return "SUCCEEDED" if rec.exit_code == 0 and not rec.signal else "FAILED"


def _asked(asked):
    """The flags as Ray's fields: numbers where they read as numbers, else as given (Ray judges)."""
    out = {}
    for key, value in asked.items():
        if isinstance(value, bool):
            out[key] = value
            continue
        text = str(value).strip()
        for kind in (int, float):
            try:
                out[key] = kind(text)
                break
            except ValueError:
                out[key] = text
    return out
