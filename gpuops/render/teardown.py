"""teardown-check for people: the findings and the verdict."""

from . import print_findings, summary_line, verdict_line


def render(doc, con):
    verdict_line(doc, con)
    print_findings(doc["findings"], con)
    summary_line(doc, con)
