"""diagnose for people, doctor-style: the verdict (which names its deciding evidence), the rest of
the evidence and what was ruled out, one line each, the next steps, then the verdict again. No
line says twice what the verdict already says."""

from . import closing, hanging, summary_line, verdict_line


def _body(d, summary, con, brief=False) -> None:
    """Each evidence line the verdict does not already say (and none twice), then each cause
    ruled out, wrapped under its label; `brief`: the causes ruled out named on one line."""
    from rich.text import Text

    shown = []
    for line in d["evidence"]:
        if line not in shown and f": {line}" not in summary:  # it may end with the run's [attempt n/m]
            shown.append(line)
    for line in shown:
        con.print(hanging(Text("  evidence: ", style="bold"), Text(line)))
    if brief and d["ruled_out"]:
        names = ", ".join(r["cause"] for r in d["ruled_out"])
        con.print(hanging(Text("  ruled out: ", style="dim"), Text(f"{names} (--json says how each was)")))
        return
    for r in d["ruled_out"]:
        con.print(hanging(Text("  ruled out: ", style="dim"), Text(f"{r['cause']}: {r['why']}")))


def render(doc, con) -> None:
    """The whole report where the terminal has the rows for it (two left for the prompt and the
    command), else the same with the causes ruled out named on one line: a stalled attempt's was
    27 rows at 80 columns, its verdict scrolled off."""
    brief = _rows(con, lambda c: _report(doc, c)) > con.height - 2
    _report(doc, con, brief)


def _report(doc, con, brief=False) -> None:
    from rich.text import Text

    verdict_line(doc, con)
    _body(doc["data"], str(doc.get("summary")), con, brief)
    for f in doc.get("findings") or []:  # what the run's telemetry showed while it ran
        con.print(hanging(Text(f"  {f['severity']}: ", style="bold yellow"), Text(f"{f['title']} ({f['id']})")))
    closing(doc, con, True)


def _rows(con, draw) -> int:
    """The rows `draw(console)` takes on a terminal as wide as `con`, each line as it folds there."""
    import io

    from rich.cells import cell_len
    from rich.console import Console

    out = io.StringIO()
    draw(Console(file=out, width=con.width, height=con.height, no_color=True, highlight=False, soft_wrap=False))
    return sum(max(1, -(-cell_len(line) // con.width)) for line in out.getvalue().splitlines())


def render_gang(doc, con) -> None:
    """A gang's diagnose: its nodes' states, then the first failed node's verdict as for one job."""
    d = doc["data"]
    for n in d["nodes"]:
        con.print(f"  node {n['index']} {n['host']}: {n['state']}" + (f" ({n['reason']})" if n.get("reason") else ""),
                  markup=False, soft_wrap=True)
    if d.get("diagnose"):
        _body(d["diagnose"], str(doc.get("summary")), con)
    summary_line(doc, con)
