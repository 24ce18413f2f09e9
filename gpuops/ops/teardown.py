"""teardown-check: before giving a box back, what will the platform's verb delete, and is
everything you want to keep either safe on a surviving tier or pulled and verified locally?

Local only: it reads the profile and the pull index (gpuops.pullindex), never the box. A kept
path counts as pulled only when a recorded pull covers it, that pull's manifest file still
exists, and every file the manifest lists under the path is still on disk with its size.
"""

import json
import os
import posixpath
from typing import Optional, Sequence

from .. import profiles as P
from .. import pullindex
from ..envelope import envelope
from ..errors import UsageError
from ..findings import Finding, any_failed, worst_first


def verify_pull(entry: dict, keep: str):
    """(True, evidence) when the recorded pull `entry` still proves `keep` is safe locally, else (False, why)."""
    manifest_path = entry.get("manifest") or ""
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        return False, f"manifest {manifest_path or '(none recorded)'} is unreadable: {getattr(e, 'strerror', None) or e}"
    if not isinstance(manifest, dict) or manifest.get("schema") != 1 or not isinstance(manifest.get("files"), list):
        return False, f"manifest {manifest_path} is not a schema-1 pull manifest"
    local_root = manifest.get("local") or entry.get("local") or ""
    rel = posixpath.relpath(posixpath.normpath(keep), posixpath.normpath(entry.get("remote", "/")))
    wanted = [item for item in manifest["files"] if isinstance(item, dict)
              and (rel == "." or item.get("path") == rel or str(item.get("path", "")).startswith(rel + "/"))]
    if not wanted:
        return False, f"manifest {manifest_path} lists no files under {keep}"
    bad = []
    for item in wanted:
        local = os.path.join(local_root, item["path"])
        try:
            if os.path.getsize(local) != item.get("size"):
                bad.append(f"{item['path']} (size changed)")
        except OSError:
            bad.append(f"{item['path']} (missing)")
    if bad:
        return False, f"{len(bad)} of {len(wanted)} pulled files are gone or changed locally, e.g. {bad[0]}"
    return True, {"manifest": manifest_path, "local": local_root, "files": len(wanted),
                  "bytes": sum(int(f.get("size") or 0) for f in wanted),
                  "verified_at": manifest.get("verified_at") or entry.get("verified_at")}


def _keep_finding(profile, host: str, keep, verb):
    """(finding, record) for one kept path."""
    survives, reason = P.destination_survives(profile, keep, verb)
    tier = profile.tier_for(keep)
    record = {"path": keep, "tier": tier.name if tier else None, "survives": survives, "reason": reason}
    failures = []
    for entry in pullindex.find(host, keep):
        ok, detail = verify_pull(entry, keep)
        if ok:
            record.update(status="pulled", pull=detail)
            return Finding("teardown.pulled", "ok", f"{keep} is pulled and still verified locally",
                           evidence={**detail, "on_box": reason}), record
        failures.append(detail)
    record["pull_problems"] = failures[:3]
    if survives:
        record["status"] = "survives"
        return Finding("teardown.survives", "ok", f"{keep} stays on the box", evidence={"reason": reason}), record
    pull_cmd = f"gpuops pull --host {host} --src {keep} --dst LOCAL_DIR"
    if failures:
        record["status"] = "unverified"
        return Finding("teardown.unverified", "fail", f"{keep} would be lost: its recorded pull no longer checks out",
                       evidence={"reason": reason, "problem": failures[0]}, fix=pull_cmd, gotcha="U33"), record
    record["status"] = "lost"
    return Finding("teardown.lost", "fail", f"{keep} would be lost: no verified pull", evidence={"reason": reason},
                   fix=pull_cmd, gotcha=profile.billing.loss_gotcha or "U20"), record


def teardown_check(host: str, profile: str, keep: Optional[Sequence[str]] = (), verb: str = "stop") -> dict:
    """What giving `host` back with `verb` deletes under `profile`, and whether each path to `keep` is
    safe: on a tier that survives, or pulled and still verified here."""
    if not host or "," in host:
        raise UsageError("teardown-check needs exactly one --host (the name used when pulling)")
    if not profile:
        raise UsageError("teardown-check needs --profile: the platform decides what its verbs delete")
    if verb not in P.VERBS:
        raise UsageError(f"--verb must be one of {', '.join(P.VERBS)}")
    platform = P.load(profile)
    label = P.verb_label(platform, verb)
    lost = P.lost_tiers(platform, verb)
    findings = [Finding("teardown.deletes", "info", f"{label} deletes " + (", ".join(t.name for t in lost) or "nothing"),
                        evidence={t.name: t.path for t in lost}, gotcha=(platform.billing.loss_gotcha or None) if lost else None)]
    if platform.billing.still_bills:
        findings.append(Finding("teardown.still-bills", "warn", "still billed afterwards: " + platform.billing.still_bills,
                                gotcha=platform.billing.bills_gotcha or None))
    action = platform.billing.meter_stop_is if verb == "stop" else verb
    if action == "pause":
        for c in platform.clocks:
            findings.append(Finding("teardown.clock", "warn", f"{c.name}: {c.effect}",
                                    evidence={"trigger": c.trigger, "after_s": c.after_s}, gotcha=c.gotcha or None))
    records = []
    for given in keep or ():
        path = platform.absolute(given)
        if not path or not path.startswith("/"):
            raise UsageError(f"--keep {given!r}: give the absolute path on the box (profile {platform.name} has no home)")
        finding, record = _keep_finding(platform, host, path, verb)
        findings.append(finding)
        records.append(record)
    at_risk = [r["path"] for r in records if r["status"] in ("lost", "unverified")]
    if at_risk:
        summary = f"{len(at_risk)} of {len(records)} kept path(s) would be lost by {label}: {', '.join(at_risk)}"
    elif records:
        summary = f"all {len(records)} kept path(s) are safe from {label}"
    else:
        summary = f"{label} deletes {', '.join(t.name for t in lost) or 'nothing'}; name paths to keep with --keep"
    # A pull's local destination is the caller's choice, so it is advice, not a step to run.
    advice = [f"Pull {p} to this machine with gpuops pull (it verifies, and records the pull for this check) "
              f"before {label}." for p in at_risk]
    data = {"profile": platform.name, "verb": verb, "meter_stop_verb": platform.billing.meter_stop_verb,
            "deletes": [{"tier": t.name, "path": t.path} for t in lost], "still_bills": platform.billing.still_bills,
            "keeps": records}
    return envelope("teardown-check", ok=not any_failed(findings), summary=summary, host=host, data=data,
                    findings=worst_first(findings), advice=advice)
