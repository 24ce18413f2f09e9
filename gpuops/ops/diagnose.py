"""Diagnose: why a run stopped. One round trip gathers the evidence; the verdict is pure."""

from datetime import datetime

from .. import errors
from ..boundary import expect
from ..diagnose import scheduled, verdict
from ..envelope import envelope
from ..jobs import answers, slurmstate, state
from .jobs import payload
from .slurmjobs import SLURM


def diagnose(target, job=None, pid=None, since=None, jobs_dir=None, timeout_s=60.0):
    if bool(job) == bool(pid):
        raise errors.UsageError("diagnose needs exactly one of --job J or --pid P")
    args = ["--job", job] if job else ["--pid", str(int(pid))] + (["--since", str(since)] if since else [])
    if jobs_dir:
        args += ["--jobs-dir", jobs_dir]
    ev = target.run_onbox("diagnose", args, stdin=payload({}), timeout_s=timeout_s)
    if ev.get("error"):
        err = expect(ev, {"error": dict}, target.name)["error"]
        raise errors.for_kind(err.get("kind"))(f"{target.name}: {err.get('message')}")
    if ev.get("job_id") is not None:
        answers.job_id(ev["job_id"], target.name)
    row = state.derive(answers.facts(ev["job"], target.name)) if ev.get("job") else None
    if row is not None:
        ev["status"] = row
    if row is not None and row.get("engine") == SLURM:
        return _scheduled(target, ev, row, jobs_dir)
    v = verdict.decide(ev)
    if pid and v["confidence"] == "high" and v["verdict"] not in ("running", "reboot"):
        v["confidence"] = "medium"  # no exit record or launch baseline for a process we did not start
    triaged = _triage(ev, row)
    nxt, advice = verdict.next_steps(v["verdict"], target.name, ev.get("job_id"), jobs_dir)
    advice = verdict.triage_advice(triaged, ev, v["ruled_out"]) + advice
    if triaged and triaged.get("primary"):
        nxt += [s for s in triaged.get("next") or [] if s not in nxt]
    what = ev.get("job_id") or f"pid {pid}"
    data = {
        "verdict": v["verdict"],
        "confidence": v["confidence"],
        "job": ev.get("job_id"),
        "pid": ev.get("pid"),
        "exit_code": v["exit_code"],
        "signal": v["signal"],
        "evidence": v["evidence"],
        "ruled_out": v["ruled_out"],
        "kernel_log": {"readable": ev.get("kernel_readable"), "source": ev.get("kernel_source"),
                       "tried": ev.get("kernel_tried")},
        "oom_kills": {"at_launch": ev.get("oom_kills_at_launch"), "now": ev.get("oom_kills_now")},
        "disks": ev.get("disks"),
        "triage": triaged,
        "state": row["state"] if row else None,
    }
    ok = v["verdict"] in ("running", "completed", "stopped")  # a stop someone asked for is no failure
    summary = f"{what}: {v['verdict']} ({v['confidence']} confidence)"
    if v["evidence"]:
        summary += f": {v['evidence'][-1]}"
    return envelope("diagnose", ok=ok, summary=summary, data=data, next=nxt, advice=advice)


def _scheduled(target, ev, row, jobs_dir):
    """A Slurm job's diagnosis: the scheduler's verdict, its numbers, and the output's triage
    judged with the scheduler's own state."""
    for rec in ev.get("accounting") or []:
        answers.words(rec if isinstance(rec, dict) else {None: None}, target.name, "sacct row")
    v = scheduled.decide(ev, row)
    jid = row["job_id"]
    nxt, advice = scheduled.next_steps(v["verdict"], target.name, jid, row,
                                       (ev.get("meta") or {}).get("resources") or {}, jobs_dir)
    data = {"verdict": v["verdict"], "confidence": v["confidence"], "job": jid, "engine": SLURM,
            "slurm_job_id": row.get("slurm_job_id"), "exit_code": v["exit_code"], "signal": v["signal"],
            "evidence": v["evidence"], "ruled_out": v["ruled_out"], "scheduler": scheduled.facts(ev),
            "kernel_log": {"readable": ev.get("kernel_readable"), "source": ev.get("kernel_source"),
                           "node": ev.get("node"), "node_is_here": ev.get("node_is_here")},
            "disks": ev.get("disks"), "triage": _triage(ev, row), "state": row["state"]}
    ok = v["verdict"] in ("running", "pending", "paused", "completed", "stopped")
    summary = f"{jid} (Slurm job {row.get('slurm_job_id')}): {v['verdict']} ({v['confidence']} confidence)"
    if v["evidence"]:
        summary += f": {v['evidence'][-1]}"
    return envelope("diagnose", ok=ok, summary=summary, data=data, next=nxt, advice=advice)


def _triage(ev, row):
    """The log tail triaged against the box's clock and the job's state, as status sees it (a
    Slurm job: as the scheduler says it)."""
    tail = ev.get("log_tail")
    if not tail:
        return None
    from ..triage import classify_bytes

    now = datetime.fromtimestamp(float(ev["now"])) if ev.get("now") else None
    said = (row.get("scheduler_state") or row["state"]) if row else None
    rec = slurmstate.exit_record(row) if row and row.get("engine") == SLURM else ev.get("exit")
    return classify_bytes(tail.encode("utf-8", "replace"), now=now, slurm_state=said, exit_record=rec)
