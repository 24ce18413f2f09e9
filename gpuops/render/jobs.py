"""Detached jobs for people: the status table, a launch or retry line, stop's targets, a queue, a wait."""

import sys

from ..units import duration
from . import state_text, summary_line


def status(doc, con):
    from rich.table import Table

    rows = doc["data"].get("jobs") or []
    table = Table(title=f"jobs on {doc.get('host') or ''}".strip(), expand=False)
    for col in ("job", "name", "state", "age", "last progress", "pid / Slurm job"):
        table.add_column(col, no_wrap=col != "last progress")
    for r in rows:
        p = (r.get("progress") or {}).get("last") or {}
        prog = "-"
        if p:
            prog = (f"step {p['step']}" if p.get("step") is not None else p.get("text", "")[:40])
            silent = (r.get("progress") or {}).get("silent_s")
            prog += f", {duration(silent)} ago" if silent is not None else ""
        age = duration(r.get("age_s")) if r.get("age_s") is not None else "-"
        where = f"slurm {r['slurm_job_id']}" if r.get("slurm_job_id") else str(r.get("pid") or "-")
        table.add_row(r.get("job_id") or "-", str(r.get("name") or "-"), state_text(r), age, prog, where)
    if rows:
        con.print(table)
    for r in rows:
        for label, key in (("reason", "reason"), ("hint", "hint")):
            if r.get(key):
                con.print(f"  {r['job_id']}: {label}: {r[key]}", markup=False, soft_wrap=True)
    summary_line(doc, con)


def started(doc, con):
    summary_line(doc, con)


def stop(doc, con):
    for t in doc["data"].get("targets") or []:
        if "slurm_job_id" in t:
            con.print(f"  Slurm job {t['slurm_job_id']}: {t.get('state')} on {t.get('nodes') or '-'}", markup=False)
            continue
        con.print(f"  pid {t['pid']}{' [GPU]' if t.get('gpu') else ''}: {t.get('cmd') or ''}", markup=False,
                  soft_wrap=True)
    summary_line(doc, con)


def queue(doc, con):
    from rich.table import Table

    table = Table(title=f"queue {doc['data'].get('queue')}", expand=False)
    for col in ("line", "state", "job", "command"):
        table.add_column(col, no_wrap=col != "command")
    for e in doc["data"].get("entries") or []:
        table.add_row(str(e["line"]), state_text(e), e.get("job_id") or "-", e["command"])
    con.print(table)
    summary_line(doc, con)


def waited(doc, con):
    """The outcome line; the matched line when a regex ended the wait."""
    match = doc["data"].get("match")
    if match:
        con.print(f"  matched: {match['line']}", markup=False, soft_wrap=True)
    summary_line(doc, con)


def logs_trailer(doc, con=None, stream=None):
    """After raw log bytes on stdout: one line on stderr with the outcome and the next offset."""
    stream = stream or sys.stderr
    d = doc["data"]
    stream.write(f"gpuops: {doc['summary']}; next offset {d.get('next_offset')}\n")
