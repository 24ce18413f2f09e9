"""Slurm as an engine, on this side (its box half: gpuops.onbox.engines.slurm_engine and the modules it
uses): the flags a Slurm job takes and the sbatch request they make, an sbatch rejection as a
usage error naming the option at fault, its state rule (gpuops.engines.slurm_state), what a
Slurm stop binds, and the diagnosis of a Slurm end (gpuops.engines.slurm_diagnose).
"""

from .. import errors
from ..jobs import spec, torchrun
from . import slurm_sbatch as sbatch
from . import slurm_state
from .base import Engine
from typing import Optional

# One torchrun per node, as srun starts them; a failed one ends the step, not a hung rendezvous.
SRUN = "srun --ntasks-per-node=1 --kill-on-bad-exit=1 --export=ALL"
RESOURCES = {
    "nodes": "Slurm: nodes to run on (--nodes)",
    "gpus_per_node": "Slurm: GPUs per node, N or TYPE:N (--gpus-per-node)",
    "cpus_per_task": "Slurm: CPUs per task (--cpus-per-task)",
    "mem": "Slurm: memory per node, e.g. 64G (--mem)",
    "time": "Slurm: walltime, e.g. 90, 4:00:00 or 2-00:00:00 (--time)",
    "partition": "Slurm: partition (default: the profile's, else the cluster's)",
    "account": "Slurm: account to charge",
    "qos": "Slurm: quality of service",
    "constraint": "Slurm: node features, e.g. a100 (--constraint)",
    "exclusive": "Slurm: whole nodes, shared with no other job",
}
LAUNCH_ONLY = {
    "signal": "Slurm: the checkpoint signal and how long before the time limit Slurm sends it, e.g. USR1@120; "
              "pause sends the same signal",
    "iface": "with --engine slurm --torchrun: the network interface NCCL and Gloo use between nodes "
             "(NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)",
}


class Slurm(Engine):
    name, title, detach = "slurm", "Slurm", "sbatch"
    job_id_key = "slurm_job_id"
    help = "sbatch on the login node --host; a profile with launch.detach = \"sbatch\" implies it"
    flags = dict(RESOURCES, **LAUNCH_ONLY)
    switches = ("exclusive",)
    states = slurm_state.WORDS
    meta_fields = {"slurm_job_id": (str, type(None)), "sbatch_options": (list, type(None)),
                   "signal": (str, type(None))}
    stop_target = {"slurm_job_id": int, "state": (str, type(None)), "nodes": (str, type(None)), "restarts": int,
                   "reason": (str, type(None))}
    # Enforced through Slurm's own requeue (a preemption, a node failure, `scontrol requeue`), by
    # the batch script at each start (gpuops.onbox.engines.slurm_resume): requeues counted against
    # --max-retries, each from the newest complete checkpoint; --max-runtime is the job's --time,
    # lowered at each requeue to what is left of the whole run. WATCHED need the box's supervisor:
    # with one of them the batch script runs the command under it (gpuops.onbox.engines.slurm_watch), which
    # kills a stall with evidence, notifies, prunes, and requeues the job for a failure --retry-on
    # names (a requeue, so the job's state stays Slurm's word and resume.py counts the retry).
    # --share-checkpoint-dir: the submission refuses a checkpoint directory another live Slurm run
    # of the jobs directory uses (gpuops.onbox.engines.slurm_submit) unless both share it.
    WATCHED = ("stall_after_s", "notify", "keep_checkpoints", "keep_best", "retry_on", "checkpoint_every_s")
    policy_fields = ("max_retries", "checkpoint_dir", "checkpoint_glob", "resume_arg", "max_runtime_s",
                     "share_checkpoint_dir") + WATCHED

    def flags_for(self, verb):
        return dict(self.flags) if verb == "launch" else dict(RESOURCES)

    def decide(self, row, facts, meta) -> None:
        slurm_state.row_of(row, facts, meta)

    def submission(self, opts, asked, torchrun=None):
        """`opts` of an on-box launch made into a Slurm submission: the sbatch options, the
        checkpoint signal, and with torchrun the command that srun runs on every node. Returns the
        resources asked (for blaming a rejection)."""
        if opts.get("gpus"):
            raise errors.UsageError("--gpus pins devices on one box; under Slurm ask with --gpus-per-node")
        asked = dict(asked)
        sig, lead = spec.checkpoint_signal(asked.pop("signal", None))
        iface = asked.pop("iface", None)
        resources = sbatch.resources(asked)
        if torchrun is not None:
            _torchrun(opts, resources, dict(torchrun, interface=iface))
        elif iface:
            raise errors.UsageError("--iface goes with --torchrun")
        opts.update(engine=self.name, sbatch_options=sbatch.options(resources), resources=resources, signal=sig,
                    signal_lead_s=lead)
        return resources

    def with_policy(self, opts, policy, given):
        """The policy, the program the batch script runs at each start (gpuops.onbox.engines.slurm_resume,
        shipped whole: a compute node has only what the job directory holds) and, for a policy
        that needs watching, the watcher the command runs under (gpuops.onbox.engines.slurm_watch, shipped
        the same way), and --max-runtime as the job's --time (UsageError beside a --time `given`
        that says otherwise)."""
        from .. import onbox

        opts.update(policy=policy, resume_helper=onbox.script("slurm_resume").decode("utf-8"))
        if any(policy.get(k) for k in self.WATCHED):
            opts["watch_helper"] = onbox.script("slurm_watch").decode("utf-8")
        budget = policy.get("max_runtime_s")
        if not budget:
            return []
        from ..onbox.engines.slurm_resume import slurm_minutes  # the batch script's own rounding; it loads the run machinery

        minutes = slurm_minutes(budget)
        asked = given.get("time")
        if asked and slurm_state.seconds(asked) != minutes * 60:
            raise errors.UsageError(f"--max-runtime {budget:g}s is this Slurm job's --time ({minutes} minutes, "
                                    f"Slurm counts whole ones), not --time {asked}: give one of them")
        opts["resources"] = dict(opts["resources"], time=str(minutes))
        opts["sbatch_options"] = sbatch.options(opts["resources"])
        return [f"--max-runtime is Slurm's --time={minutes} (minutes) for this job; at each requeue its time "
                f"limit is lowered to what is left of the whole run"]

    def queue_submission(self, opts, asked):
        return self.submission(opts, asked)

    def retry_opts(self, asked):
        resources = sbatch.resources(dict(asked))
        return {"engine": self.name, "resources": resources, "sbatch_options": sbatch.options(resources)}

    def explain_rejection(self, err: errors.Rejected, asked: dict) -> errors.GpuopsError:
        """An sbatch rejection (errors.Rejected from the box) with the gpuops flag it points at."""
        host, _, said = err.message.partition(": ")
        flag = sbatch.at_fault(said, asked)
        return errors.Rejected(f"{host}: sbatch refused the job" + (f" ({flag})" if flag else "") + f": {said}")

    def plan(self, targets):
        """A Slurm run is its job id and restart count: a requeued run is another."""
        return ({"slurm_job_ids": [t["slurm_job_id"] for t in targets]},
                [[t["slurm_job_id"], t["restarts"]] for t in targets])

    def diagnosis(self, ev, row, host: str, jobs_dir, triaged=None, pid: Optional[int]=None):
        from . import answers
        from . import slurm_diagnose

        for rec in ev.get("accounting") or []:
            answers.words(rec if isinstance(rec, dict) else {None: None}, host, "sacct row")
        v = slurm_diagnose.decide(ev, row)
        jid = row["job_id"]
        nxt, advice = slurm_diagnose.next_steps(v["verdict"], host, jid, row,
                                                (ev.get("meta") or {}).get("resources") or {}, jobs_dir)
        data = {"verdict": v["verdict"], "confidence": v["confidence"], "job": jid, "engine": self.name,
                "slurm_job_id": row.get("slurm_job_id"), "engine_job_id": row.get("slurm_job_id"),
                "exit_code": v["exit_code"], "signal": v["signal"], "evidence": v["evidence"],
                "ruled_out": v["ruled_out"], "scheduler": slurm_diagnose.facts(ev),
                "kernel_log": {"readable": ev.get("kernel_readable"), "source": ev.get("kernel_source"),
                               "node": ev.get("node"), "node_is_here": ev.get("node_is_here")},
                "disks": ev.get("disks"), "triage": triaged, "state": row["state"]}
        return {"verdict": v, "data": data, "next": nxt, "advice": advice,
                "what": f"{jid} (Slurm job {row.get('slurm_job_id')})",
                "ok": v["verdict"] in ("running", "pending", "paused", "completed", "stopped")}

    def triage_inputs(self, row, facts):
        """The scheduler's own word, and the exit record a log's triage may believe: the script's
        own exit where Slurm says it completed or failed; none where Slurm ended it (a time
        limit's 0:15, a cancel), whose state says more than its ExitCode."""
        return row.get("scheduler_state") or row["state"], slurm_state.exit_record(row)


ENGINE = Slurm()


def _torchrun(opts, asked, t):
    if opts.get("kind") != "cmd":
        raise errors.UsageError("--torchrun takes --cmd: the training script and its arguments, as torchrun "
                                "would be given them")
    gpus = str(asked.get("gpus_per_node") or "").split(":")[-1]
    nproc = t.get("nproc_per_node") or (int(gpus) if gpus.isdigit() else 1)
    nodes = asked.get("nodes") or 1
    try:
        words = torchrun.options(nnodes="$SLURM_NNODES", nproc_per_node=int(nproc), rdzv_id="$SLURM_JOB_ID",
                                 endpoint=torchrun.endpoint("$GPUOPS_RDZV_HOST", "$GPUOPS_RDZV_PORT"))
        env = torchrun.environment(t.get("interface"), multi_host=nodes > 1)
    except ValueError as e:
        raise errors.UsageError(f"--torchrun: {e}") from None
    asked["ntasks_per_node"] = 1
    opts["env"] = dict(env, **(opts.get("env") or {}))
    opts["torchrun"] = {"nproc_per_node": int(nproc), "port": int(t.get("port") or torchrun.DEFAULT_PORT),
                        "interface": t.get("interface"), "script": opts["command"]}
    opts["rdzv_port"] = opts["torchrun"]["port"]
    opts["command"] = f"{SRUN} {torchrun.shell_line(words)} {opts['command']}"
