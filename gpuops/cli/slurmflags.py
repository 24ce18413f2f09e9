"""The flags a job verb takes when Slurm runs the job: their help, and the resources they ask."""

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


def resources(flags):
    """{resource: value} of the resource flags among a task's `flags` that were given."""
    return {k: flags[k] for k in RESOURCES if flags.get(k) not in (None, False, "")}
