"""push, pull and verify for people, doctor-style: the paths that differ are the evidence of the
finding that says so (one block, not a table and then the finding again), then the verdict."""

from . import doctor

# The findings whose evidence is the list of paths that differ.
MISMATCH = ("sync.mismatch", "verify.drift")


def render(doc, con, show_all=False, verbose: bool = False) -> None:
    differ = {m["path"]: m["problem"] for m in (doc.get("data") or {}).get("mismatches") or []}
    findings = [dict(f, evidence=differ) if f["id"] in MISMATCH and differ else f for f in doc.get("findings") or []]
    doctor(dict(doc, findings=findings), con, show_all=show_all, verbose=verbose)
