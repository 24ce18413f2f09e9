"""diagnose for people: the verdict, its evidence and what was ruled out."""

from . import summary_line


def render(doc, con):
    from rich.table import Table
    from rich.text import Text

    d = doc["data"]
    table = Table(show_header=False, box=None)
    table.add_row(Text("verdict", style="bold"), Text.assemble((d["verdict"], "bold"), f" ({d['confidence']} confidence)"))
    for line in d["evidence"]:
        table.add_row("evidence", Text(line))
    for r in d["ruled_out"]:
        table.add_row("ruled out", Text(f"{r['cause']}: {r['why']}"))
    con.print(table)
    summary_line(doc, con)


def render_gang(doc, con):
    """A gang's diagnose: its nodes' states, then the first failed node's verdict as for one job."""
    d = doc["data"]
    for n in d["nodes"]:
        con.print(f"  node {n['index']} {n['host']}: {n['state']}" + (f" ({n['reason']})" if n.get("reason") else ""),
                  markup=False, soft_wrap=True)
    if d.get("diagnose"):
        render(dict(doc, data=d["diagnose"]), con)
    else:
        summary_line(doc, con)
