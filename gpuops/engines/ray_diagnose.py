"""Why a Ray job stands where it does, from Ray's account of it and the head's evidence (pure:
evidence in, verdict out; the same document as gpuops.diagnose.verdict's).

Ray's own word comes first (a job it never started says so in its error type); then the record:
a stop gpuops asked for is "stopped", anyone else's "cancelled"; a driver killed by a signal is an
OOM kill when the head's kernel killed a process after launch; a fatal Xid on the head after
launch is a GPU fault; otherwise the driver's exit code.
"""

from .. import xid
from ..envelope import step
from .. import states

# Ray's error types for a job whose command never ran (its supervisor, runtime env or entrypoint).
NEVER_RAN = ("JOB_SUPERVISOR_ACTOR_START_FAILURE", "RUNTIME_ENV_SETUP_FAILURE", "JOB_ENTRYPOINT_COMMAND_START_ERROR",
             "JOB_SUPERVISOR_ACTOR_START_TIMEOUT", "JOB_SUPERVISOR_ACTOR_SCHEDULING_FAILURE")


def ray_words(ev):
    return (((ev.get("job") or {}).get("scheduler") or {}).get("job")
            or (ev.get("exit") or {}).get("scheduler") or {})


def decide(ev, row):
    job = ray_words(ev)
    state = row.get("state")
    evidence = ["Ray: %s%s%s" % (job.get("status") or "?", ", driver exit code %s" % job["driver_exit_code"]
                                 if job.get("driver_exit_code") else "",
                                 ": %s" % job["message"] if job.get("message") else "")]
    ruled_out = []

    def out(verdict, confidence, lines=()):
        return {"verdict": verdict, "confidence": confidence, "evidence": evidence + [x for x in lines if x],
                "ruled_out": ruled_out, "exit_code": row.get("exit_code"), "signal": row.get("signal")}

    if state == states.UNREACHABLE:
        return out("unreachable", "high", [row.get("reason")])
    if state == states.VANISHED:
        return out("vanished", "medium", [row.get("reason")])
    if state in (states.PENDING, states.STARTING):
        return out("pending", "high", [row.get("reason")])
    if state in (states.RUNNING, states.STALLED):
        return out(state.lower(), "high", [row.get("reason")])
    if state == states.COMPLETED:
        return out("completed", "high")
    if state == states.CANCELLED:
        if ((ev.get("job") or {}).get("stop") or {}).get("requested_at"):
            return out("stopped", "high", ["stopped by `gpuops stop` (stop.json)"])
        return out("cancelled", "high", ["stopped in Ray by someone other than gpuops (ray job stop, the dashboard)"])
    if job.get("error_type") in NEVER_RAN:
        return out("failed-to-start", "high", ["the command never ran: Ray could not start its driver"])
    fatal = [x for x in ev.get("xid_after_launch") or [] if xid.is_fatal(x.get("code"))]
    if fatal:
        return out("gpu-fault", "high", [x["line"] for x in fatal])
    ruled_out.append({"cause": "gpu-fault", "why": "no fatal Xid on the head after launch"})
    if state == states.KILLED:
        killed = ["the kernel OOM-killed pid %s (%s)" % (o["pid"], o["comm"]) for o in ev.get("kernel_oom_other") or []]
        if killed:
            return out("oom-kill", "medium", killed)
        return out("killed-by-signal", "medium", ["the driver died of %s" % row.get("signal")])
    return out("failed-exit", "high", ["the driver exited with code %s" % row.get("exit_code")])


def next_steps(verdict, host: str, job, jobs_dir=None):
    base = ["--host", host, "--job", job] + (["--jobs-dir", jobs_dir] if jobs_dir else [])
    if verdict in ("cancelled", "stopped", "vanished", "oom-kill", "killed-by-signal", "gpu-fault"):
        return [step("gpuops", "retry", *base), step("gpuops", "logs", *base, "--tail", "50")], []
    if verdict in ("pending", "running", "stalled"):
        return [step("gpuops", "status", *base), step("gpuops", "logs", *base, "--tail", "50")], []
    if verdict == "unreachable":
        return [], ["check the cluster on the head: ray status, and its dashboard (RAY_ADDRESS)"]
    if verdict == "completed":
        return [], []
    return [step("gpuops", "triage", *base), step("gpuops", "logs", *base, "--tail", "200")], []


def diagnosis(engine, ev, row, host: str, jobs_dir, triaged):
    v = decide(ev, row)
    jid, sid = row["job_id"], row.get("engine_job_id")
    nxt, advice = next_steps(v["verdict"], host, jid, jobs_dir)
    if triaged and triaged.get("primary"):
        nxt += [s for s in triaged.get("next") or [] if s not in nxt]
    data = {"verdict": v["verdict"], "confidence": v["confidence"], "job": jid, "engine": engine.name,
            "engine_job_id": sid, engine.job_id_key: sid, "exit_code": v["exit_code"], "signal": v["signal"], "evidence": v["evidence"],
            "ruled_out": v["ruled_out"], "scheduler": ray_words(ev),
            "kernel_log": {"readable": ev.get("kernel_readable"), "source": ev.get("kernel_source"),
                           "node": ev.get("node"), "node_is_here": ev.get("node_is_here")},
            "disks": ev.get("disks"), "triage": triaged, "state": row["state"]}
    return {"verdict": v, "data": data, "next": nxt, "advice": advice, "what": f"{jid} (Ray job {sid})",
            "ok": v["verdict"] in ("running", "pending", "completed", "stopped")}
