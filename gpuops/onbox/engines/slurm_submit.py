"""Submitting gpuops jobs to Slurm from the login node: a job, a retry's request and a queue's
chain. Not an entry: gpuops.onbox.engines.slurm_engine hands a job here when it asks for engine "slurm".

A job gets the same record directory as a supervised one (gpuops.onbox.host.jobrecord), on the
shared filesystem: its immutable `cmd`, the `batch.sh` sbatch runs (gpuops.onbox.engines.slurm_script),
meta.json with the Slurm job id and the resources asked, and `log`, where sbatch writes the job's
output (appending, so a requeued run continues it). Secrets are put in sbatch's environment
only (exported with the job, --export=ALL): never in argv, the script or the record.
An sbatch rejection removes the directory again and is reported with sbatch's own words (kind
"rejected"); a controller that does not answer is "unreachable".
"""

import os
import shutil
import socket
import time

from ..run import command, boxpolicy
from ..host import jobrecord
from . import slurm, slurm_script
from ..host.jobrecord import BATCH, CMD, LOG, META, JobError

# sbatch options the caller may pass (gpuops.engines.slurm_sbatch builds them); the rest gpuops sets itself.
ALLOWED = ("--nodes", "--ntasks-per-node", "--gpus-per-node", "--cpus-per-task", "--mem", "--time", "--partition",
           "--account", "--qos", "--constraint", "--exclusive", "--signal", "--dependency")


def _checked_options(options):
    for opt in options or []:
        if not isinstance(opt, str) or opt.split("=", 1)[0] not in ALLOWED or "\n" in opt:
            raise JobError("usage", "not an sbatch option gpuops passes: %r" % (opt,))
    return list(options or [])


def submit(spec, body):
    """Write the record and sbatch it; the job id. The caller holds the jobs-dir lock."""
    workdir = command.workdir(spec.get("workdir"), "the login node")
    options = _checked_options(spec.get("sbatch_options"))
    job_id = jobrecord.new_id()
    jdir = jobrecord.job_dir(job_id)
    os.mkdir(jdir, 0o700)
    try:
        return _submit(spec, body, job_id, jdir, workdir, options)
    except BaseException:
        shutil.rmtree(jdir, ignore_errors=True)
        raise


def _submit(spec, body, job_id, jdir, workdir, options):
    jobrecord.atomic_write(os.path.join(jdir, CMD), body, 0o500)
    policy = boxpolicy.check(spec.get("policy"), workdir)
    if policy is not None:
        boxpolicy.check_sharing(policy, live_runs())  # this job's record is not written yet
        if not spec.get("resume_helper"):
            raise JobError("usage", "a run policy under Slurm needs the resume helper gpuops ships with it")
        jobrecord.atomic_write(os.path.join(jdir, "resume.py"), spec["resume_helper"], 0o500)
        if spec.get("watch_helper"):
            jobrecord.atomic_write(os.path.join(jdir, "watch.py"), spec["watch_helper"], 0o500)
    script = slurm_script.render({"job_id": job_id, "job_dir": jdir, "kind": spec.get("kind"),
                                  "args": spec.get("args"), "env": spec.get("env"), "pre": spec.get("pre"),
                                  "signal": spec.get("signal"), "rdzv_port": spec.get("rdzv_port"),
                                  "resume": policy is not None,
                                  "watch": policy is not None and bool(spec.get("watch_helper"))})
    jobrecord.atomic_write(os.path.join(jdir, BATCH), script, 0o500)
    log = os.path.join(jdir, LOG)
    argv = ["sbatch", "--parsable", "--job-name", (spec.get("name") or job_id)[:128], "--output", log,
            "--open-mode=append", "--chdir", workdir, "--requeue", "--export=ALL",
            "--comment", slurm.comment(spec.get("labels"))]
    sig = spec.get("signal")
    if sig and spec.get("signal_lead_s"):
        argv.append("--signal=B:%s@%d" % (sig, int(spec["signal_lead_s"])))
    argv += options + [os.path.join(jdir, BATCH)]
    env = dict(os.environ)
    env.update(spec.get("secrets") or {})
    rc, out, err = slurm.run(argv, env=env)
    slurm_id = out.strip().split(";")[0] if rc == 0 else ""
    if not slurm_id.isdigit():
        raise JobError("rejected", err or "sbatch exited %d without a job id" % rc)
    meta = {
        "job_id": job_id, "engine": slurm.NAME, "slurm_job_id": slurm_id, "engine_job_id": slurm_id,
        "cluster": out.strip().split(";")[1] if ";" in out else None,
        "name": spec.get("name") or job_id, "labels": spec.get("labels") or {},
        "command": spec.get("command"), "kind": spec.get("kind") or "cmd", "args": list(spec.get("args") or []),
        "workdir": workdir, "env": spec.get("env") or {}, "env_names": sorted(spec.get("env") or {}),
        "secret_env_names": sorted(spec.get("secrets") or {}), "resources": spec.get("resources") or {},
        "sbatch_options": options, "signal": sig, "signal_lead_s": spec.get("signal_lead_s"),
        "torchrun": spec.get("torchrun"), "rdzv_port": spec.get("rdzv_port"),
        "progress_regex": spec.get("progress_regex"), "profile": spec.get("profile"), "pre": spec.get("pre"),
        "host": socket.gethostname(), "launched_at": time.time(), "parent_job_id": spec.get("parent_job_id"),
        "key": spec.get("key"), "queue": spec.get("queue"), "log": log, "script": os.path.join(jdir, BATCH),
        "policy": policy,
    }
    jobrecord.write_json(os.path.join(jdir, META), meta)
    return job_id


def live_runs():
    """[(job id, policy)] of the Slurm runs of this jobs directory with a checkpoint directory that
    Slurm has not ended: their watchers prune and resume from it (gpuops.onbox.engines.slurm_watch)."""
    out = []
    for job_id in jobrecord.all_ids():
        meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
        policy = meta.get("policy")
        if meta.get("engine") == slurm.NAME and isinstance(policy, dict) and policy.get("checkpoint_dir") \
                and slurm.phase(job_id, meta) != "ended":
            out.append((job_id, policy))
    return out


# What a Slurm job's retry takes from its parent besides what every retry takes (job_launch).
INHERITED = ("signal", "signal_lead_s", "torchrun", "rdzv_port")


def check_retry(parent_id, parent, opts=None):
    if slurm.phase(parent_id, parent) in ("starting", "alive"):
        raise JobError("refused", "job %s is still queued or running in Slurm (job %s); stop it first "
                                  "(retry never runs two copies)" % (parent_id, parent.get("slurm_job_id")))


def retried(spec, parent, opts) -> None:
    """A retry's Slurm request: the parent's, with the options the retry gives replacing the
    parent's of the same name."""
    new = _checked_options(opts.get("sbatch_options"))
    changed = set(o.split("=", 1)[0] for o in new)
    spec["sbatch_options"] = [o for o in parent.get("sbatch_options") or [] if o.split("=", 1)[0] not in changed] + new
    spec["resources"] = dict(parent.get("resources") or {}, **(opts.get("resources") or {}))


def chain(opts, entries, existing_key):
    """A queue as a Slurm dependency chain: each entry not yet submitted becomes a job that starts
    after the one before it ends (--dependency=afterany), so the scheduler runs the queue, not a
    loop on the login node. `entries`: [(line, command)]; `existing_key(line)`: its job id or None.
    Returns [(line, command, job id)]."""
    out, before = [], None
    root = jobrecord.ensure_root()
    for line, text in entries:
        key = "queue:%s:%d" % (opts["name"], line)
        with jobrecord.Locked(os.path.join(root, jobrecord.LOCK)):
            job_id = existing_key(key)
            if job_id is None:
                spec = dict(opts, command=text, kind="cmd", key=key, queue=opts["name"],
                            name="%s:%d" % (opts["name"], line))
                after = _dependency(before)
                spec["sbatch_options"] = list(opts.get("sbatch_options") or []) + after
                job_id = submit(spec, (text + "\n").encode("utf-8"))
        out.append((line, text, job_id))
        before = job_id
    return out


def _dependency(job_id) -> list:
    """['--dependency=afterany:N'] for the Slurm job of `job_id` while Slurm still has it queued
    or running; none once it ended (Slurm refuses a dependency on a job it has forgotten)."""
    if job_id is None:
        return []
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    if not meta.get("slurm_job_id") or slurm.phase(job_id, meta) == "ended":
        return []
    return ["--dependency=afterany:%s" % meta["slurm_job_id"]]
