"""The Slurm side of the job verbs: what a launch sends when Slurm runs the job, an sbatch
rejection as a usage error naming the option at fault, and the words of a Slurm stop. The verbs
themselves are gpuops.ops.jobs, written once for both engines.
"""

from .. import errors
from ..jobs import sbatch, torchrun
from ..onbox.jobrecord import BOX, SLURM
# One torchrun per node, as srun starts them; a failed one ends the step, not a hung rendezvous.
SRUN = "srun --ntasks-per-node=1 --kill-on-bad-exit=1 --export=ALL"


def submission(opts, *, resources=None, signal=None, torchrun_opts=None):
    """`opts` of an on-box launch made into a Slurm submission: the sbatch options, the
    checkpoint signal, and with torchrun the command that srun runs on every node. Returns the
    resources asked (for blaming a rejection)."""
    if opts.get("gpus"):
        raise errors.UsageError("--gpus pins devices on one box; under Slurm ask with --gpus-per-node")
    asked = sbatch.resources(dict(resources or {}))
    sig, lead = sbatch.checkpoint_signal(signal)
    if torchrun_opts is not None:
        _torchrun(opts, asked, torchrun_opts)
    opts.update(engine=SLURM, sbatch_options=sbatch.options(asked), resources=asked, signal=sig,
                signal_lead_s=lead)
    return asked


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


def blamed(err, asked):
    """An sbatch rejection (errors.Rejected from the box) with the gpuops flag it points at."""
    host, _, said = err.message.partition(": ")
    flag = sbatch.at_fault(said, asked)
    return errors.Rejected(f"{host}: sbatch refused the job" + (f" ({flag})" if flag else "") + f": {said}")


def target_text(t):
    where = f" on {t['nodes']}" if t.get("nodes") else ""
    return f"Slurm job {t['slurm_job_id']} ({t.get('state')}{where})"


def dry_run_text(targets, signal, grace):
    first = "; ".join(target_text(t) for t in targets)
    before = f"send SIG{signal} to its batch shell, wait up to {grace:g}s, then " if signal else ""
    return f"would {before}scancel {first}"


def done_text(jid, targets, after, all_gone, signals):
    used = "+".join(s["signal"] for s in signals or [])
    ids = ", ".join(str(t["slurm_job_id"]) for t in targets)
    if all_gone:
        return f"cancelled {jid} (Slurm job {ids}, {used}); state {after['state']}"
    return f"{jid}: Slurm job {ids} has not ended after {used} ({after['state']})"
