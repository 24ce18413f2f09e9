"""reap for people: the plan (or what was done), the signals sent, GPU memory before and after."""

from ..onbox.reap_rules import CLASSES
from ..units import duration
from . import doctor


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
    for name in ("pid", "user", "age", "gpu", "MiB", "class", "reason", "last activity",
                 "outcome" if applied else "would send", "command"):
        table.add_column(name, no_wrap=name in ("pid", "user", "age", "gpu", "MiB", "class"))
    order = dict((c, i) for i, c in enumerate(CLASSES))
    for h in sorted(facts["holders"], key=lambda h: (order.get(h["class"], 9), h["pid"])):
        doing = (h["outcome"] if applied else h["action"]) or "-"
        style = _CLASS_STYLE.get(h["class"], "")
        table.add_row(str(h["pid"]), h["user"] or "?", duration(h["age_s"]) if h["age_s"] is not None else "?", ",".join(str(g) for g in h["gpus"]) or "-",
                      _mem(h), "[%s]%s[/]" % (style, h["class"]), escape(h["reason"]), escape(h["last_activity"]),
                      escape(doing),
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


def render(doc, con, show_all=False):
    facts = doc["data"]
    host = doc.get("host") or ""
    blocks = []
    if facts["holders"]:
        blocks.append(plan_table(facts, title=("reap %s" if facts["applied"] else "reap plan (dry run) %s") % host))
    if facts["actions"]:
        from rich.table import Table

        acts = Table(title="signals", expand=False)
        for name in ("pid", "scope", "signals", "outcome"):
            acts.add_column(name)
        for a in facts["actions"]:
            acts.add_row(str(a["pid"]), a["scope"], "; ".join(a["signals"]), a["outcome"] + (
                ": " + a["why"] if a.get("why") else ""), style=None if a["outcome"] in ("reaped", "gone") else "red")
        blocks.append(acts)
    if facts["gpus"]:
        blocks.append(gpu_table(facts))
    doctor(doc, con, blocks, show_all)
