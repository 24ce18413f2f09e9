"""A Slurm job's state from what the scheduler said (pure: facts in, the row's state out).

Slurm's JobStates are mapped onto the state table (gpuops.states) here, in WORDS: the only
place a Slurm state is spelled. What the table cannot know comes from the record: a job held
after `gpuops pause` is PAUSED, one Slurm no longer knows and whose end was never seen is
VANISHED, a controller that did not answer is UNREACHABLE. A pending job's reason is said in
words, and a request that can never run is named as such with the numbers, in the words of a
person who asked for it ("asked for 2 nodes; partition debug has 1").
"""

import re

from ..jobs import records, rows
from .. import states
from ..jobs.records import ExitRecord, JobFacts, Meta, RunEnd, RunRecord, SchedulerSaid
from ..onbox.host import signals
from ..onbox.engines.slurm import exit_code

# Slurm's JobState (as scontrol, squeue and sacct print it) -> the state a job in it is reported as.
WORDS = dict(
    [(w, states.PENDING) for w in ("PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD")]
    + [("CONFIGURING", states.STARTING)]
    + [(w, states.RUNNING) for w in ("RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING")]
    + [(w, states.PAUSED) for w in ("SUSPENDED", "STOPPED")]
    + [("COMPLETED", states.COMPLETED)]
    + [(w, states.FAILED) for w in ("FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "SPECIAL_EXIT")]
    + [(w, states.CANCELLED) for w in ("CANCELLED", "REVOKED")]
    + [(w, states.TIMEOUT) for w in ("TIMEOUT", "DEADLINE")]
    + [("PREEMPTED", states.PREEMPTED)])

# Reasons a job waits for its turn (Slurm's words); any other reason is explained below.
_WAITING = ("Priority", "Resources", "None", "")
_GRES_GPU = re.compile(r"(?:^|,)gpu(?::[A-Za-z0-9_.-]+)?:(\d+)")


def from_word(word: str):
    """The state a Slurm JobState ('CANCELLED by 0', 'PENDING') is reported as, or None for a word
    Slurm does not use."""
    return WORDS.get(str(word or "").strip().split(" ")[0].rstrip("+").upper())


def row_of(row: dict, facts: dict, meta: dict) -> dict:
    """A Slurm job's status row: the scheduler decides the state (a running one can still be
    STALLED, judged by the caller)."""
    f = records.read(JobFacts, facts)
    row.update(decide(facts, records.read(Meta, meta).resources or {}), slurm_job_id=meta.get("slurm_job_id"),
               engine_job_id=meta.get("slurm_job_id"))
    final = records.read(RunEnd, records.read(RunRecord, f.run).final)
    if row["state"] == states.FAILED and final.why:
        # the batch script ran nothing after a requeue: the run policy's limit, not the command, ended it
        row.update(state=states.TIMEOUT if final.class_ == "timed-out" else states.FAILED,
                   reason=final.why, exit_code=None if final.class_ == "timed-out" else row["exit_code"])
    elif row["state"] == states.FAILED:
        row["hint"] = rows.code_hint(row["exit_code"])
    ended_at = records.read(ExitRecord, f.exit).ended_at
    if ended_at is not None:
        row["ended_at"] = ended_at
    return row


def decide(facts: dict, resources: dict) -> dict:
    """{state, reason, exit_code, signal, never_runs, ...scheduler fields} of a Slurm job:
    `facts` as gpuops.onbox.jobs.job_facts gathers them (scheduler, exit, pause), `resources` what
    the launch asked for (the record's)."""
    f = records.read(JobFacts, facts)
    sched, rec = records.read(SchedulerSaid, f.scheduler), records.read(ExitRecord, f.exit)
    job = sched.job or rec.scheduler or {}
    out = {"state": None, "reason": None, "exit_code": None, "signal": None,
           "scheduler_state": (job.get("JobState") or rec.engine_state or None),
           "scheduler_reason": job.get("Reason"), "nodes": _set(job.get("NodeList")),
           "partition": job.get("Partition"), "time_limit": job.get("TimeLimit"), "run_time": job.get("RunTime"),
           "restarts": _int(job.get("Restarts")), "scheduler_source": sched.source}
    if sched.known is None and not f.exit:
        out.update(state=states.UNREACHABLE, reason=sched.error or "the Slurm controller did not answer")
        return out
    if not sched.known and not f.exit:
        out.update(state=states.VANISHED, reason="Slurm no longer knows this job (neither scontrol nor sacct has "
                                                 "it) and gpuops never saw it end")
        return out
    word = (out["scheduler_state"] or "").split(" ")[0]
    name = from_word(word)
    if sched.paused:
        name = states.PAUSED
    out["state"] = name or states.PENDING
    code, sig = exit_code(job.get("ExitCode"))
    if name in states.TERMINAL and sig:
        out["signal"] = signals.name(sig)
    if name == states.FAILED or (name == states.COMPLETED and code == 0):
        out["exit_code"] = code
    out["reason"] = _reason(out, word, job, sched, resources)
    if name == states.PENDING and not sched.held:
        pending = sched.pending or {}
        out.update(position=pending.get("position"), pending_in_partition=pending.get("pending_in_partition"),
                   start_estimate=pending.get("start_estimate"))
        never = never_runs(job, pending, resources)
        if never:
            out.update(reason=never, never_runs=True)
    return out


def _reason(out: dict, word: str, job: dict, sched: SchedulerSaid, resources: dict) -> str | None:
    name = out["state"]
    said = job.get("Reason")
    if name == states.PAUSED:
        return ("paused by gpuops: checkpointed, requeued and held; `gpuops resume` releases it"
                if sched.paused else "suspended in Slurm (scontrol suspend): resources still held")
    if sched.held:
        return "held in Slurm (%s): `scontrol release %s` or `gpuops resume`" % (said, job.get("JobId"))
    if name == states.PENDING:
        return pending_reason(said, job, sched.pending or {})
    if name == states.TIMEOUT:
        return "reached its time limit (%s; ran %s)%s" % (job.get("TimeLimit") or resources.get("time"),
                                                         job.get("RunTime"),
                                                         ": its --deadline passed" if word == "DEADLINE" else "")
    if word == "OUT_OF_MEMORY":
        return "Slurm killed it at its memory limit (asked --mem %s)" % (resources.get("mem") or "default")
    if word == "NODE_FAIL":
        return "a node it ran on failed (%s)" % (job.get("NodeList") or "?")
    if word == "BOOT_FAIL":
        return "a node failed to boot for it"
    if name == states.CANCELLED:
        return "cancelled in Slurm (scancel or gpuops stop)"
    if name == states.PREEMPTED:
        return "preempted: Slurm gave its nodes to other work"
    if name == states.FAILED and out.get("signal"):
        return "ended by %s" % out["signal"]
    return None


def pending_reason(said, job, pending) -> str:
    """Why a job waits, in words; its place in the queue and Slurm's start estimate when known."""
    where = ""
    if pending.get("position"):
        where = "; %d of %d pending in partition %s" % (pending["position"], pending.get("pending_in_partition") or 0,
                                                       job.get("Partition"))
    if pending.get("start_estimate"):
        where += "; Slurm estimates a start at %s" % pending["start_estimate"]
    if said in _WAITING:
        return "waiting for its turn%s%s" % ("" if said in ("None", "") else " (%s)" % said, where)
    if said == "Dependency":
        return "waiting for the job(s) it depends on (%s)%s" % (job.get("Dependency"), where)
    if said == "DependencyNeverSatisfied":
        return "its dependency can never be satisfied (%s): cancel it" % job.get("Dependency")
    if said == "BeginTime":
        return "not eligible to start before %s" % job.get("StartTime")
    if said == "ReqNodeNotAvail":
        return "a node it needs is down, drained or reserved (ReqNodeNotAvail)%s" % where
    return "pending: Slurm's reason is %s%s" % (said, where)


def exit_record(row):
    """The exit record a log's triage may believe for a Slurm job: the script's own exit where
    Slurm says it completed or failed; none where Slurm ended it (a time limit's 0:15, a cancel),
    whose state says more than its ExitCode."""
    if row.get("state") == states.COMPLETED:
        return {"exit_code": 0, "signal": None}
    if row.get("state") == states.FAILED and (row.get("exit_code") or row.get("signal")):
        return {"exit_code": row.get("exit_code") or None, "signal": row.get("signal")}
    return None


def never_runs(job, pending, resources):
    """Why a pending request can never run in its partition, with the numbers; or None."""
    part = pending.get("partition") or {}
    nodes = pending.get("nodes") or []
    name = job.get("Partition") or part.get("PartitionName")
    said = job.get("Reason")
    asked_nodes = _int(resources.get("nodes")) or _int((job.get("NumNodes") or "").split("-")[0])
    total = _int(part.get("TotalNodes"))
    most = _int(part.get("MaxNodes"))
    if asked_nodes and total is not None and asked_nodes > total:
        return "asked for %d nodes; partition %s has %d: it can never run there" % (asked_nodes, name, total)
    if asked_nodes and most is not None and asked_nodes > most:
        return "asked for %d nodes; partition %s takes at most %d per job" % (asked_nodes, name, most)
    cpus = _int(resources.get("cpus_per_task"))
    top = max([_int(n.get("cpus")) or 0 for n in nodes] or [0])
    if cpus and nodes and cpus > top:
        return "asked for %d CPUs per task; the nodes of partition %s have at most %d" % (cpus, name, top)
    gpus = _int(str(resources.get("gpus_per_node") or "").split(":")[-1])
    have = max([gpu_count(n.get("gres")) for n in nodes] or [0])
    if gpus and nodes and gpus > have:
        return "asked for %d GPUs per node; the nodes of partition %s have at most %d" % (gpus, name, have)
    limit, asked_time = seconds(part.get("MaxTime")), seconds(resources.get("time"))
    if asked_time and limit and asked_time > limit:
        return "asked for --time %s; partition %s allows at most %s" % (resources.get("time"), name, part["MaxTime"])
    if said in ("PartitionNodeLimit", "PartitionConfig", "BadConstraints", "PartitionTimeLimit"):
        return "Slurm says it can never run in partition %s as asked (%s)" % (name, said)
    return None


def gpu_count(gres):
    """GPUs a node's Gres string offers ('gpu:a100:4(S:0-1),shard:8' -> 4)."""
    return sum(int(m.group(1)) for m in _GRES_GPU.finditer(gres or ""))


def seconds(text):
    """Seconds of a Slurm duration ('30', '0:01', '1:00:00', '2-12', '1-00:00:00'); None for
    UNLIMITED, empty or anything else."""
    text = str(text or "").strip()
    m = re.match(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$", text)
    if not m:
        return None
    days, a, b, c = (int(g) if g else None for g in m.groups())
    if days is not None:  # days-hours[:minutes[:seconds]]
        return days * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    if c is not None:  # hours:minutes:seconds
        return a * 3600 + b * 60 + c
    if b is not None:  # minutes:seconds
        return a * 60 + b
    return a * 60  # minutes


def _int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _set(value):
    return value if value and value not in ("(null)", "None") else None
