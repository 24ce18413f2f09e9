"""Diagnose: why a run stopped. One round trip gathers the evidence; the verdict is pure."""

from datetime import datetime

from .. import errors
from ..boundary import expect
from ..diagnose import crash, scheduled, trackers, verdict
from ..envelope import envelope
from ..jobs import answers, errorline, slurmstate, state
from ..triage.classes import CLASS_BY_NAME
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
    ev["cores"] = crash.checked(ev.get("cores"), target.name)
    if ev.get("job_id") is not None:
        answers.job_id(ev["job_id"], target.name)
    row = state.derive(answers.facts(ev["job"], target.name)) if ev.get("job") else None
    if row is not None:
        ev["status"] = row
    if row is not None and row.get("engine") == SLURM:
        return _scheduled(target, ev, row, jobs_dir)
    triaged, ev["error_line"] = _triage(ev, row)
    v = verdict.decide(ev)
    if pid and v["confidence"] == "high" and v["verdict"] not in ("running", "reboot"):
        v["confidence"] = "medium"  # no exit record or launch baseline for a process we did not start
    nxt, advice = verdict.next_steps(v["verdict"], target.name, ev.get("job_id"), jobs_dir)
    advice = verdict.triage_advice(triaged, ev, v["ruled_out"]) + advice
    tracked = trackers.wandb(ev.get("log_head"), ev.get("log_tail"), (ev.get("meta") or {}).get("env"))
    advice += trackers.advice(tracked)
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
        "cores": ev.get("cores"),
        "trackers": {"wandb": tracked},
        "triage": triaged,
        "error_line": ev["error_line"],
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
            "disks": ev.get("disks"), "triage": _triage(ev, row)[0], "state": row["state"]}
    ok = v["verdict"] in ("running", "pending", "paused", "completed", "stopped")
    summary = f"{jid} (Slurm job {row.get('slurm_job_id')}): {v['verdict']} ({v['confidence']} confidence)"
    if v["evidence"]:
        summary += f": {v['evidence'][-1]}"
    return envelope("diagnose", ok=ok, summary=summary, data=data, next=nxt, advice=advice)


def _triage(ev, row):
    """(the log tail triaged against the box's clock and the job's state, as status sees it (a
    Slurm job: as the scheduler says it), the line of the log that says why it failed): the first
    line of the failure class triage found, else the first line that reads as an error."""
    tail = ev.get("log_tail")
    if not tail:
        return None, None
    from ..triage import triage_bytes

    now = datetime.fromtimestamp(float(ev["now"])) if ev.get("now") else None
    said = (row.get("scheduler_state") or row["state"]) if row else None
    rec = slurmstate.exit_record(row) if row and row.get("engine") == SLURM else ev.get("exit")
    result = triage_bytes(tail.encode("utf-8", "replace"), now=now, slurm_state=said, exit_record=rec,
                          progress=state.dated_progress(row))
    if result.data["status"] in ("running", "hanging", "completed"):
        return result.data, None
    primary = result.data["primary"]
    cause = primary and CLASS_BY_NAME[primary].role in ("root", "cause")  # not a launcher's exit report
    lead = next((f.evidence for f in result.findings if cause and f.id == f"triage.{primary}"), {})
    return result.data, lead.get("text") or errorline.first_error(tail)
