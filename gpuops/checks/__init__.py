"""Pure rules from a probe's facts to findings. No I/O here: every check is tested on fact documents.

Each module exposes CHECKS, a tuple of `check(facts, thresholds) -> [Finding]`. A check emits an
`ok` finding when it could judge and found nothing wrong, and nothing when the facts it needs are
absent (another finding says why they are absent). Thresholds come from `thresholds.merged()`.
"""

from ..findings import Finding, worst_first
from . import box, cpu, disk, gpu, kernlog, link, memory, software
from ..onbox.track import verdicts
from .thresholds import merged

ALL = (gpu.CHECKS + link.CHECKS + kernlog.CHECKS + memory.CHECKS + cpu.CHECKS + disk.CHECKS + software.CHECKS + box.CHECKS
       + verdicts.CHECKS)


def evaluate(facts, thresholds=None):
    """Every finding for one host's facts, worst first."""
    t = thresholds if thresholds is not None else merged()
    findings = []
    for check in ALL:
        try:
            findings.extend(check(facts, t))
        except Exception as e:  # facts from an odd box must not cost the other verdicts
            findings.append(Finding("check.crashed", "warn", f"check {check.__module__}.{check.__name__} could not "
                                    "judge these facts", {"error": f"{type(e).__name__}: {e}"[:200]},
                                    "gpuops preflight --json   # report this with the facts it prints"))
    return worst_first(findings)
