"""What a Slurm launch asks of sbatch (pure): resources in, sbatch options out, and an sbatch
rejection traced back to the gpuops option that caused it.

Values are passed to sbatch as they were given, so sbatch judges them in its own words (a bad
--time is sbatch's "Invalid --time specification", exit 2 naming --time); only what would break
the command line itself (an empty value, a newline) is refused here (and --signal, which gpuops
reads itself, by gpuops.jobs.spec).
"""

import re

from ..errors import UsageError

# resource key -> the gpuops flag, which is also sbatch's option of the same name.
FLAGS = {"nodes": "--nodes", "gpus_per_node": "--gpus-per-node", "cpus_per_task": "--cpus-per-task", "mem": "--mem",
         "time": "--time", "partition": "--partition", "account": "--account", "qos": "--qos",
         "constraint": "--constraint", "ntasks_per_node": "--ntasks-per-node"}
COUNTS = ("nodes", "cpus_per_task", "ntasks_per_node")
# sbatch's words for a refused request -> the resource it names (first match wins).
_BLAME = (
    (re.compile(r"\bqos\b", re.I), "qos"),  # "violates accounting/QOS policy (... time limits)"
    (re.compile(r"partition", re.I), "partition"),
    (re.compile(r"--time|time limit|time specification", re.I), "time"),
    (re.compile(r"account|association", re.I), "account"),
    (re.compile(r"memory|--mem\b", re.I), "mem"),
    (re.compile(r"gres|generic resource|\bgpus?\b", re.I), "gpus_per_node"),
    (re.compile(r"feature|constraint", re.I), "constraint"),
    (re.compile(r"node count|--nodes|number of nodes", re.I), "nodes"),
    (re.compile(r"\bcpus?\b|cpus-per-task", re.I), "cpus_per_task"),
)
# What sbatch says when no node could ever hold the request, without naming a part of it.
_SHAPE = ("mem", "cpus_per_task", "gpus_per_node", "constraint", "nodes")


def resources(values):
    """The resources a launch asks for, checked: {key: value} without the ones not given."""
    out = {}
    for key, value in values.items():
        if value is None or value is False or value == "":
            continue
        if key == "exclusive":
            out[key] = True
            continue
        text = str(value).strip()
        if not text or any(c in text for c in "\n\r\0") or len(text) > 200:
            raise UsageError(f"{FLAGS[key]} {value!r} cannot be passed to sbatch")
        if key in COUNTS:
            if not text.isdigit() or int(text) < 1:
                raise UsageError(f"{FLAGS[key]} takes a whole number from 1, not {value!r}")
            text = int(text)
        out[key] = text
    return out


def options(asked):
    """sbatch's options for the resources asked (resources() above)."""
    out = [f"{FLAGS[key]}={asked[key]}" for key in FLAGS if key in asked]
    return out + (["--exclusive"] if asked.get("exclusive") else [])


def at_fault(message, asked):
    """The gpuops flag(s) sbatch's rejection `message` points at, as text ('--time'), or None."""
    for pattern, key in _BLAME:
        if pattern.search(message or ""):
            return FLAGS[key]
    shaped = [FLAGS[k] for k in _SHAPE if k in asked]
    if shaped and re.search(r"node configuration is not available", message or "", re.I):
        return " or ".join(shaped)
    return None
