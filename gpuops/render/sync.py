"""push, pull and verify for people: the paths that differ, the other findings, the verdict."""

from . import print_findings, summary_line


def render(doc, con):
    from rich.table import Table

    data = doc.get("data") or {}
    mism = data.get("mismatches") or []
    if mism:
        table = Table(title="paths that differ", expand=False)
        table.add_column("path")
        table.add_column("problem", no_wrap=True)
        for m in mism[:20]:
            table.add_row(m["path"], m["problem"])
        con.print(table)
    shown = [f for f in doc.get("findings") or [] if f["id"] != "sync.mismatch"]
    if shown:
        print_findings(shown, con)
    summary_line(doc, con)
