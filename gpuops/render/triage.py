"""The triage report for people: markdown built from the JSON envelope alone.

Same sections as the procedure's report: status / primary / stage, what happened, evidence lines,
the progress projection, other findings, dashboards of RAY=1 jobs, numbered next steps.
"""

import sys

from ..errors import UsageError
from ..units import duration
from . import step_text

FORMATS = ("rich", "md")


def _findings(doc):
    return {f["id"]: f for f in doc.get("findings") or []}


def _pct(done, total):
    return f" ({100.0 * done / total:.1f}%)" if total else ""


def progress_rows(p, ctx):
    first, last, total = p["first_step"], p["last_step"], p["total_steps"]
    if last is None:
        return [("Training steps", "none completed in this log")]
    start = ctx.get("restore") or ("fresh start" if first == 0 else f"restored from checkpoint step {first - 1}")
    if ctx.get("restore_confirmed"):
        start += f" (Ray workers: {ctx['restore_confirmed']})"
    rows = [("Start", start),
            ("Steps completed (this run)", f"{last - first + 1} (step {first} through {last})"),
            ("Overall progress", f"{last + 1} / {total}{_pct(last + 1, total)}" if total else f"{last + 1} / unknown total")]
    st = p["step_time_s"]
    rows.append(("Steady-state step time", f"{st:.3f} s" if st else "unknown (fewer than 6 steps, or no seconds: field)"))
    if p["expected_step_now"] is not None:
        behind = p["expected_step_now"] - last
        rows.append(("Expected step now", f"{p['expected_step_now']} ({behind} steps after the last logged one, "
                                          f"as of {ctx.get('now')})"))
    period = p["checkpoint_period"]
    if period:
        ckpt = p["last_periodic_ckpt"]
        rows.append(("Last periodic checkpoint", f"step {ckpt}" if ckpt is not None
                     else f"none: step {period} (checkpoint_period) was never reached"))
    else:
        rows.append(("Last periodic checkpoint", "unknown (no checkpoint_period in the log)"))
    if p["steps_lost"] is not None:
        lost = p["steps_lost"]
        cost = f", about {duration(lost * st)}" if st else ""
        how = "since the last periodic checkpoint" if p["last_periodic_ckpt"] is not None else "all of this run: no periodic checkpoint"
        rows.append(("Progress lost", f"{lost} steps{cost} ({how})"))
    if p["eta_s"] is not None:
        rows.append(("Estimated time remaining", f"{duration(p['eta_s'])} from the last step, if the job were healthy"))
    return rows


def markdown(doc):
    data = doc.get("data") or {}
    found = _findings(doc)
    ctx = (found.get("triage.context") or {}).get("evidence") or {}
    source = ctx.get("log") or (f"{doc.get('host')}:{ctx.get('job')}" if ctx.get("job") else "log")
    out = [f"## Job triage: {source}", ""]
    out.append(f"**Status:** {data.get('status')}  ")
    out.append(f"**Primary failure:** {data.get('primary') or 'none'}  ")
    out.append(f"**Stage:** {data.get('stage') or 'n/a'}")
    out += ["", "### What happened", _what(data, found, ctx), ""]
    out.append("### Evidence")
    if data.get("evidence"):
        out.append("```text")
        out += [f"{e['line']:>8}: {e['text']}" for e in data["evidence"]]
        out.append("```")
    else:
        out.append("No failure lines.")
    out += ["", "### Training progress projection", "| Metric | Value |", "|--------|-------|"]
    out += [f"| {k} | {v} |" for k, v in progress_rows(data["progress"], ctx)]
    others = [found[f"triage.{c}"] for c in data.get("also") or [] if f"triage.{c}" in found]
    out += ["", "### Additional findings"]
    if others:
        for f in others:
            where = f" (line {f['evidence']['line']}, {f['evidence']['count']}x)" if "line" in f["evidence"] else ""
            out.append(f"- **{f['id'][len('triage.'):]}**{where}: {f['title']}")
    else:
        out.append("None.")
    hb = found.get("triage.heartbeat-checklist")
    if hb:
        out.append(f"- {hb['title']}")
    dash = found.get("triage.ray-dashboards")
    if dash:
        d = dash["evidence"]
        out += ["", "### Live dashboards (RAY=1)"]
        out.append(f"- Head node: {d.get('head_host') or 'unknown'}; Prometheus port: {d.get('prometheus_port')}")
        if d.get("tunnel"):
            out.append(f"- Tunnel command (line {d.get('tunnel_line')}): `{d['tunnel']}`")
        out.append("- The job is live: want port forwarding for the Ray Dashboard, TensorBoard and Prometheus?"
                   if d.get("live") else "- The job has ended: its live dashboards are gone (use the persisted TSDB).")
    out += ["", "### Recommended next steps"]
    todo = [f"`{step_text(s)}`" + (f" ({s['why']})" if s.get("why") else "") for s in doc.get("next") or []]
    out += [f"{i}. {text}" for i, text in enumerate(todo + list(doc.get("advice") or []), 1)] or ["Nothing to do."]
    return "\n".join(out) + "\n"


def _what(data, found, ctx):
    primary = data.get("primary")
    parts = []
    if primary and f"triage.{primary}" in found:
        parts.append(found[f"triage.{primary}"]["title"])
    elif data.get("status") == "completed":
        parts.append("The job finished successfully.")
    elif data.get("status") == "running":
        parts.append("The job is running and its training steps are advancing.")
    elif ctx.get("no_end"):
        parts.append("No end in the log: nothing in it says the process ended (no completion, failure, cancel or "
                     "exit record), and no job state says so; no death is claimed.")
    else:
        parts.append("No known failure signature was found.")
    if ctx.get("ended_by"):
        parts.append(f"End recorded by {ctx['ended_by']}.")
    if ctx.get("job_state"):
        parts.append(f"Job state: {ctx['job_state']}.")
    if ctx.get("stalled_for_s") and data.get("status") in ("hanging", "unknown"):
        parts.append(f"No step for {duration(ctx['stalled_for_s'])} before {ctx.get('now')}.")
    if data.get("status") == "cancelled" and primary and primary != "cancelled":
        parts.append("The cancellation only stopped it; the underlying cause is above.")
    return " ".join(parts)


def check_format(fmt):
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"--format takes {' or '.join(FORMATS)}, not {fmt!r}")


def render(doc, con=None, fmt=None):
    """Rendered Markdown on a terminal; the raw text when piped (it is Markdown already, for a
    ticket or a chat) or when asked for with --format md."""
    text = markdown(doc)
    if fmt == "md" or (fmt is None and not sys.stdout.isatty()) or con is None:
        sys.stdout.write(text)
        return
    from rich.markdown import Markdown

    con.print(Markdown(text))
