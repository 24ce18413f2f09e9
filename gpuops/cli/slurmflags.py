"""The flags a job verb takes when Slurm runs the job: their help, the resources they ask, and
which flags belong to one engine only."""

from ..errors import UsageError
from .flags import number

ENGINE = "who runs the job: 'box' (gpuops' supervisor on the host, the default) or 'slurm' (sbatch on the login " \
         "node --host; a profile with launch.detach = \"sbatch\" implies it)"
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
SIGNAL = ("Slurm: the checkpoint signal and how long before the time limit Slurm sends it, e.g. USR1@120; "
          "pause sends the same signal")
IFACE = ("with --engine slurm --torchrun: the network interface NCCL and Gloo use between nodes "
         "(NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)")


# Flags that mean something only where another engine runs the job.
NOT_FOR_SLURM = {"--fleet": "Slurm places the job on its own nodes", "--rdzv-host": "it is a --torchrun gang's",
                 "--code": "it is compared across a --torchrun gang's boxes"}
SLURM_ONLY = dict({f"--{k.replace('_', '-')}": "it is asked of Slurm: add --engine slurm" for k in RESOURCES},
                  **{"--iface": "it is a Slurm --torchrun job's (add --engine slurm)",
                     "--signal": "Slurm sends it before the time limit: add --engine slurm"})


def engine(value):
    """--engine's value: None for the box's supervisor, "slurm" for Slurm."""
    from ..onbox.jobrecord import BOX, SLURM

    if value in (None, "", BOX):
        return None
    if value != SLURM:
        raise UsageError(f"--engine takes {BOX} or {SLURM}, not {value!r}")
    return value


def torchrun(on, nproc_per_node, rdzv_port, iface):
    """--torchrun's settings, or None; its companions without it are a mistake worth saying."""
    if not on:
        if nproc_per_node or rdzv_port or iface:
            raise UsageError("--nproc-per-node, --rdzv-port and --iface go with --torchrun")
        return None
    return {"nproc_per_node": number("--nproc-per-node", nproc_per_node, 1, 1024, integer=True),
            "port": number("--rdzv-port", rdzv_port, 1, 65535, integer=True), "interface": iface}


def resources(flags):
    """{resource: value} of the resource flags among a task's `flags` that were given."""
    return {k: flags[k] for k in RESOURCES if flags.get(k) not in (None, False, "")}
