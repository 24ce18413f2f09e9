"""reap for people, doctor-style: the verdict, one block per GPU holder (the reapable first), the
signals sent, GPU memory before and after, the verdict again. A ten-column table of sentences
wrapped a word per line at 80 columns; a block gives each fact its own line at any width."""

from ..onbox.reaper.reap_rules import CLASSES
from ..units import duration
from . import cut, doctor, hanging

_CLASS_STYLE = {"defunct": "bold yellow", "orphan": "bold yellow", "finished-job": "bold yellow",
                "idle": "bold yellow", "live": "green", "protected": "dim"}


def _mem(h):
    """'  2048 MiB' as NVML accounts the holder's memory; nothing when it does not."""
    values = [v for v in h["gpu_mem_mib"].values() if v is not None]
    return "  %d MiB" % sum(values) if values else ""


# Holders reap leaves alone: one line each unless --verbose, so the ones it would signal stand out.
_KEPT = ("live", "protected")


def holder_block(h, applied, full=True):
    """One holder: pid, class, GPUs, memory, age and user on its head line; then why, what the
    window saw and what it would get (or got), each wrapped under itself, and its command cut at
    the width. Not `full`: the head line and the command on one line, cut at the width."""
    from rich.console import Group
    from rich.text import Text

    gpus = ",".join(str(g) for g in h["gpus"]) or "-"
    age = duration(h["age_s"]) if h["age_s"] is not None else "?"
    head = Text.assemble((f"pid {h['pid']}", "bold"), "  ", (h["class"], _CLASS_STYLE.get(h["class"], "")),
                         f"  GPU {gpus}{_mem(h)}  up {age}  {h['user'] or '?'}")
    if not full:
        head.append(f"  {h['command']}", style="dim")
        return cut(head)
    doing = h["outcome"] if applied else h["action"]
    rows = [("why", h["reason"]), ("seen", h["last_activity"]), ("outcome" if applied else "would send", doing)]
    lines = [hanging(Text(f"    {k}: "), Text(v)) for k, v in rows if v]
    return Group(head, *lines, Text(f"    command: {h['command']}", no_wrap=True, overflow="ellipsis"))


def action_line(a):
    from rich.text import Text

    outcome = a["outcome"] + (f": {a['why']}" if a.get("why") else "")
    return Text(f"  pid {a['pid']} ({a['scope']}): {'; '.join(a['signals'])} -> {outcome}",
                style=None if a["outcome"] in ("reaped", "gone") else "red")


def gpu_table(facts):
    """GPU memory before and after, as a borderless table (a header row, a row per GPU)."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold", expand=False)
    for name in ("GPU", "UTIL PEAK %", "USED MiB", "BY LISTED PROCS", "AFTER MiB", "FREED MiB"):
        table.add_column(name, justify="right")
    for g in facts["gpus"]:
        cells = [g["index"], g["util_peak_pct"], g["memory_used_mib"], g["attributed_mib"], g["memory_after_mib"],
                 g["freed_mib"]]
        table.add_row(*("-" if v is None else "%g" % v for v in cells))
    return table


def render(doc, con, show_all=False, verbose: bool = False) -> None:
    from rich.console import Group
    from rich.text import Text

    facts = doc["data"]
    order = dict((c, i) for i, c in enumerate(CLASSES))
    holders = sorted(facts["holders"], key=lambda h: (order.get(h["class"], 9), h["pid"]))
    blocks = [holder_block(h, facts["applied"], verbose or show_all or h["class"] not in _KEPT) for h in holders]
    if facts["actions"]:
        blocks.append(Group(Text("signals", style="bold"), *(action_line(a) for a in facts["actions"])))
    if facts["gpus"]:
        blocks.append(gpu_table(facts))
    doctor(doc, con, blocks, show_all, verbose)
