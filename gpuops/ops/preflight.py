"""Preflight: ship the probe in one exec, judge its facts here, build the envelope.

The box does the looking (gpuops/onbox/probe.py, one round trip); the verdicts are pure functions
run locally (gpuops/checks), so thresholds and profiles never travel to the box.
"""

from .. import checks
from ..checks.thresholds import merged
from ..envelope import envelope
from ..findings import any_failed

NEXT_MAX = 4


def profile_inputs(name):
    """(threshold overrides, directories, {directory: inode cap}) from profile `name`."""
    if not name:
        return {}, [], {}
    from .. import profiles

    prof = profiles.load(name)
    entries = prof.preflight_paths()
    caps = {e["path"]: e["inode_cap"] for e in entries if e.get("inode_cap")}
    return dict(prof.preflight), [e["path"] for e in entries], caps


def summarize(findings):
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("fail", "warn", "info", "ok")}
    tally = f"{counts['fail']} failed, {counts['warn']} warnings, {counts['ok']} ok"
    worst = [f.title for f in findings if f.severity == "fail"] or [f.title for f in findings if f.severity == "warn"]
    if not worst:
        return f"box looks ready: {tally}"
    head = worst[0] + (f" (+{len(worst) - 1} more)" if len(worst) > 1 else "")
    return f"{'NOT READY' if counts['fail'] else 'usable'}: {head}; {tally}"


def next_steps(findings, host, paths):
    steps = []
    for f in findings:
        if f.severity in ("fail", "warn") and f.fix and f.fix not in steps:
            steps.append(f.fix)
    steps = steps[:NEXT_MAX]
    where = "" if host in (None, "local") else f" --host {host}"
    if steps:
        steps.append(f"gpuops preflight{where}   # again, after fixing")
    elif not paths:
        steps.append(f"gpuops preflight{where} --path <data dir> --path <checkpoint dir>   # check where the run writes")
    return steps


def preflight(target, profile=None, paths=(), timeout_s=60.0):
    overrides, profile_dirs, inode_caps = profile_inputs(profile)
    thresholds = merged(overrides)
    all_paths = list(dict.fromkeys(list(profile_dirs) + list(paths)))
    args = []
    for p in all_paths:
        args += ["--path", p]
    facts = target.run_onbox("probe", args, timeout_s=timeout_s)
    if inode_caps:
        facts["inode_caps"] = inode_caps  # the platform's quota, which statvfs may not show
    findings = checks.evaluate(facts, thresholds)
    data = dict(facts, thresholds=thresholds, profile=profile)
    return envelope("preflight", ok=not any_failed(findings), summary=summarize(findings), data=data,
                    findings=findings, next=next_steps(findings, getattr(target, "name", None), all_paths))
