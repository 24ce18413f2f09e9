"""teardown-check for people: the findings and the verdict."""

from . import findings_table, summary_line


def render(doc, con):
    con.print(findings_table(doc["findings"], title=f"teardown-check {doc.get('host') or ''}".strip()))
    summary_line(doc, con)
