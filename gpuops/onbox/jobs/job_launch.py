"""On-box `launch` and `retry`: start a job on its engine (gpuops.onbox.engines.registry: the supervisor,
Slurm ...), once per idempotency key, and look at it for a moment. Entry: main(argv). The options
(command, env, secrets) come on stdin, never in argv."""

import base64
import os
import shlex

from ..run import checkpoints, boxpolicy, runrecord
from ..engines import registry
from . import job_facts
from ..host import jobrecord, signals
from ..host.jobrecord import CMD, LOG, META, JobError

LOG_HEAD = 4096  # what a launch answers of the log of a job that died at once: its first error is there


def body_of(spec):
    if spec.get("kind") == "script":
        return base64.b64decode(spec.get("script_b64") or "")
    cmd = spec.get("command")
    if not cmd or not cmd.strip():
        raise JobError("usage", "empty command")
    return (cmd if cmd.endswith("\n") else cmd + "\n").encode("utf-8")


def confirmed(job_id, seconds):
    """The job's facts once it has run `seconds`, or sooner once it died: a typo or a missing file
    ends a job within moments, and the caller should hear that, not "started". A job that died
    comes with the head of its log."""
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    if meta.get("pid") and seconds:
        signals.wait_until(lambda: jobrecord.liveness(meta) != "alive", seconds)
    out = {"job": job_facts.facts(job_id)}
    if out["job"].get("exit") is not None:
        try:
            with open(jobrecord.path(job_id, LOG), "rb") as f:
                out["log_head"] = f.read(LOG_HEAD).decode("utf-8", "replace")
        except (OSError, IOError):
            out["log_head"] = ""
    return out


def launch(opts):
    return _started(opts, body_of(opts), registry.named(opts.get("engine")).submit, opts.get("confirm_s"))


def _started(spec, body, make, confirm_s) -> dict:
    """The job `make(spec, body)` starts, unless one with the spec's key exists already; looked at
    for up to confirm_s once started."""
    root = jobrecord.ensure_root()
    with jobrecord.Locked(os.path.join(root, jobrecord.LOCK)):
        existing = jobrecord.by_key(spec["key"]) if spec.get("key") else None
        if existing:  # a run's key answers with where the run stands: its current attempt
            return {"existing": True, "job": job_facts.facts(jobrecord.current(existing))}
        job_id = make(spec, body)
    return dict(confirmed(job_id, float(confirm_s or 0)), existing=False)


# What a retry takes from its parent's record unless the retry says otherwise.
INHERITED = ("name", "labels", "command", "kind", "args", "workdir", "gpus", "progress_regex", "queue", "profile",
             "pre", "tb_logdir")


def retry(opts):
    """A child job from the parent's immutable command (and what its engine takes over: Slurm's
    resources ...), on the parent's engine."""
    parent_id = jobrecord.resolve(opts.get("job"))
    pdir = jobrecord.job_dir(parent_id)
    parent = jobrecord.read_json(os.path.join(pdir, META)) or {}
    engine = registry.of(parent)
    if opts.get("engine") and opts["engine"] != engine.NAME:
        raise JobError("usage", "job %s ran on %s, not %s: its retry takes no %s resources"
                       % (parent_id, engine.NAME, opts["engine"], opts["engine"]))
    engine.check_retry(parent_id, parent, opts)
    run = runrecord.read(runrecord.run_of(parent)) if runrecord.run_of(parent) else None
    if run is not None and not runrecord.ended(run):
        raise JobError("refused", "run %s is still going (attempt %s of %s): its supervisor retries it; stop it "
                                  "first" % (run.get("run_id"), run.get("attempt"), run.get("max_attempts")))
    policy = (run or {}).get("policy")
    if isinstance(policy, dict) and not policy.get("gang"):  # a run: its retry is a run of its own
        return _retry_run(opts, engine, parent_id, run, policy)
    body, spec = _from(parent_id, pdir, parent, engine, opts)
    resume = opts.get("resume_arg")
    found = None
    if resume and boxpolicy.PLACEHOLDER in resume:
        found = _newest_checkpoint(opts, parent, spec.get("workdir"))
        body, spec["args"], spec["command"] = boxpolicy.resumed(spec["kind"], body, spec.get("args"),
                                                                spec.get("command"), resume, found["path"])
        spec["env"][boxpolicy.RESUME_ENV] = found["path"]
    elif resume:
        if spec["kind"] == "script":
            try:
                spec["args"] = list(spec.get("args") or []) + shlex.split(resume)
            except ValueError as e:
                raise JobError("usage", "--resume-arg %r cannot be split into words: %s" % (resume, e))
        else:
            body = body.rstrip(b"\n") + b" " + resume.encode("utf-8") + b"\n"
            spec["command"] = (spec.get("command") or "").rstrip("\n") + " " + resume
    engine.retried(spec, parent, opts)
    out = dict(_started(spec, body, engine.submit, opts.get("confirm_s")), parent_job_id=parent_id)
    if found is not None:
        out["checkpoint"] = {"path": found["path"], "skipped": found["incomplete"][:20], "unsafe": found["unsafe"][:20]}
    return out


def _from(parent_id, pdir, parent, engine, opts):
    """(command, spec) of a retry of the job in `pdir` (its record `parent`), as it was launched."""
    missing = sorted(set(parent.get("secret_env_names") or []) - set(opts.get("secrets") or {}))
    if missing:
        raise JobError("usage", "job %s was launched with secrets %s: pass --secret-env for each" %
                       (parent_id, ", ".join(missing)))
    with open(os.path.join(pdir, CMD), "rb") as f:
        body = f.read()
    spec = dict((k, parent.get(k)) for k in INHERITED + engine.INHERITED)
    spec["env"] = dict(parent.get("env") or {}, **(opts.get("env") or {}))
    spec["secrets"] = opts.get("secrets") or {}
    spec["parent_job_id"], spec["key"] = parent_id, opts.get("key")
    return body, spec


def _retry_run(opts, engine, parent_id, run, policy):
    """A retry of a run (its supervisor gone: a reboot, a kill, or the run ended): a new run under
    the same policy, from the run's first command, its first attempt resuming from the newest
    complete checkpoint of the run's checkpoint directory (from the beginning when there is none)."""
    first_id = run.get("run_id")
    fdir = jobrecord.job_dir(first_id)
    first = jobrecord.read_json(os.path.join(fdir, META)) or {}
    body, spec = _from(parent_id, fdir, first, engine, opts)
    policy = dict(policy, resume_arg=opts.get("resume_arg") or policy.get("resume_arg"))
    verdict, checkpoint = None, None
    if policy.get("checkpoint_dir"):
        try:
            verdict = checkpoints.newest_complete(policy["checkpoint_dir"], policy.get("checkpoint_glob"))
        except ValueError as e:
            raise JobError("usage", str(e))
        checkpoint = verdict["path"]
    spec.update(policy=policy, resumed_from=checkpoint)
    engine.retried(spec, first, opts)
    out = dict(_started(spec, body, engine.submit, opts.get("confirm_s")), parent_job_id=parent_id)
    if checkpoint:
        out["checkpoint"] = {"path": checkpoint, "skipped": verdict["incomplete"][:20], "unsafe": verdict["unsafe"][:20]}
    return out


def _newest_checkpoint(opts, parent, workdir):
    """The verdict on the checkpoint directory a retry's --resume-arg {checkpoint} resumes from
    (its --checkpoint-dir, else its run's), once it names a complete checkpoint."""
    run = runrecord.read(runrecord.run_of(parent)) if runrecord.run_of(parent) else None
    # a supervised run's policy is its run record's; a Slurm job's, its own record's
    ran = (run or {}).get("policy") or parent.get("policy") or {}
    asked = opts.get("checkpoint_dir") or ran.get("checkpoint_dir")
    if not asked:
        raise JobError("usage", "--resume-arg with %s needs --checkpoint-dir: where the job wrote its checkpoints"
                       % boxpolicy.PLACEHOLDER)
    policy = boxpolicy.check({"checkpoint_dir": asked, "checkpoint_glob": opts.get("checkpoint_glob") or
                              ran.get("checkpoint_glob")}, workdir)
    try:
        verdict = checkpoints.newest_complete(policy["checkpoint_dir"], policy.get("checkpoint_glob"))
    except ValueError as e:
        raise JobError("usage", str(e))
    if not verdict["path"]:
        why = "; ".join("%s: %s" % (e["name"], e["why"]) for e in verdict["incomplete"][:5])
        raise JobError("not-found", "no complete checkpoint in %s to resume from%s" % (
            policy["checkpoint_dir"], " (%s)" % why if why else ""))
    return verdict


def main(argv):
    return jobrecord.serve({"launch": launch, "retry": retry}, argv)
