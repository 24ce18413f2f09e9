"""Pure comparisons: gpuops' GPU facts against a reference document, field by field, and gpuops'
own GPU verdicts computed on both. Nothing here runs a tool.

Each row says how its field is compared. Identity and configuration (name, uuid, bus id, limits,
error counters) must be equal; readings that move between two reads a second apart (memory in use,
temperature) must agree within a tolerance; instantaneous readings that swing within milliseconds
(utilisation, SM clock, power draw) are shown but not judged. A value the reference does not
report is "unconfirmed"; one the reference reports and gpuops lacks is a mismatch: gpuops missed
something the driver can tell.
"""

from gpuops.checks import gpu as gpu_checks
from gpuops.checks.thresholds import merged
from gpuops.onbox.host import busid

MATCH, MISMATCH, UNCONFIRMED, SHOWN, NEITHER = "match", "MISMATCH", "unconfirmed", "shown", "neither has it"
JUDGED_REASONS = gpu_checks.HW_SLOWDOWN | gpu_checks.SW_THERMAL | gpu_checks.HW_THERMAL | gpu_checks.HW_POWER_BRAKE

# (key, rule, tolerance). Rules: exact, bus, abs (|a-b| <= tol), mib (|a-b| <= max(tol, 2%)), mask, shown.
DEVICE_FIELDS = (
    ("name", "exact", None), ("uuid", "exact", None), ("bus_id", "bus", None), ("minor", "exact", None),
    ("memory_total_mib", "abs", 1.0), ("memory_used_mib", "mib", 256.0), ("temp_c", "abs", 3.0),
    ("slowdown_temp_c", "exact", None), ("sm_clock_max_mhz", "exact", None), ("power_limit_w", "abs", 1.0),
    ("throttle_mask", "mask", None), ("ecc_dbe_volatile", "exact", None), ("retired_pages_dbe", "exact", None),
    ("retired_pages_pending", "exact", None), ("remap_failure", "exact", None), ("remap_pending", "exact", None),
    ("util_pct", "shown", None), ("sm_clock_mhz", "shown", None), ("power_w", "shown", None),
)
DOC_FIELDS = (("driver", "exact", None), ("cuda_max", "exact", None))


def _same_number(a, b):
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return a == b


def judge(rule, tol, ours, theirs):
    """One field's verdict."""
    if rule == "shown":
        return SHOWN
    if ours is None and theirs is None:
        return NEITHER
    if theirs is None:
        return UNCONFIRMED
    if ours is None:
        return MISMATCH
    if rule == "bus":
        ok = busid.key(ours) == busid.key(theirs)
    elif rule == "abs":
        ok = abs(float(ours) - float(theirs)) <= tol
    elif rule == "mib":
        ok = abs(float(ours) - float(theirs)) <= max(tol, 0.02 * max(float(ours), float(theirs)))
    elif rule == "mask":
        ok = (int(ours) & JUDGED_REASONS) == (int(theirs) & JUDGED_REASONS)
    elif isinstance(ours, (int, float)) and not isinstance(ours, bool):
        ok = _same_number(ours, theirs)
    else:
        ok = ours == theirs
    return MATCH if ok else MISMATCH


def _row(scope, key, rule, tol, ours, theirs):
    return {"scope": scope, "field": key, "rule": rule if tol is None else "%s %g" % (rule, tol),
            "gpuops": ours, "reference": theirs, "verdict": judge(rule, tol, ours, theirs)}


def by_bus(devices):
    return dict((busid.key(d.get("bus_id")), d) for d in devices if busid.key(d.get("bus_id")))


def devices(ours, theirs, extra_fields=()):
    """Rows for two GPU documents: the document-wide fields, then each GPU's, matched by bus id; a GPU
    one side has and the other lacks is a row of its own."""
    rows = [_row("box", k, rule, tol, ours.get(k), theirs.get(k)) for k, rule, tol in DOC_FIELDS]
    a, b = by_bus(ours.get("devices") or []), by_bus(theirs.get("devices") or [])
    for bus in sorted(set(a) | set(b)):
        if bus not in a or bus not in b:
            rows.append({"scope": bus, "field": "present", "rule": "exact", "gpuops": bus in a,
                         "reference": bus in b, "verdict": MISMATCH})
            continue
        scope = "GPU %s (%s)" % (b[bus].get("index"), bus)
        for k, rule, tol in DEVICE_FIELDS + tuple(extra_fields):
            rows.append(_row(scope, k, rule, tol, a[bus].get(k), b[bus].get(k)))
    return rows


def processes(ours, theirs, tol_mib=16.0):
    """Rows for the compute processes: the same (pid, GPU) pairs on both sides, each with the same
    memory within tol_mib."""
    def index(doc):
        return dict(((p.get("pid"), busid.key(p.get("bus_id"))), p) for p in doc.get("processes") or [])

    a, b = index(ours), index(theirs)
    rows = []
    for pid, bus in sorted(set(a) | set(b), key=lambda k: (str(k[1]), k[0] or 0)):
        scope = "pid %s on %s" % (pid, bus)
        if (pid, bus) not in a or (pid, bus) not in b:
            rows.append({"scope": scope, "field": "listed", "rule": "exact", "gpuops": (pid, bus) in a,
                         "reference": (pid, bus) in b, "verdict": MISMATCH})
            continue
        rows.append(_row(scope, "used_mib", "abs", tol_mib, a[(pid, bus)].get("used_mib"),
                         b[(pid, bus)].get("used_mib")))
    return rows


def verdicts(facts, reference_gpu, thresholds=None):
    """gpuops' GPU checks run on the facts as gpuops gathered them and again with the GPU section
    replaced by the reference's: {check id: (ours, theirs)} with each side's worst severity and
    titles, and a verdict row per check."""
    t = thresholds or merged()
    ref_facts = dict(facts)
    ref_gpu = dict(facts.get("gpu") or {})
    ref_gpu.update({k: reference_gpu.get(k) for k in ("driver", "cuda_max", "devices", "processes")})
    ref_facts["gpu"] = ref_gpu
    rows = []
    for check in gpu_checks.CHECKS:
        ours, theirs = check(facts, t), check(ref_facts, t)
        a, b = _summary(ours), _summary(theirs)
        ids = sorted(set(a) | set(b))
        for fid in ids:
            sa, sb = a.get(fid), b.get(fid)
            rows.append({"scope": "verdict", "field": fid, "rule": "same severity",
                         "gpuops": sa, "reference": sb,
                         "verdict": MATCH if (sa or {}).get("severity") == (sb or {}).get("severity") else MISMATCH})
    return rows


def _summary(findings):
    out = {}
    for f in findings:
        worst = out.get(f.id)
        if worst is None or _rank(f.severity) > _rank(worst["severity"]):
            out[f.id] = {"severity": f.severity, "title": f.title}
    return out


def _rank(severity):
    return ("ok", "info", "warn", "fail").index(severity)


def failures(rows):
    return [r for r in rows if r["verdict"] == MISMATCH]
