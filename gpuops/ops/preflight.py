"""Preflight: ship the probe, run the checks locally, build the envelope."""

from ..envelope import envelope
from ..findings import any_failed, worst_first


def preflight(target, profile=None, paths=(), timeout_s=60.0):
    args = []
    for p in paths:
        args += ["--path", p]
    facts = target.run_onbox("probe", args, timeout_s=timeout_s)
    findings = []
    failed = any_failed(findings)
    return envelope("preflight", ok=not failed, summary="preflight ran", data=facts,
                    findings=worst_first(findings))


def render(doc, con):
    from ..render import findings_table, summary_line

    con.print(findings_table(doc["findings"], title=f"preflight {doc.get('host') or ''}".strip()))
    summary_line(doc, con)
