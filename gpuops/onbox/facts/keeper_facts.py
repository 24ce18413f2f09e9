"""On-box facts a keeper (gpuops.keeper) asks of the box a run is on. Entry: main(argv).

  where   the absolute working directory and checkpoint directory a run launched with `workdir`
          and `checkpoint_dir` would use here (a relative checkpoint directory is the job's
          working directory's, as gpuops.onbox.run.boxpolicy.check makes it), so a checkpoint from
          the vault is pushed where the resumed run looks for it.
  run     the run's record as its supervisor keeps it (phase, ended, final, the current attempt's
          liveness, the run's and the attempt's directories), this boot's id, and the verdict on its checkpoint directory by the
          run's own definition of complete (gpuops.onbox.run.checkpoints): what the keeper may copy,
          each a "dir" or one "file".

Only facts; the keeper judges them (gpuops.keeper.rules).
"""

import os
import time

from ..run import checkpoints, command, boxpolicy, runrecord
from ..host import jobrecord, procs
from ..host.jobrecord import META, JobError

MAX_LISTED = 200  # complete checkpoints named in one answer, newest first


def where(opts) -> dict:
    workdir = command.workdir(opts.get("workdir"))
    policy = boxpolicy.check({"checkpoint_dir": opts.get("checkpoint_dir")}, workdir)
    return {"workdir": workdir, "checkpoint_dir": policy.get("checkpoint_dir"), "boot_id": procs.boot_id(),
            "now": time.time()}


def run(opts):
    run_id = jobrecord.resolve(opts.get("run"), follow=False)
    rec = runrecord.read(run_id)
    if rec is None:
        raise JobError("not-found", "job %s is not a run (no run.json)" % run_id)
    current = rec.get("current") if isinstance(rec.get("current"), str) else run_id
    meta = jobrecord.read_json(jobrecord.path(current, META)) or {}
    out = {"now": time.time(), "boot_id": procs.boot_id(), "run_id": run_id, "current": current,
           "phase": rec.get("phase"), "ended": runrecord.ended(rec), "final": rec.get("final"),
           "ended_at": rec.get("ended_at") if isinstance(rec.get("ended_at"), (int, float)) else None,
           "supervisor_alive": runrecord.supervisor_alive(rec),
           "attempt_liveness": jobrecord.liveness(meta) if meta else "gone",
           "run_dir": jobrecord.job_dir(run_id), "attempt_dir": jobrecord.job_dir(current), "checkpoints": None}
    policy = rec.get("policy") or {}
    if policy.get("checkpoint_dir"):
        interval = min(max(float(opts.get("interval_s") or 0), 0.0), 10.0)
        verdict = checkpoints.newest_complete(policy["checkpoint_dir"], policy.get("checkpoint_glob"),
                                              interval_s=interval)
        complete = verdict.get("complete") or []
        out["checkpoints"] = {"dir": verdict.get("dir"), "error": verdict.get("error"),
                              "complete": [{"name": e["name"], "kind": e.get("kind"), "step": checkpoints.step_of(e["name"]),
                                            "size": e.get("size"), "mtime": e.get("mtime")} for e in complete[:MAX_LISTED]],
                              "protected": list(verdict.get("protected") or [])[:MAX_LISTED],
                              "best": _best(verdict)}
    return out


def _best(verdict):
    """The names of the run's best checkpoints where the checkpoint rules name them (a name, or a
    list of them), within what the answer lists."""
    best = verdict.get("best")
    names = best if isinstance(best, list) else [best]
    names = [(n.get("name") if isinstance(n, dict) else n) for n in names]
    return [os.path.basename(n) for n in names if isinstance(n, str) and n][:MAX_LISTED]


def main(argv):
    return jobrecord.serve({"where": where, "run": run}, argv)
