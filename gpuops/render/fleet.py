"""The fleet view for people: one row per box, then the totals line; `watch` redraws it in place.
Pure `cells` builds the text of each row, so what a row says is tested without a terminal."""

import time

from ..units import duration, human_bytes
from . import render_errors, summary_line

COLUMNS = ("HOST", "GPUS", "VRAM USED / FREE", "UTIL", "JOBS", "DATA DIR", "FREE", "INODES FREE", "UPTIME",
           "IDLE SINCE", "IDLE $")
# Which columns stay on a narrow terminal (gpuops.render.columns): the box, what it has, and what
# its idle time costs come first; where its data lives and how long it has been up, last.
_PRIORITY = ("HOST", "GPUS", "IDLE $", "IDLE SINCE", "VRAM USED / FREE", "UTIL", "JOBS", "FREE", "INODES FREE",
             "DATA DIR", "UPTIME")
_LEAST = {"HOST": 12, "IDLE SINCE": 8, "DATA DIR": 10}
_MIB = 1 << 20


def _gpus(r):
    if not r["gpu_present"]:
        return "none"
    shown = ", ".join(f"{g['count']}x {g['model'].replace('NVIDIA ', '')}" for g in r["gpus"])
    if r["gpu_error"]:
        shown = (shown + " " if shown else "") + "(GPU reading failed)"
    return shown or "0"


def _mib(value):
    return human_bytes(value * _MIB) if value is not None else "?"


def _vram(r):
    if not r["gpu_count"]:
        return "-"
    return f"{_mib(r['vram_used_mib'])} / {_mib(r['vram_free_mib'])}"


def _util(r):
    if not r["gpu_count"]:
        return "-"
    if r["util_peak_pct"] is None:
        return "?"
    return f"{r['util_peak_pct']:.0f}%"


def _pct(free, total):
    return f"{100.0 * free / total:.0f}%" if free is not None and total else "?"


def _disk(d):
    """(data dir, free bytes, free inodes) cells."""
    # A data dir the run has not created yet is measured at its nearest existing parent.
    where = d["path"] + (f" (at {d['measured_at']})" if d.get("measured_at") else "")
    if d.get("error"):
        return [where, d["error"], "?"]
    return [where, f"{human_bytes(d['free_bytes'])} {_pct(d['free_bytes'], d['total_bytes'])}",
            _pct(d["free_inodes"], d["total_inodes"])]


def _since(r):
    idle = r["idle"]
    if idle["state"] != "idle":
        return idle["state"]
    stamp = time.strftime("%m-%d %H:%M UTC", time.gmtime(idle["since"]))
    return f"{duration(idle['idle_s'])} ({stamp})"


def _money(r):
    idle = r["idle"]
    if idle["state"] != "idle":
        return "-"
    return f"${idle['idle_usd']:.2f}" if idle["idle_usd"] is not None else "? (no price)"


def cells(r):
    """The row's texts in COLUMNS order; a box that did not answer has its error kind in the second
    cell (the message follows the table)."""
    if not r["ok"]:
        return [r["host"], (r["error"] or {}).get("kind", "error")] + [""] * (len(COLUMNS) - 2)
    return ([r["host"], _gpus(r), _vram(r), _util(r), str(r["jobs_running"])] + _disk(r["disk"])
            + [duration(r["uptime_s"]), _since(r), _money(r)])


def table(doc, width):
    """The rows as a table `width` columns wide: a box that did not answer in red, an idle one in
    yellow."""
    from rich.text import Text

    from .columns import table as fitted

    rows = []
    for r in doc["data"]["hosts"]:
        style = "red" if not r["ok"] else ("yellow" if r["idle"]["state"] == "idle" else "")
        rows.append({k: Text(v, style=style) for k, v in zip(COLUMNS, cells(r))})
    return fitted(COLUMNS, rows, _PRIORITY, _LEAST, width)


def render(doc, con):
    con.print(table(doc, con.width))
    # A box that did not answer gets the one stderr line (with how to see why) every verb gives it.
    render_errors({"hosts": [{"host": r["host"], "error": r["error"]} for r in doc["data"]["hosts"] if not r["ok"]]})
    summary_line(doc, con)


WATCH_PAUSE_S = 1.0


def watch(produce, con, pause_s=WATCH_PAUSE_S):
    """Redraw the fleet table in place (rich Live) from `produce()` until Ctrl-C; the last complete
    report, which the caller then prints as the final one (Live erases its own drawing). Ctrl-C
    before any report is complete propagates: nothing was shown."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    from .inert import envelope

    last = None
    with Live(console=con, auto_refresh=False, transient=True) as live:
        try:
            while True:
                last = envelope(produce())
                stamp = time.strftime("%H:%M:%S", time.localtime())
                live.update(Group(table(last, con.width), Text(f"{last['summary']}  (at {stamp}; Ctrl-C ends)")), refresh=True)
                time.sleep(pause_s)
        except KeyboardInterrupt:
            if last is None:
                raise
    return last
