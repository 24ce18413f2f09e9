"""Why a Slurm job stopped, from the scheduler's account of it (pure: evidence in, verdict out).

The scheduler's own verdict comes first (TIMEOUT, OUT_OF_MEMORY, PREEMPTED, NODE_FAIL are facts
only Slurm has), then what the record adds: a cancel gpuops asked for is "stopped", anyone else's
is "cancelled". A FAILED job whose task was killed is told apart from Slurm's memory limit by its
numbers: MaxRSS against ReqMem, the log's `Killed`, and (where the node is the login node itself)
the kernel's OOM-killer and Xid lines. Same verdict document as gpuops.diagnose.verdict.
"""

import re

from .. import xid
from ..envelope import step
from .. import states
from . import slurm_state

_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
NEAR_LIMIT = 0.9  # MaxRSS this close to ReqMem: the memory limit is the likely killer
_KILLED = re.compile(r"(?m)(^|\s)Killed\b|oom[-_]kill", re.I)


def megabytes(text: str):
    """MB of a Slurm size ('1234K', '2G', '4000Mn', '16Gc'), or None."""
    m = re.match(r"^\s*([\d.]+)\s*([KMGT]?)[nc]?\s*$", str(text or ""), re.I)
    if not m:
        return None
    return float(m.group(1)) * _UNITS[(m.group(2) or "M").upper()]


def facts(ev):
    """The scheduler's numbers for the envelope: state, exit codes, reason, nodes, time, memory."""
    rec = ev.get("exit") or {}
    job = dict(rec.get("scheduler") or {}, **((((ev.get("job") or {}).get("scheduler") or {}).get("job")) or {}))
    rows = ev.get("accounting") or []
    own = rows[0] if rows else {}
    rss = [megabytes(r.get("MaxRSS")) for r in rows if megabytes(r.get("MaxRSS"))]
    return {"state": job.get("JobState") or own.get("State"), "exit_code": job.get("ExitCode") or own.get("ExitCode"),
            "derived_exit_code": job.get("DerivedExitCode") or own.get("DerivedExitCode"),
            "reason": job.get("Reason"), "nodes": job.get("NodeList") or own.get("NodeList"),
            "elapsed": job.get("RunTime") or own.get("Elapsed"), "time_limit": job.get("TimeLimit") or own.get("Timelimit"),
            "max_rss_mb": max(rss) if rss else None, "req_mem": own.get("ReqMem") or job.get("MinMemoryNode"),
            "accounting": ev.get("accounting_source"), "node": ev.get("node"), "node_is_here": ev.get("node_is_here")}


def decide(ev, row):
    """The verdict document of a Slurm job (`row`: its status row, gpuops.engines.statusrow.derive)."""
    f = facts(ev)
    state, word = row.get("state"), (f["state"] or "").split(" ")[0]
    evidence = [f"Slurm: {f['state']}, ExitCode {f['exit_code']}, DerivedExitCode {f['derived_exit_code']}"
                + (f", Reason {f['reason']}" if f["reason"] not in (None, "None") else "")
                + (f", on {f['nodes']}" if f["nodes"] else "")]
    ruled_out = []
    if f["elapsed"] and f["time_limit"] and slurm_state.seconds(f["time_limit"]):
        evidence.append(f"ran {f['elapsed']} of its {f['time_limit']} time limit")
    mem = _memory_line(f)
    if mem:
        evidence.append(mem)

    def out(verdict, confidence, lines=()):
        return {"verdict": verdict, "confidence": confidence, "evidence": evidence + list(lines),
                "ruled_out": ruled_out, "exit_code": row.get("exit_code"), "signal": row.get("signal")}

    if state == states.UNREACHABLE:
        return out("unreachable", "high", [row.get("reason") or "the Slurm controller did not answer"])
    if state == states.VANISHED:
        return out("vanished", "medium", [row.get("reason")])
    if state in (states.PENDING, states.STARTING):
        return out("never-runs" if row.get("never_runs") else "pending", "high", [row.get("reason")])
    if state in (states.RUNNING, states.STALLED, states.PAUSED):
        return out(state.lower(), "high", [row["reason"]] if row.get("reason") else [])
    if state == states.COMPLETED:
        return out("completed", "high")
    if state == states.TIMEOUT:
        return out("timeout", "high", [row.get("reason")])
    if state == states.PREEMPTED:
        return out("preempted", "high")
    if word == "NODE_FAIL":
        return out("node-failure", "high", [row.get("reason")])
    if word == "OUT_OF_MEMORY":
        return out("oom-kill", "high", ["Slurm ended it for exceeding its memory limit (OUT_OF_MEMORY)"])
    if state == states.CANCELLED:
        stop = (ev.get("job") or {}).get("stop") or {}
        if stop.get("requested_at"):
            return out("stopped", "high", ["cancelled by `gpuops stop` (stop.json)"])
        return out("cancelled", "high", ["cancelled in Slurm by someone other than gpuops (scancel, an admin)"])
    fatal = [x for x in ev.get("xid_after_launch") or [] if xid.is_fatal(x.get("code"))]
    if fatal:
        return out("gpu-fault", "high", [x["line"] for x in fatal])
    if ev.get("node_is_here"):
        ruled_out.append({"cause": "gpu-fault", "why": "no fatal Xid on the node after launch"})
    else:
        ruled_out.append({"cause": "gpu-fault", "why": f"the node's kernel log is on {f['node'] or 'the node'}, not "
                                                        "this login node: not read"})
    killed = _KILLED.search(ev.get("log_tail") or "")
    near = _near_limit(f)
    if killed and (near or ev.get("kernel_oom_other")):
        lines = [f"the log says {killed.group(0).strip()!r}"] + [f"the kernel OOM-killed pid {o['pid']} ({o['comm']})"
                                                                  for o in ev.get("kernel_oom_other") or []]
        return out("oom-kill", "medium" if near else "high", lines)
    if killed or row.get("signal"):
        return out("killed-by-signal", "medium", [f"a task was killed ({row.get('signal') or 'Killed'}) with MaxRSS "
                                                  "well under its memory limit"])
    ruled_out.append({"cause": "oom-kill", "why": "no `Killed` in the log and Slurm did not end it for memory"})
    return out("failed-exit", "high", [f"the batch script exited with code {row.get('exit_code')}"])


def _memory_line(f):
    if f["max_rss_mb"] is None:
        return None
    limit = megabytes(f["req_mem"])
    if not limit:
        return f"MaxRSS {f['max_rss_mb']:.0f} MiB"
    return f"MaxRSS {f['max_rss_mb']:.0f} MiB of ReqMem {f['req_mem']} ({100 * f['max_rss_mb'] / limit:.0f}%)"


def _near_limit(f):
    limit = megabytes(f["req_mem"])
    return bool(limit and f["max_rss_mb"] and f["max_rss_mb"] >= NEAR_LIMIT * limit)


def next_steps(verdict, host: str, job, row, resources, jobs_dir=None):
    """Runnable next steps (envelope.step) for a verdict; what needs a person's judgement is advice."""
    base = ["--host", host, "--job", job] + (["--jobs-dir", jobs_dir] if jobs_dir else [])
    retry = ("gpuops", "retry", *base)
    if verdict == "timeout":
        limit = slurm_state.seconds(row.get("time_limit")) or slurm_state.seconds(resources.get("time"))
        more = [step(*retry, "--time", str(2 * limit // 60), why="twice the time it was given (minutes)")] if limit \
            else []
        return more + [step("gpuops", "triage", *base)], ["checkpoint with --signal USR1@120 so a time limit "
                                                          "costs minutes, not the run"]
    if verdict == "oom-kill":
        mem = megabytes(resources.get("mem"))
        more = [step(*retry, "--mem", f"{int(2 * mem)}M", why="twice the memory it asked for")] if mem else []
        return more + [step("gpuops", "triage", *base)], ["or lower the job's host memory: fewer DataLoader "
                                                          "workers, no full-dataset preload"]
    if verdict in ("preempted", "node-failure", "cancelled", "stopped", "vanished"):
        return [step(*retry)], []
    if verdict in ("pending", "never-runs", "running", "stalled", "paused"):
        return [step("gpuops", "status", *base), step("gpuops", "logs", *base, "--tail", "50")], []
    if verdict == "unreachable":
        return [], ["check the Slurm controller from the login node: scontrol ping"]
    return [step("gpuops", "triage", *base), step("gpuops", "logs", *base, "--tail", "200")], []
