"""Detached jobs for people: the status table, a launch or retry line, stop's targets, a queue, a wait."""

import sys

from ..states import ALIVE
from ..units import duration
from . import closing, state_text, step_text, summary_line, verdict_line


# Display order, and which columns stay when the terminal is narrow (kubectl get's way): the id
# and the state always; the id is never cut, since its unique part is its end.
_HEADER = ("JOB", "NAME", "STATE", "AGE", "LAST PROGRESS", "PID")
_PRIORITY = ("JOB", "STATE", "NAME", "LAST PROGRESS", "AGE", "PID")
_LEAST = {"NAME": 8, "LAST PROGRESS": 16}


def _progress(r):
    p = (r.get("progress") or {}).get("last") or {}
    if not p:
        return "-"
    text = f"step {p['step']}" if p.get("step") is not None else (p.get("text") or "").strip()
    silent = (r.get("progress") or {}).get("silent_s")
    return text + (f", {duration(silent)} ago" if silent is not None else "")


def _name(r):
    """'-' for a job launched without --name (records older than this wrote the id as its name)."""
    name = r.get("name")
    return "-" if not name or name == r.get("job_id") else str(name)


def _where(r):
    """The pid, or a scheduler's own id of a job it runs ('slurm 812': its pid is on another node)."""
    return f"{r.get('engine')} {r['engine_job_id']}" if r.get("engine_job_id") else str(r.get("pid") or "-")


def _state(r):
    """The state with its exit code, and a run's attempt: 'RUNNING attempt 2/3' (a retried run is
    one row, its current attempt's)."""
    text = state_text(r)
    run = r.get("run") or {}
    if run.get("attempt") and run.get("of") and run["of"] > 1:
        text.append(f" attempt {run['attempt']}/{run['of']}")
    return text


def status_view(doc, width: int, verbose: bool = False):
    """The jobs table (a watchable one: `status --watch` redraws it), a row per run, the older
    ones counted; with `verbose` (or for the one job asked about) each job's reason, hint, run and
    what it runs now on lines of their own, which made 7 jobs 50 rows at 80 columns. A run's
    earlier attempts (status --all) are listed under it either way."""
    from rich.console import Group
    from rich.text import Text

    from .columns import table

    rows = doc["data"].get("jobs") or []
    cells = [{"JOB": r.get("job_id") or "-", "NAME": _name(r), "STATE": _state(r),
              "AGE": duration(r["age_s"]) if r.get("age_s") is not None else "-", "LAST PROGRESS": _progress(r),
              "PID": _where(r)} for r in rows]
    parts = [table(_HEADER, cells, _PRIORITY, _LEAST, width)] if rows else []
    more = doc["data"].get("more")
    if more:
        parts.append(Text(f"… {more} older (--limit 0 lists them all)", style="dim"))
    for r in rows:
        if verbose:
            parts.extend(_details(r, doc["data"].get("box_now"), width))
        for e in r.get("earlier") or []:
            said = e.get("reason") or e.get("hint") or ""
            parts.append(Text(f"    attempt {(e.get('run') or {}).get('attempt')} {e['job_id']}: {state_text(e)}"
                              + (f": {said}" if said else ""), style="dim"))
    if not verbose and any(r.get("reason") or r.get("hint") or r.get("run") for r in rows):
        parts.append(Text("--verbose says why each ended and how its run stands; --job ID for one", style="dim"))
    return Group(*parts)


def _details(r, now, width: int):
    """A job's lines under the table, each folded between words with its continuation indented."""
    from rich.text import Text

    from .fold import prose

    said = [f"{label}: {r[label]}" for label in ("reason", "hint") if r.get(label)]
    dim = []
    if r.get("run"):
        said.append(run_line(r["run"], now))
        if r.get("earlier_attempts") and not r.get("earlier"):
            dim.append(f"{r['earlier_attempts']} earlier attempt(s): status --all lists them")
    if r.get("telemetry") and r.get("state") in ALIVE:
        dim.append(f"now: {telemetry_line(r['telemetry'])}")
    return [Text("\n".join(prose(line, width, f"  {r['job_id']}: ", "      ")), style=style)
            for lines, style in ((said, ""), (dim, "dim")) for line in lines]


def run_line(run, now=None):
    """'attempt 2/4 of run R; last event: resumed 3m ago (from /ckpt/step-40); phase: saving checkpoint
    for 4m' (the phase its supervisor sees the attempt in)."""
    text = f"attempt {run.get('attempt')}/{run.get('of')} of run {run.get('id')}"
    last = run.get("last_event") or {}
    if last:
        ago = f" {duration(now - last['at'])} ago" if now and last.get("at") else ""
        said = last.get("checkpoint") and f"from {last['checkpoint']}" or last.get("why") or last.get("class")
        text += f"; last event: {str(last.get('kind')).replace('-', ' ')}{ago}" + (f" ({said})" if said else "")
    if run.get("resumed_from") and last.get("checkpoint") != run["resumed_from"]:
        text += f"; resumed from {run['resumed_from']}"
    act = run.get("activity") or {}
    if act.get("phase"):
        since = f" for {duration(now - act['since'])}" if now and act.get("since") else ""
        text += f"; phase: {act['phase']}{since}"
    return text


def telemetry_line(row):
    """'GPU0 97% 250/400 W 30.1 GiB, CPU 180% of 8 cores, RSS 3.2 GiB, 12 processes'."""
    from ..units import human_bytes

    parts = []
    for g in row.get("gpus") or []:
        power = f" {g['power']:.0f}/{g['power_limit']:.0f} W" if g.get("power") is not None and g.get(
            "power_limit") else ""
        mem = f" {g['mem'] / 1024:.1f} GiB" if g.get("mem") is not None else ""
        parts.append(f"GPU{g.get('i')} {g.get('util') if g.get('util') is not None else '?'}%{power}{mem}")
    if row.get("cpu") is not None:
        parts.append(f"CPU {row['cpu']:.0f}% of {row.get('cores') or '?'} cores")
    parts.append(f"RSS {human_bytes(row.get('rss'))}, {row.get('nproc')} processes")
    return ", ".join(parts)


def status(doc, con, verbose: bool = False) -> None:
    con.print(status_view(doc, con.width, verbose))
    summary_line(doc, con)


def started(doc, con) -> None:
    summary_line(doc, con)


def stop(doc, con) -> None:
    """The headline first (a dry run's plan in yellow: nothing is wrong), then the processes it
    names, then the command that acts on it, then the headline again on the last row."""
    verdict_line(doc, con)
    passing = []
    for t in doc["data"].get("targets") or []:
        if t.get("planned", True):
            con.print(f"  {t.get('shown')}", markup=False, soft_wrap=True)
        else:
            passing.append(t)
    if passing:
        what = ", ".join(sorted({(t.get("cmd") or "?")[:24] for t in passing}))
        kids = "child" if len(passing) == 1 else "children"
        con.print(f"  + {len(passing)} passing {kids} ({what}): signalled with the job, not in the plan",
                  markup=False, style="dim", no_wrap=True, overflow="ellipsis")
    closing(doc, con, bool(doc["data"].get("targets")))


def queue(doc, con) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"queue {doc['data'].get('queue')}"), expand=False)
    for col in ("line", "state", "job", "command"):
        table.add_column(col, no_wrap=col != "command")
    for e in doc["data"].get("entries") or []:
        table.add_row(str(e["line"]), state_text(e), Text(e.get("job_id") or "-"), Text(e["command"]))
    con.print(table)
    summary_line(doc, con)


def waited(doc, con) -> None:
    """The outcome line; the matched line when a regex ended the wait."""
    match = doc["data"].get("match")
    if match:
        con.print(f"  matched: {match['line']}", markup=False, soft_wrap=True)
    for e in (doc["data"].get("events") or [])[-10:]:
        said = e.get("why") or e.get("checkpoint") or ""
        con.print(f"  event {e.get('seq')} {e.get('kind')} (attempt {e.get('attempt')}){': ' + said if said else ''}",
                  markup=False, soft_wrap=True)
    run = (doc["data"].get("job") or {}).get("run")
    if run:
        con.print(f"  {run_line(run)}", markup=False, soft_wrap=True)
    summary_line(doc, con)


def logs_trailer(doc, con=None, stream=None) -> None:
    """After the raw log bytes on stdout, one line on stderr that says how the log ended for a
    person; the offsets stay in --json."""
    line = logs_ending(doc)
    if line:
        (stream or sys.stderr).write(f"gpuops: {line}\n")


def logs_ending(doc):
    """'demo COMPLETED (exit 0) after 20s' when a follow saw the job end; where a follow cut short
    left the job, with the command that resumes it; the command for the next page when there is
    more; None for a page that reached the log's end."""
    d = doc["data"]
    who = d.get("name") or d.get("job_id")
    again = step_text(doc["next"][0]) if doc.get("next") else None
    text = None
    if d.get("end") in ("exited", "vanished"):
        text = f"{who} {ended(d.get('state'), d.get('exit'), d.get('duration_s'))}"
    elif d.get("interrupted") or d.get("timed_out"):
        how = f"stopped following ({d['interrupted']})" if d.get("interrupted") else "stopped following at --timeout"
        where = f"{who} is {d['state']}" if d.get("state") else f"{who}: state unknown (the box did not answer)"
        text = f"{where}; {how}" + (f". Resume: {again}" if again else "")
    elif d.get("more") and again:
        text = f"more of the log: {again}"
    if d.get("saved_to"):
        text = (text + "; " if text else "") + f"saved to {d['saved_to']}"
    return text


def ended(state, exit_rec, duration_s):
    """'COMPLETED (exit 0) after 20s', 'KILLED (SIGTERM) after 3m 10s', 'VANISHED'."""
    rec = exit_rec or {}
    how = f" ({rec['signal']})" if rec.get("signal") else (
        f" (exit {rec['exit_code']})" if rec.get("exit_code") is not None else "")
    return f"{state}{how}" + (f" after {duration(duration_s)}" if duration_s is not None else "")
