"""diagnose for people, doctor-style: the verdict (which names its deciding evidence), the rest of
the evidence and what was ruled out, one line each, then the verdict again with the next steps.
No line says twice what the verdict already says."""

from . import hanging, summary_line, verdict_line


def _body(d, summary, con):
    """Each evidence line the verdict does not already end with (and none twice), then each cause
    ruled out, wrapped under its label."""
    from rich.text import Text

    shown = []
    for line in d["evidence"]:
        if line not in shown and not summary.endswith(f": {line}"):
            shown.append(line)
    for line in shown:
        con.print(hanging(Text("  evidence: ", style="bold"), Text(line)))
    for r in d["ruled_out"]:
        con.print(hanging(Text("  ruled out: ", style="dim"), Text(f"{r['cause']}: {r['why']}")))


def render(doc, con):
    from rich.text import Text

    verdict_line(doc, con)
    _body(doc["data"], str(doc.get("summary")), con)
    for f in doc.get("findings") or []:  # what the run's telemetry showed while it ran
        con.print(hanging(Text(f"  {f['severity']}: ", style="bold yellow"), Text(f"{f['title']} ({f['id']})")))
    summary_line(doc, con)


def render_gang(doc, con):
    """A gang's diagnose: its nodes' states, then the first failed node's verdict as for one job."""
    d = doc["data"]
    for n in d["nodes"]:
        con.print(f"  node {n['index']} {n['host']}: {n['state']}" + (f" ({n['reason']})" if n.get("reason") else ""),
                  markup=False, soft_wrap=True)
    if d.get("diagnose"):
        _body(d["diagnose"], str(doc.get("summary")), con)
    summary_line(doc, con)
