"""Diagnose: why a run stopped. One round trip gathers the evidence; the verdict is pure, and
its job's engine's (gpuops.engines)."""

from datetime import datetime

from .. import engines, errors
from ..boundary import expect
from ..diagnose import crash, verdict
from ..envelope import envelope
from ..engines import answers, statusrow
from ..jobs import curves, errorline, rows, runtelemetry
from ..onbox.triage.classes import CLASS_BY_NAME
from .jobs import payload, raise_reported



def diagnose(target, job=None, pid=None, since=None, jobs_dir=None, timeout_s=60.0, attempt=None):
    """Why the job stopped; with `attempt`, that attempt of the run `job` names (1: the first)."""
    if bool(job) == bool(pid):
        raise errors.UsageError("diagnose needs exactly one of --job J or --pid P")
    args = ["--job", job] if job else ["--pid", str(int(pid))] + (["--since", str(since)] if since else [])
    if jobs_dir:
        args += ["--jobs-dir", jobs_dir]
    ev = target.run_onbox("diagnose", args, stdin=payload({"attempt": attempt}), timeout_s=timeout_s)
    if ev.get("error"):
        raise_reported(target, expect(expect(ev, {"error": dict}, target.name)["error"], {"kind": str, "message": str},
                                      target.name, "error"))
    ev["cores"] = crash.checked(ev.get("cores"), target.name)
    if ev.get("job_id") is not None:
        answers.job_id(ev["job_id"], target.name)
    row = statusrow.derive(answers.facts(ev["job"], target.name)) if ev.get("job") else None
    if row is not None:
        ev["status"] = row
    engine = engines.of_record(row, target.name)  # a bare pid is the box's to judge
    triaged, ev["error_line"] = _triage(ev, row, engine)
    d = engine.diagnosis(ev, row, target.name, jobs_dir, triaged, pid=pid)
    v = d["verdict"]
    summary = f"{d['what']}: {verdict.in_words(v['verdict'])} ({v['confidence']} confidence)"
    if v["evidence"]:
        summary += f": {v['evidence'][-1]}"
    judged = runtelemetry.checked(ev.get("telemetry"), target.name)
    d["data"]["telemetry"] = judged
    run = (row or {}).get("run")
    if run:  # the attempt diagnosed, and where its run stands, and how each earlier attempt ended
        d["data"]["run"] = run
        summary += rows.run_tag(run)
        failed = ((ev.get("job") or {}).get("run") or {}).get("failed")
        d["data"]["evidence"] = list(d["data"].get("evidence") or []) + rows.earlier_attempts(failed, row["job_id"])
        if run.get("unsupervised"):
            d["data"]["evidence"].append(f"run: {statusrow.UNSUPERVISED}")
            summary += f"; {statusrow.UNSUPERVISED.split(' (')[0]}"
    return envelope("diagnose", ok=d["ok"], summary=summary, data=d["data"], next=d["next"], advice=d["advice"],
                    findings=runtelemetry.findings(judged) + curves.findings((ev.get("job") or {}).get("trackers")))


def _triage(ev, row, engine):
    """(the log tail triaged against the box's clock and the job's state as its engine says it
    (a scheduler's job: its own word), the line of the log that says why it failed): the first
    line of the failure class triage found, else the first line that reads as an error."""
    tail = ev.get("log_tail")
    if not tail:
        return None, None
    from ..onbox.triage.logtriage import triage_bytes

    now = datetime.fromtimestamp(float(ev["now"])) if ev.get("now") else None
    said, rec = engine.triage_inputs(row, ev) if row else (None, ev.get("exit"))
    result = triage_bytes(tail.encode("utf-8", "replace"), now=now, slurm_state=said, exit_record=rec,
                          progress=statusrow.dated_progress(row))
    if result.data["status"] in ("running", "hanging", "completed"):
        return result.data, None
    primary = result.data["primary"]
    cause = primary and CLASS_BY_NAME[primary].role in ("root", "cause")  # not a launcher's exit report
    lead = next((f.evidence for f in result.findings if cause and f.id == f"triage.{primary}"), {})
    return result.data, lead.get("text") or errorline.first_error(tail)
