"""Diagnose: why a run stopped. One round trip gathers the evidence; the verdict is pure."""

from .. import errors
from ..diagnose import verdict
from ..envelope import envelope

_KINDS = {"not-found": errors.NotFound, "usage": errors.UsageError}
TAIL_FOR_TRIAGE = 64 * 1024


def diagnose(target, job=None, pid=None, since=None, jobs_dir=None, timeout_s=60.0):
    if bool(job) == bool(pid):
        raise errors.UsageError("diagnose needs exactly one of --job J or --pid P")
    args = ["--job", job] if job else ["--pid", str(int(pid))] + (["--since", str(since)] if since else [])
    if jobs_dir:
        args += ["--jobs-dir", jobs_dir]
    ev = target.run_onbox("diagnose", args, timeout_s=timeout_s)
    if ev.get("error"):
        err = ev["error"]
        raise _KINDS.get(err.get("kind"), errors.GpuopsError)(f"{target.name}: {err.get('message')}")
    v = verdict.decide(ev)
    if pid and v["confidence"] == "high" and v["verdict"] not in ("running", "reboot"):
        v["confidence"] = "medium"  # no exit record or launch baseline for a process we did not start
    triaged = _triage(ev.get("log_tail"))
    nxt = verdict.next_steps(v["verdict"], target.name, ev.get("job_id"))
    if triaged and triaged.get("primary"):
        nxt = [f"log tail triage: {triaged['primary']} ({triaged['status']})"] + list(triaged.get("next") or [])[:3] + nxt
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
    }
    ok = v["verdict"] in ("running", "completed")
    summary = f"{what}: {v['verdict']} ({v['confidence']} confidence)"
    if v["evidence"]:
        summary += f": {v['evidence'][-1]}"
    return envelope("diagnose", ok=ok, summary=summary, data=data, next=nxt)


def _triage(tail):
    if not tail:
        return None
    from ..triage import classify_bytes

    return classify_bytes(tail.encode("utf-8", "replace"))


def render(doc, con):
    from rich.table import Table

    from ..render import summary_line

    d = doc["data"]
    table = Table(show_header=False, box=None)
    table.add_row("[bold]verdict[/]", f"[bold]{d['verdict']}[/] ({d['confidence']} confidence)")
    for line in d["evidence"]:
        table.add_row("evidence", line)
    for r in d["ruled_out"]:
        table.add_row("ruled out", f"{r['cause']}: {r['why']}")
    con.print(table)
    summary_line(doc, con)
