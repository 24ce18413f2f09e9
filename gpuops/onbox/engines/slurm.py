"""Slurm, asked on the login node: run a client command bounded, read what it prints, and observe
a job the way `status` needs it. Not an entry: gpuops.onbox.engines.slurm_engine uses it for jobs whose
record says engine "slurm" (see gpuops.onbox.engines.slurm_submit for the record layout).

Facts only: the scheduler's words (JobState, Reason, ExitCode ...) travel back as they are, and
the caller maps them onto gpuops' states (gpuops.engines.slurm_state). Which JobStates mean the
job has ended comes from the caller too (jobrecord.phases()), so this side spells no state.

A live job is read from `scontrol show job`; one that has left the controller's memory (MinJobAge)
from `sacct` (with `-c`, the job-completion file, where the cluster has no slurmdbd). Once the
scheduler says a job has ended, that is written to the job's exit.json, so the record still
answers when Slurm has forgotten the job.
"""

import json
import os
import re
import time

from ..host import jobrecord, signals
from ..host.jobrecord import EXIT, PAUSE, JobError
from typing import Sequence

NAME = "slurm"
CALL_S = 20
OUT_MAX = 1 << 20
VALUE_MAX = 512
# Words of a client that found no controller: the scheduler is unreachable, not the job gone.
_NO_CONTROLLER = ("Unable to contact slurm controller", "Could not establish a configuration source",
                  "Socket timed out", "Connection refused", "Zero Bytes were transmitted")
# What `scontrol show job -o` says that status, diagnose and the explanation of a pending job read.
JOB_FIELDS = ("JobId", "JobName", "JobState", "Reason", "ExitCode", "DerivedExitCode", "RunTime", "TimeLimit",
              "SubmitTime", "StartTime", "EndTime", "Partition", "NodeList", "BatchHost", "NumNodes", "NumCPUs",
              "NumTasks", "CPUs/Task", "MinMemoryNode", "MinMemoryCPU", "TRES", "TresPerNode", "Features",
              "Restarts", "Requeue", "Dependency", "StdOut", "StdErr", "Account", "QOS", "Priority")
PARTITION_FIELDS = ("PartitionName", "State", "TotalNodes", "TotalCPUs", "MaxNodes", "MaxTime", "Nodes",
                    "MaxCPUsPerNode", "MaxMemPerNode", "TRES")
SACCT_FIELDS = ("JobID", "State", "ExitCode", "DerivedExitCode", "Elapsed", "Timelimit", "NodeList", "Start", "End",
                "Partition", "MaxRSS", "ReqMem")
# A held job shows one of these reasons; held after `gpuops pause`, it is paused.
HELD = ("JobHeldUser", "JobHeldAdmin", "job_requeued_in_held_state", "job requeued in held state")
_KEY = re.compile(r" (?=[A-Za-z][A-Za-z0-9/:_]*=)")


def run(argv, env=None, timeout=CALL_S):
    """(exit status, stdout, stderr) of one Slurm client command; JobError "unreachable" when the
    client is not installed, does not answer in time or finds no controller."""
    import subprocess  # here: the workstation loads this module for its pure helpers (exit_code)

    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env)
    except OSError as e:
        raise JobError("unreachable", "%s cannot run on this host (%s): is it a Slurm login node?" % (argv[0], e))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise JobError("unreachable", "%s did not answer within %ds: the Slurm controller is not responding"
                       % (argv[0], timeout))
    out = out[:OUT_MAX].decode("utf-8", "replace")
    err = err[:OUT_MAX].decode("utf-8", "replace").strip()
    if proc.returncode != 0 and any(word in err for word in _NO_CONTROLLER):
        raise JobError("unreachable", "%s: %s" % (argv[0], last_line(err)))
    return proc.returncode, out, err


def last_line(text: str):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:VALUE_MAX] if lines else ""


def pairs(line, keep):
    """{key: value} of one `scontrol show ... -o` line, only the keys in `keep`."""
    out = {}
    for item in _KEY.split(line.strip()):
        key, sep, value = item.partition("=")
        if sep and key in keep:
            out[key] = value.strip()[:VALUE_MAX]
    return out


def show_job(slurm_id):
    """The controller's view of a job ({field: value}), or None when it no longer knows it."""
    rc, out, err = run(["scontrol", "show", "job", "-o", str(slurm_id)])
    if rc != 0:
        if "Invalid job id" in err:
            return None
        raise JobError("unreachable", "scontrol show job %s: %s" % (slurm_id, last_line(err)))
    line = next((ln for ln in out.splitlines() if ln.startswith("JobId=")), None)
    return pairs(line, JOB_FIELDS) if line else None


def accounting(slurm_id, steps: int = False):
    """sacct's rows for a job ({field: value}; the job's own row last among its records, then its
    steps when `steps`), and whether they came from the completion file (-c): [] when unknown."""
    args = ["-P", "-n", "-j", str(slurm_id), "--format=" + ",".join(SACCT_FIELDS)] + ([] if steps else ["-X"])
    rc, out, err = run(["sacct"] + args)
    completion = False
    if rc != 0 and "accounting storage is disabled" in err:
        completion = True
        rc, out, err = run(["sacct", "-c"] + args)
    if rc != 0:
        return [], completion
    rows = []
    for line in out.splitlines():
        cells = line.split("|")
        if len(cells) == len(SACCT_FIELDS):
            rows.append(dict((k, v.strip()[:VALUE_MAX]) for k, v in zip(SACCT_FIELDS, cells)))
    own = [r for r in rows if r["JobID"] == str(slurm_id)]
    # A requeued job has one record per run in the completion file; the last is its outcome.
    return ([own[-1]] if own else []) + [r for r in rows if r["JobID"].startswith("%s." % slurm_id)], completion


def pending_facts(job):
    """Where a pending job stands: its place among the partition's pending jobs (highest priority
    first), squeue --start's estimate, and the partition it asked for as Slurm describes it."""
    out = {}
    part = (job.get("Partition") or "").split(",")[0]
    if part:
        rc, text, _ = run(["squeue", "-h", "-t", "PD", "-p", part, "-o", "%i", "--sort=-p,i"])
        ids = text.split() if rc == 0 else []
        if job.get("JobId") in ids:
            out["position"], out["pending_in_partition"] = ids.index(job["JobId"]) + 1, len(ids)
        rc, text, _ = run(["scontrol", "show", "partition", "-o", part])
        if rc == 0 and text.strip():
            out["partition"] = pairs(text.splitlines()[0], PARTITION_FIELDS)
            rc, text, _ = run(["sinfo", "-h", "-N", "-p", part, "-o", "%N|%c|%m|%G|%f"])
            nodes = {}
            for line in text.splitlines() if rc == 0 else []:
                cells = line.split("|")
                if len(cells) == 5:
                    nodes[cells[0]] = {"cpus": cells[1], "memory_mb": cells[2], "gres": cells[3], "features": cells[4]}
            out["nodes"] = [dict(v, name=k) for k, v in sorted(nodes.items())][:64]
    rc, text, _ = run(["squeue", "-h", "--start", "-j", str(job.get("JobId")), "-o", "%S"])
    start = text.strip() if rc == 0 else ""
    out["start_estimate"] = start if start and start not in ("N/A", "Unknown") else None
    return out


def exit_code(value):
    """(code, signal number) of Slurm's 'code:signal', or (None, None)."""
    m = re.match(r"^(\d+):(\d+)$", value or "")
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def observe(job_id, meta, detail=True, jdir=None):
    """The scheduler's facts of a job: {known, source, job (fields), held, pending (with `detail`:
    the queue position, start estimate and partition)}; an ended job's outcome is recorded in
    exit.json once, and read from there afterwards."""
    jdir = jdir or jobrecord.job_dir(job_id)
    recorded = jobrecord.read_json(os.path.join(jdir, EXIT))
    if recorded and isinstance(recorded.get("scheduler"), dict):
        return {"known": True, "source": "record", "job": recorded["scheduler"]}
    slurm_id = meta.get("slurm_job_id")
    if not slurm_id:
        return {"known": False, "source": None, "job": None}
    job = show_job(slurm_id)
    source = "scontrol"
    if job is None:
        rows, completion = accounting(slurm_id)
        if not rows:
            return {"known": False, "source": None, "job": None}
        row = rows[0]
        job = {"JobId": row["JobID"], "JobState": row["State"], "ExitCode": row["ExitCode"],
               "DerivedExitCode": row["DerivedExitCode"], "RunTime": row["Elapsed"], "TimeLimit": row["Timelimit"],
               "StartTime": row["Start"], "EndTime": row["End"], "NodeList": row["NodeList"],
               "Partition": row["Partition"]}
        source = "sacct -c" if completion else "sacct"
    out = {"known": True, "source": source, "job": job}
    word = (job.get("JobState") or "").split(" ")[0]
    phase = jobrecord.phases(NAME).get(word)
    if phase == "ended":
        record_end(jdir, job, source)
    elif phase == "starting":
        if job.get("Reason") in HELD:
            out["held"] = True
            pause = jobrecord.read_json(os.path.join(jdir, PAUSE)) or {}
            out["paused"] = bool(pause.get("held_at")) and not pause.get("resumed_at")
        elif detail:
            out["pending"] = pending_facts(job)
    return out


def record_end(jdir, job, source) -> None:
    code, sig = exit_code(job.get("ExitCode"))
    rec = {"exit_code": code, "signal": signals.name(sig) if sig else None, "ended_at": time.time(),
           "engine_state": (job.get("JobState") or "").split(" ")[0], "scheduler": job, "source": source}
    jobrecord.write_json(os.path.join(jdir, EXIT), rec)


def phase(job_id, meta):
    """'starting', 'alive', 'paused' or 'ended' of a Slurm job, for waits and log follows."""
    return phase_of(observe(job_id, meta, detail=False))


def phase_of(facts):
    """The phase of observed facts: a job Slurm forgot has ended; one held after `gpuops pause`
    is paused; one the controller could not be asked about is "unknown" (not ended)."""
    if facts.get("known") is None and facts.get("error"):
        return "unknown"
    if not facts.get("known"):
        return "ended"
    if facts.get("paused"):
        return "paused"
    word = (facts["job"].get("JobState") or "").split(" ")[0]
    return jobrecord.phases(NAME).get(word, "alive")


def comment(labels: Sequence[str]):
    """Labels as the JSON sbatch --comment carries (Slurm keeps it with the job)."""
    return json.dumps(labels or {}, sort_keys=True, separators=(",", ":"))
