"""Preflight: ship the probe in one exec, judge its facts here, build the envelope.

The box does the looking (gpuops/onbox/facts/probe.py, one round trip); the verdicts are pure functions
run locally (gpuops/checks), so thresholds and profiles never travel to the box.
"""

import re

from .. import checks, engines, errors, probecache
from ..checks.thresholds import merged
from ..envelope import envelope, step
from ..findings import any_failed, worst_first

NEXT_MAX = 4


# `DIR:SIZE` with SIZE like 500M, 20G, 1.5T or 200GiB (a bare number is GiB); a colon followed by
# anything else is part of the directory's name, unless it was meant as a size and is not one
# (`/tmp:abcG`, `/tmp:12x`: digits then letters, or letters ending in a unit), which is refused
# rather than checked as a directory of that name.
_SIZED = re.compile(r"^(.+):(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?$", re.I)
_MEANT_AS_SIZE = re.compile(r"^.+:([\d.]+\s*[A-Za-z]*|[A-Za-z]*[KMGT](?:i?B)?)$", re.I)
_GIB_PER = {"": 1.0, "K": 1.0 / 2**20, "M": 1.0 / 2**10, "G": 1.0, "T": 1024.0}


def sized_path(arg):
    """(directory, GiB it needs free or None) from a --path argument."""
    m = _SIZED.match(arg)
    if not m:
        bad = _MEANT_AS_SIZE.match(arg)
        if bad:
            raise errors.UsageError(f"--path {arg!r}: {bad.group(1)!r} is not a size; DIR:SIZE takes one like "
                                    "500M, 20G, 1.5T or 200GiB")
        return arg, None
    return m.group(1), float(m.group(2)) * _GIB_PER[m.group(3).upper()]


def profile_inputs(name):
    """(threshold overrides, [(role, directory)], {directory: inode cap}, the logdir the platform's
    TensorBoard reads or None) from profile `name`."""
    if not name:
        return {}, [], {}, None
    from .. import profiles

    prof = profiles.load(name)
    entries = prof.preflight_paths()
    caps = {e["path"]: e["inode_cap"] for e in entries if e.get("inode_cap")}
    logdir = prof.absolute(prof.paths.tensorboard_logdir) if prof.paths.tensorboard_logdir else None
    return dict(prof.preflight), [(e["role"], e["path"]) for e in entries], caps, logdir


def summarize(findings):
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("fail", "warn", "info", "ok")}
    tally = f"{counts['fail']} failed, {counts['warn']} warnings, {counts['ok']} ok"
    worst = [f.title for f in findings if f.severity == "fail"] or [f.title for f in findings if f.severity == "warn"]
    if not worst:
        return f"box looks ready: {tally}"
    head = worst[0] + (f" (+{len(worst) - 1} more)" if len(worst) > 1 else "")
    return f"{'NOT READY' if counts['fail'] else 'usable'}: {head}; {tally}"


# A fix that is not made on this box: another box is the remedy (hardware a tenant cannot repair,
# no GPU at all), so preflighting this one again would only say the same.
_ELSEWHERE = re.compile(r"\b(re-rent|rent another box|rent an instance|preflight --host BOX)\b")


def elsewhere(finding) -> bool:
    return bool(finding.fix and _ELSEWHERE.search(finding.fix))


def next_steps(findings, host, profile, paths, dirs_named):
    """(next, advice): the fixes of what failed or warned, as advice (they are prose, often for a
    person on the box), and preflight again once something needs fixing, with the same arguments;
    not when a failure's fix is another box."""
    advice = []
    for f in findings:
        if f.severity in ("fail", "warn") and f.fix and f.fix not in advice:
            advice.append(f.fix)
    advice = advice[:NEXT_MAX]
    nxt = []
    if any(f.severity == "fail" and elsewhere(f) for f in findings):
        return nxt, advice
    if advice:
        again = ["gpuops", "preflight", "--host", host or "local"] + (["--profile", profile] if profile else [])
        for p in paths:
            again += ["--path", p]
        nxt.append(step(*again, why="again, after fixing"))
    elif not dirs_named:
        advice.append("Name the directories the run writes to (--path DIR, or DIR:SIZE for one that needs SIZE "
                      "free) so their free space and inodes are checked too.")
    return nxt, advice


def _engines(target, facts, data, timeout_s):
    """What each job engine the probe saw on the host (a Ray head's GCS ...) says of its cluster:
    one more round trip, only there; an engine that cannot be asked is its finding, never the end
    of the report."""
    from .jobs import payload

    found = []
    for engine in engines.each():
        if not engine.present(facts):
            continue
        try:
            doc = target.run_onbox("engine_facts", ["facts"], stdin=payload({"engine": engine.name}),
                                   timeout_s=timeout_s)
            cluster = {"error": doc["error"]} if doc.get("error") else doc.get("facts")
        except errors.HostError as e:
            cluster = {"error": e.as_dict()}
        data.setdefault("engines", {})[engine.name] = cluster
        found += engine.preflight(facts, cluster)
    return found


def preflight(target, profile=None, paths=(), timeout_s=60.0, qualify=False):
    """`paths` are --path arguments: a directory, or `DIR:SIZE` for one that needs SIZE free;
    `qualify` measures the box against its datasheet too (gpuops.ops.qualify)."""
    overrides, profile_dirs, inode_caps, tb_logdir = profile_inputs(profile)
    thresholds = merged(overrides)
    sized = [sized_path(p) for p in paths]
    floors = {d: gib for d, gib in sized if gib is not None}
    args = []
    for role, d in profile_dirs:
        args += ["--role-path", f"{role}={d}"]
    profiled = {d for _, d in profile_dirs}
    for d in dict.fromkeys(d for d, _ in sized if d not in profiled or d in floors):
        args += ["--path", d]
    all_paths = [d for _, d in profile_dirs] + [d for d, _ in sized]
    if tb_logdir:
        args += ["--tb-logdir", tb_logdir]
    host = getattr(target, "name", None) or "local"
    kept = probecache.known(host)
    if kept:
        args += ["--torch-known", kept["key"]]
    facts = target.run_onbox("probe", args, timeout_s=timeout_s)
    if isinstance(facts, dict) and "torch" in facts:
        facts["torch"] = probecache.merged(host, facts["torch"], kept)
    if inode_caps:
        facts["inode_caps"] = inode_caps  # the platform's quota, which statvfs may not show
    if floors:
        facts["path_floors"] = floors
    findings = checks.evaluate(facts, thresholds)
    data = dict(facts, thresholds=thresholds, profile=profile)
    findings = worst_first(findings + _engines(target, facts, data, timeout_s))
    if qualify:
        from .qualify import qualify as measure

        data["qualify"], measured = measure(target, facts, host)
        findings = worst_first(findings + measured)
    nxt, advice = next_steps(findings, getattr(target, "name", None), profile, list(paths), bool(all_paths))
    return envelope("preflight", ok=not any_failed(findings), summary=summarize(findings), data=data,
                    findings=findings, next=nxt, advice=advice)
