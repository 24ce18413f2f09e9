"""What the job's supervisor saw in its first minutes about where its curves go (gpuops.onbox.
trackwatch: W&B not syncing, U35; TensorBoard not reading its events, U39), as findings status,
diagnose and triage --job report. The record comes from the box: its shape and its words are
checked here before anything is read from it, and only the gotcha ids those checks cite pass."""

from ..boundary import expect, optional
from ..errors import BadAnswer
from ..findings import SEVERITIES, Finding

NUMBER = (int, float)
NONE = type(None)
GOTCHAS = ("U35", "U39")
IDS = ("tracker.wandb-run", "tb.logdir")
TEXT_MAX, FINDINGS_MAX = 1000, 8
_RECORD = {"looks": int, "done": (bool, NONE), "window_s": NUMBER + (NONE,), "findings": (list, NONE),
           "error": (str, NONE), "wandb": (str, NONE), "tb_writes": (list, NONE)}
_FINDING = {"id": str, "severity": str, "title": str, "evidence": (dict, NONE), "fix": (str, NONE),
            "gotcha": (str, NONE)}


def checked(doc, host: str):
    """The box's record once its shape is gpuops's (None stays None); BadAnswer otherwise."""
    if optional(doc, _RECORD, host, "tracker record") is None:
        return None
    for f in doc.get("findings") or []:
        expect(f if isinstance(f, dict) else {}, _FINDING, host, "tracker finding")
        if f["id"] not in IDS or f["severity"] not in SEVERITIES or f.get("gotcha") not in GOTCHAS + (None,):
            raise BadAnswer(f"{host}: the box's tracker finding is not gpuops's: {f['id'][:40]!r}")
    return doc


def findings(doc):
    """The findings of a checked record (none for None), their words bounded."""
    out = []
    for f in ((doc or {}).get("findings") or [])[:FINDINGS_MAX]:
        evidence = dict((str(k)[:40], v if isinstance(v, (int, float, bool, NONE)) else str(v)[:TEXT_MAX])
                        for k, v in list((f.get("evidence") or {}).items())[:12])
        out.append(Finding(f["id"], f["severity"], f["title"][:TEXT_MAX], dict(evidence, seen_by="supervisor"),
                           (f.get("fix") or "")[:TEXT_MAX] or None, f.get("gotcha")))
    return out


def hint(doc):
    """The status row's word on it: "curves go nowhere: U35 (gpuops diagnose)", or None."""
    ids = sorted(set(f.gotcha for f in findings(doc) if f.severity in ("warn", "fail") and f.gotcha))
    return f"its curves go nowhere: {', '.join(ids)} (gpuops diagnose)" if ids else None
