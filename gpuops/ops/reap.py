"""Reap: ship the on-box reaper, turn its plan and outcomes into an envelope, render the plan.

The box does the judging and the signalling in one exec (gpuops.onbox.reaper.reap), because a plan
carried back and forth over SSH would be stale by the time it came back; this side only words
the result, sets the exit code and says what to do next.
"""

import time

from .. import errors, shapes
from ..boundary import expect
from ..envelope import CODE_KEY, envelope, step
from ..findings import Finding, worst_first
from ..onbox.host import plans
from ..onbox.reaper.reap_rules import CLASSES

FAILED_OUTCOMES = ("stuck", "remains", "not-permitted")
# GPU memory in use that no process here accounts for, above the driver's own few hundred MiB.
UNATTRIBUTED_MIB = 1024
_KILL_WAIT_S, _RELEASE_WAIT_S, _SLACK_S = 5, 10, 60


def reap(target, gpu=None, min_age=600, idle_window=10, term_wait=10, yes=False, plan=None):
    """With `plan` (the plan_id of a dry run), reap only if the box's reapable set is still that
    plan's; else signal nothing and refuse (exit 5) with the new plan."""
    args = ["--min-age", min_age, "--idle-window", idle_window, "--term-wait", term_wait,
            "--kill-wait", _KILL_WAIT_S, "--release-wait", _RELEASE_WAIT_S]
    if plan is not None and plans.expiry(plan) is None:
        raise errors.UsageError(f"--plan {plan!r} is not a plan id (a dry run of reap shows one)")
    stale = plan is not None and plans.expiry(plan) < time.time()
    if gpu is not None:
        args += ["--gpu", gpu]
    if yes and not stale:
        args += ["--yes"] + (["--plan", plan] if plan is not None else [])
    timeout_s = idle_window + term_wait + _KILL_WAIT_S + _RELEASE_WAIT_S + _SLACK_S
    facts = checked(target.run_onbox("reap", args, timeout_s=timeout_s), target.name)
    rerun = ["gpuops", "reap", "--host", target.name]
    if gpu is not None:
        rerun += ["--gpu", str(gpu)]
    if min_age != 600:
        rerun += ["--min-age", str(min_age)]
    if idle_window != 10:
        rerun += ["--idle-window", str(idle_window)]
    if term_wait != 10:
        rerun += ["--term-wait", str(term_wait)]
    doc = build(facts, rerun=rerun + ["--yes"])
    if stale or facts.get("plan_refused"):
        fresh = doc["data"].get("plan")
        message = (f"plan {plan} {'has expired' if stale else 'no longer matches the reapable holders'}; nothing "
                   "was signalled; " + (f"new plan {fresh['plan_id']}" if fresh else "nothing is reapable now"))
        doc.update(ok=False, summary=message, error={"kind": "refused", "message": message})
    return doc


_NUMBER = (int, float, type(None))
_HOLDER = {"pid": int, "class": str, "reason": str, "gpus": list, "gpu_mem_mib": dict, "user": (str, type(None)),
           "age_s": _NUMBER, "command": str, "action": (str, type(None)), "outcome": (str, type(None)),
           "last_activity": str}
_ACTION = {"pid": int, "outcome": str, "signals": list, "scope": str}
_GPU = {"index": int, "holders": list, "memory_used_mib": _NUMBER, "attributed_mib": _NUMBER,
        "util_peak_pct": _NUMBER, "memory_after_mib": _NUMBER, "freed_mib": _NUMBER}


def checked(facts, host: str):
    """The reaper's answer once its shape is the one gpuops' on-box reaper writes."""
    shapes.checked("reap", facts, host)
    for pair in facts.get("plan_targets") or []:
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(n) is int for n in pair)):
            raise errors.BadAnswer(f"{host}: the box's reap answer is not gpuops's: plan target {pair!r}")
    for items, fields, what in ((facts["holders"], _HOLDER, "holder"), (facts["actions"], _ACTION, "action"),
                                (facts["gpus"], _GPU, "GPU row")):
        for item in items:
            expect(item if isinstance(item, dict) else {}, fields, host, f"reap {what}")
    return facts


def _count_by_class(holders):
    counts = {}
    for h in holders:
        counts[h["class"]] = counts.get(h["class"], 0) + 1
    return ", ".join("%s %d" % (c, counts[c]) for c in CLASSES if c in counts)


def findings_for(facts):
    out = []
    gpus_of = dict((h["pid"], h["gpus"]) for h in facts["holders"])
    for a in facts["actions"]:
        ev = {"pid": a["pid"], "gpus": gpus_of.get(a["pid"]), "signals": "; ".join(a["signals"])}
        if a["outcome"] == "stuck":
            gpu_list = ",".join(str(g) for g in gpus_of.get(a["pid"]) or []) or "N"
            out.append(Finding("reap.stuck", "fail", "pid %d is stuck in the driver (state D) and cannot be killed"
                               % a["pid"], ev, fix="reset the GPU once nothing else uses it (nvidia-smi -r -i %s, "
                               "as root) or reboot / re-rent the box" % gpu_list))
        elif a["outcome"] in ("remains", "not-permitted"):
            out.append(Finding("reap.remains", "fail", "pid %d survived the reap (%s)" % (a["pid"], a["outcome"]), ev,
                               fix="look at it by hand: ps -o pid,stat,wchan:30,cmd -p %d" % a["pid"]))
        elif a["outcome"] == "pid-reused":
            out.append(Finding("reap.pid-reused", "info", "pid %d exited and was reused before it was signalled; "
                               "the new process was left alone" % a["pid"], ev))
    for g in facts["gpus"]:
        used, known = g.get("memory_used_mib"), g.get("attributed_mib") or 0
        if used is not None and not g["holders"] and used - known > UNATTRIBUTED_MIB:
            out.append(Finding(
                "reap.unattributed-memory", "warn",
                "GPU %s: %d MiB held by no process here" % (g["index"], used - known),
                {"gpu": g["index"], "memory_used_mib": used, "nested_pid_namespace": facts["nested_pid_namespace"]},
                fix="a process outside this PID namespace (the host, a dead container) holds it: restart the "
                    "container or ask the provider for a GPU reset", gotcha="U11"))
    if facts.get("gpu_error"):
        out.append(Finding("reap.no-gpu-reading", "warn", "GPU utilisation could not be read, so no holder is "
                           "provably idle; only finished-job and defunct holders can be reaped",
                           {"error": facts["gpu_error"]}, fix="check that nvidia-smi works on the box"))
    if facts.get("unreadable"):
        title, fix = "%d process(es)' open files could not be read" % facts["unreadable"], None
        if facts.get("uid") == 0:
            title += " (they exited during the scan, or a user namespace hides them even from root)"
        else:
            fix = "run as root to see every holder (other users' holders are never reaped)"
        out.append(Finding("reap.unreadable-fds", "info", title, {"unreadable": facts["unreadable"]}, fix=fix))
    if facts.get("nvml_unverified"):
        pids = [u["pid"] for u in facts["nvml_unverified"]]
        out.append(Finding("reap.nvml-unverified", "info", "NVML names %d process(es) that could not be matched to a "
                           "holder here; they were reported, never signalled" % len(pids),
                           {"pids": pids, "why": facts["nvml_unverified"][0]["why"]}))
    return out


def build(facts, rerun):
    holders = facts["holders"]
    targets = [h for h in holders if h.get("action")]
    findings = findings_for(facts)
    hint, nexts, advice = errors.OK, [], []
    unheld = [f for f in findings if f.id == "reap.unattributed-memory"]
    if not holders and unheld:
        mib = sum(f.evidence["memory_used_mib"] for f in unheld)
        summary = "%d MiB on GPU %s held by a process outside this container; nothing here to reap" % (
            mib, ", ".join(str(f.evidence["gpu"]) for f in unheld))
        advice.append(unheld[0].fix)
    elif not holders:
        summary = "no process holds an NVIDIA device" + (" on GPU %s" % facts["gpu"] if facts["gpu"] is not None else "")
    elif not targets:
        summary = "%d GPU holder(s), none to reap (%s)" % (len(holders), _count_by_class(holders))
    elif not facts["applied"]:
        hint = errors.REFUSED
        summary = "%d of %d GPU holder(s) can be reaped (%s); dry run, nothing was signalled" % (
            len(targets), len(holders), _count_by_class(targets))
        if facts.get("plan_targets") is not None:
            expires = plans.expires_at()
            facts["plan"] = {"plan_id": plans.plan_id("reap", facts["gpu"], facts["plan_targets"], expires),
                             "expires_at": expires, "pids": [t["pid"] for t in targets]}
            rerun = rerun + ["--plan", facts["plan"]["plan_id"]]
        nexts.append(step(*rerun, why="reaps exactly the holders listed, or refuses if they changed"))
    else:
        actions = facts["actions"]
        failed = [a for a in actions if a["outcome"] in FAILED_OUTCOMES]
        freed = sum(g.get("freed_mib") or 0 for g in facts["gpus"])
        summary = "reaped %d of %d process(es)" % (len(actions) - len(failed), len(actions))
        summary += "; freed %d MiB" % freed if facts["gpus"] else ""
        if failed:
            hint = errors.CHECK_FAILED
            summary += "; %d remain (%s)" % (len(failed), ", ".join("%d %s" % (a["pid"], a["outcome"]) for a in failed))
    doc = envelope("reap", ok=hint == errors.OK, summary=summary, data=facts, findings=worst_first(findings),
                   next=nexts, advice=advice)
    if hint != errors.OK:
        doc[CODE_KEY] = hint
    return doc
