"""Reap: ship the on-box reaper, turn its plan and outcomes into an envelope, render the plan.

The box does the judging and the signalling in one exec (gpuops.onbox.reap), because a plan
carried back and forth over SSH would be stale by the time it came back; this side only words
the result, sets the exit code and says what to do next.
"""

from .. import errors
from ..envelope import envelope
from ..findings import Finding, worst_first

REAPABLE = ("defunct", "orphan", "finished-job", "idle")
FAILED_OUTCOMES = ("stuck", "remains", "not-permitted")
# GPU memory in use that no process here accounts for, above the driver's own few hundred MiB.
UNATTRIBUTED_MIB = 1024
_KILL_WAIT_S, _RELEASE_WAIT_S, _SLACK_S = 5, 10, 60


def reap(target, gpu=None, min_age=600, idle_window=10, term_wait=10, yes=False):
    args = ["--min-age", min_age, "--idle-window", idle_window, "--term-wait", term_wait,
            "--kill-wait", _KILL_WAIT_S, "--release-wait", _RELEASE_WAIT_S]
    if gpu is not None:
        args += ["--gpu", gpu]
    if yes:
        args.append("--yes")
    timeout_s = idle_window + term_wait + _KILL_WAIT_S + _RELEASE_WAIT_S + _SLACK_S
    facts = target.run_onbox("reap", args, timeout_s=timeout_s)
    rerun = ["gpuops", "reap", "--host", target.name]
    if gpu is not None:
        rerun += ["--gpu", str(gpu)]
    if min_age != 600:
        rerun += ["--min-age", str(min_age)]
    if idle_window != 10:
        rerun += ["--idle-window", str(idle_window)]
    return build(facts, rerun=" ".join(rerun) + " --yes")


def _count_by_class(holders):
    counts = {}
    for h in holders:
        counts[h["class"]] = counts.get(h["class"], 0) + 1
    return ", ".join("%s %d" % (c, counts[c]) for c in REAPABLE + ("live", "protected") if c in counts)


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
                "GPU %s has %d MiB in use but no process here holds its device" % (g["index"], used - known),
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
    hint, nexts = errors.OK, []
    if not holders:
        summary = "no process holds an NVIDIA device" + (" on GPU %s" % facts["gpu"] if facts["gpu"] is not None else "")
    elif not targets:
        summary = "%d GPU holder(s), none to reap (%s)" % (len(holders), _count_by_class(holders))
    elif not facts["applied"]:
        hint = errors.REFUSED
        summary = "%d of %d GPU holder(s) can be reaped (%s); dry run, nothing was signalled" % (
            len(targets), len(holders), _count_by_class(targets))
        nexts.append(rerun)
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
                   next=nexts)
    if hint != errors.OK:
        doc["exit_code_hint"] = hint
    return doc


def _age(seconds):
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 120:
        return "%ds" % s
    if s < 7200:
        return "%dm" % (s // 60)
    if s < 172800:
        return "%dh%02dm" % (s // 3600, s % 3600 // 60)
    return "%dd" % (s // 86400)


_CLASS_STYLE = {"defunct": "bold yellow", "orphan": "bold yellow", "finished-job": "bold yellow",
                "idle": "bold yellow", "live": "green", "protected": "dim"}


def _mem(h):
    values = [v for v in h["gpu_mem_mib"].values() if v is not None]
    return "%d" % sum(values) if values else "-"


def plan_table(facts, title):
    from rich.markup import escape
    from rich.table import Table

    applied = facts["applied"]
    table = Table(title=title, expand=False)
    for name in ("pid", "user", "age", "gpu", "MiB", "class", "reason", "outcome" if applied else "would send",
                 "command"):
        table.add_column(name, no_wrap=name in ("pid", "user", "age", "gpu", "MiB", "class"))
    order = dict((c, i) for i, c in enumerate(REAPABLE + ("live", "protected")))
    for h in sorted(facts["holders"], key=lambda h: (order.get(h["class"], 9), h["pid"])):
        doing = (h["outcome"] if applied else h["action"]) or "-"
        style = _CLASS_STYLE.get(h["class"], "")
        table.add_row(str(h["pid"]), h["user"] or "?", _age(h["age_s"]), ",".join(str(g) for g in h["gpus"]) or "-",
                      _mem(h), "[%s]%s[/]" % (style, h["class"]), escape(h["reason"]), escape(doing),
                      escape(h["command"][:80]))
    return table


def gpu_table(facts):
    from rich.table import Table

    table = Table(title="GPU memory", expand=False)
    for name in ("gpu", "util peak %", "used MiB", "by listed procs", "after MiB", "freed MiB"):
        table.add_column(name, justify="right")
    for g in facts["gpus"]:
        cells = [g["index"], g["util_peak_pct"], g["memory_used_mib"], g["attributed_mib"], g["memory_after_mib"],
                 g["freed_mib"]]
        table.add_row(*("-" if v is None else "%g" % v for v in cells))
    return table


def render(doc, con):
    from ..render import findings_table, summary_line

    facts = doc["data"]
    host = doc.get("host") or ""
    if facts["holders"]:
        con.print(plan_table(facts, title=("reap %s" if facts["applied"] else "reap plan (dry run) %s") % host))
    if facts["actions"]:
        from rich.table import Table

        acts = Table(title="signals", expand=False)
        for name in ("pid", "scope", "signals", "outcome"):
            acts.add_column(name)
        for a in facts["actions"]:
            acts.add_row(str(a["pid"]), a["scope"], "; ".join(a["signals"]), a["outcome"] + (
                ": " + a["why"] if a.get("why") else ""), style=None if a["outcome"] in ("reaped", "gone") else "red")
        con.print(acts)
    if facts["gpus"]:
        con.print(gpu_table(facts))
    if doc["findings"]:
        con.print(findings_table(doc["findings"]))
    summary_line(doc, con)
