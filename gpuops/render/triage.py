"""The triage report for people, built from the JSON envelope alone: doctor-style like every
other verb's (the verdict first and last, one line per finding, the log's own evidence lines, the
progress in one line, next steps and advice), or with --format md the procedure's Markdown
report (status / primary / stage, what happened, evidence, the progress table, other findings,
dashboards of RAY=1 jobs, numbered next steps) for a ticket or a chat.
"""

from ..errors import UsageError
from ..units import duration
from . import doctor, step_text

FORMATS = ("rich", "md")
# Findings that are the report's frame, not a problem of the job: shown as its head and body.
_FRAME = ("triage.context", "triage.ray-dashboards", "triage.node-exits")
EVIDENCE_LINES = 8
ADVICE = 3  # advice lines at the default verbosity; the rest under --verbose


def _findings(doc):
    return {f["id"]: f for f in doc.get("findings") or []}


def _pct(done, total: int):
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


def render(doc, con=None, fmt=None, verbose: bool = False) -> None:
    """The doctor-style report (the default, on a terminal and through a pipe alike): the verdict,
    the log's evidence lines, the progress, one line per finding, the next steps and the first
    advice, the verdict again; --verbose adds what happened, the progress in full, each finding's
    evidence and all the advice. The raw Markdown with --format md."""
    if fmt == "md" or con is None:
        import sys

        sys.stdout.write(markdown(doc))
        return
    from rich.text import Text

    from . import cut, hanging

    data = doc.get("data") or {}
    found = _findings(doc)
    ctx = (found.get("triage.context") or {}).get("evidence") or {}
    blocks = [hanging(Text("what happened: ", style="bold"), Text(_what(data, found, ctx)))] if verbose else []
    blocks += _evidence_lines(data, verbose)
    p = data.get("progress")
    if verbose and p:
        blocks.append(Text("progress:", style="bold"))
        blocks += [hanging(Text(f"  {k}: "), Text(v)) for k, v in progress_rows(p, ctx)]
    else:
        blocks.append(cut(Text.assemble(("progress: ", "bold"), _progress_line(p))))
    exits = (found.get("triage.node-exits") or {}).get("evidence")
    if exits:
        blocks.append(cut(Text.assemble(("node exits: ", "bold"), ", ".join(f"{n} {c}" for n, c in exits.items()))))
    blocks += _dashboards(found.get("triage.ray-dashboards"))
    findings = [f for f in doc.get("findings") or [] if f["id"] not in _FRAME]
    advice = doc.get("advice") or []
    if not verbose and len(advice) > ADVICE:
        advice = advice[:ADVICE - 1] + [f"... {len(advice) - ADVICE + 1} more (--verbose)"]
    source = ctx.get("log") if not ctx.get("job") else None
    doctor(dict(doc, findings=findings, advice=advice, host=source or doc.get("host")), con, blocks, verbose=verbose)


def _evidence_lines(data, verbose: bool):
    """The log's own lines, numbered as the log numbers them: cut at the edge (--verbose wraps)."""
    from rich.text import Text

    from . import cut, hanging

    lines = (data.get("evidence") or [])[:EVIDENCE_LINES]
    width = max([len(str(e["line"])) for e in lines] or [0])
    shown = []
    for e in lines:
        number = Text(f"  {e['line']:>{width}}: ", style="dim")
        shown.append(hanging(number, Text(e["text"])) if verbose else cut(Text.assemble(number, e["text"])))
    return [Text("evidence (the log's lines):", style="bold")] + shown if shown else []


def _progress_line(p):
    """'211 / 5000 steps (4.2%), 2.250 s a step, checkpoint at step 200 (10 steps lost), ETA 2h 59m'."""
    if not p or p.get("last_step") is None:
        return "no training step completed in this log"
    done, total, parts = p["last_step"] + 1, p["total_steps"], []
    parts.append(f"{done} / {total} steps{_pct(done, total)}" if total else f"{done} steps")
    if p["step_time_s"]:
        parts.append(f"{p['step_time_s']:.3f} s a step")
    if p["last_periodic_ckpt"] is not None:
        lost = f" ({p['steps_lost']} steps lost)" if p["steps_lost"] is not None else ""
        parts.append(f"checkpoint at step {p['last_periodic_ckpt']}{lost}")
    elif p["checkpoint_period"]:
        parts.append("no periodic checkpoint yet")
    if p["eta_s"] is not None:
        parts.append(f"ETA {duration(p['eta_s'])} if healthy")
    return ", ".join(parts)


def _dashboards(f):
    from rich.text import Text

    if not f:
        return []
    d = f["evidence"]
    head = f"RAY=1 dashboards: head node {d.get('head_host') or 'unknown'}, Prometheus port {d.get('prometheus_port')}"
    lines = [Text(head)]
    if d.get("tunnel"):
        lines.append(Text(f"  tunnel (line {d.get('tunnel_line')}): {d['tunnel']}"))
    lines.append(Text("  the job is live: forward the Ray Dashboard, TensorBoard and Prometheus ports" if d.get("live")
                      else "  the job has ended: its live dashboards are gone (use the persisted TSDB)"))
    return lines
