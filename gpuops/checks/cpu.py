"""CPU verdict: will torch/OpenMP start more threads than this box lets the job run (U40)?

torch sizes its intra-op pool from the host's core count, ignoring both the CPU affinity mask and
the cgroup quota, unless OMP_NUM_THREADS / MKL_NUM_THREADS say otherwise.
"""

import math

from ..findings import Finding


def usable_cpus(cpu):
    visible = cpu.get("visible") or cpu.get("host") or 1
    quota = cpu.get("quota_cores")
    return max(1, min(visible, math.floor(quota))) if quota else visible


def threads(facts, t):
    cpu = facts.get("cpu") or {}
    if not cpu.get("host"):
        return []
    env = facts.get("env") or {}
    usable = usable_cpus(cpu)
    omp = env.get("OMP_NUM_THREADS")
    evidence = {"host_cpus": cpu.get("host"), "visible_cpus": cpu.get("visible"), "quota_cores": cpu.get("quota_cores"),
                "usable": usable, "OMP_NUM_THREADS": omp, "MKL_NUM_THREADS": env.get("MKL_NUM_THREADS")}
    fix = f"export OMP_NUM_THREADS={usable} MKL_NUM_THREADS={usable}"
    try:
        omp_n = int(omp) if omp is not None else None
    except ValueError:
        omp_n = None
    if omp_n is not None and omp_n > usable:
        return [Finding("cpu.threads", "warn", f"OMP_NUM_THREADS={omp_n} exceeds the {usable} usable CPUs",
                        evidence, fix, "U40")]
    if omp is None and usable < cpu["host"]:
        return [Finding("cpu.threads", "warn",
                        f"only {usable} of {cpu['host']} CPUs usable and OMP_NUM_THREADS unset: torch will start "
                        f"{cpu['host']} threads and thrash", evidence, fix, "U40")]
    return [Finding("cpu.threads", "ok", f"thread pools fit the {usable} usable CPUs", evidence)]


CHECKS = (threads,)
