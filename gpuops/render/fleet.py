"""The fleet view for people: one row per box, then the totals line; `watch` redraws it in place.
Pure `cells` builds the text of each row, so what a row says is tested without a terminal."""

from ..units import duration, human_bytes
from . import inert, render_errors, summary_line

COLUMNS = ("HOST", "GPUS", "VRAM USED / FREE", "UTIL", "JOBS", "DATA DIR", "FREE", "INODES FREE", "UPTIME",
           "IDLE FOR", "IDLE $")
# Which columns stay on a narrow terminal (gpuops.render.columns): the box, what it has, and what
# its idle time costs come first; where its data lives and how long it has been up, last.
_PRIORITY = ("HOST", "GPUS", "IDLE $", "IDLE FOR", "VRAM USED / FREE", "UTIL", "JOBS", "FREE", "INODES FREE",
             "DATA DIR", "UPTIME")
_LEAST = {"HOST": 12, "DATA DIR": 10}
_MIB = 1 << 20


def _gpus(r):
    if not r["gpu_present"]:
        return "none"
    shown = ", ".join(f"{g['count']}x {g['model'].replace('NVIDIA ', '')}" for g in r["gpus"])
    if r["gpu_error"]:
        shown = (shown + " " if shown else "") + "(GPU reading failed)"
    return (shown or "0") + _qualified(r)


def _qualified(r):
    """' (qualify: return)': the verdict of the box's last `preflight --qualify` on this workstation."""
    q = r.get("qualify")
    return f" (qualify: {q['verdict']})" if q else ""


def _mib(value):
    return human_bytes(value * _MIB) if value is not None else "?"


def _vram(r) -> str:
    if not r["gpu_count"]:
        return "-"
    return f"{_mib(r['vram_used_mib'])} / {_mib(r['vram_free_mib'])}"


def _util(r) -> str:
    if not r["gpu_count"]:
        return "-"
    if r["util_peak_pct"] is None:
        return "?"
    return f"{r['util_peak_pct']:.0f}%"


def _pct(free, total: int):
    return f"{100.0 * free / total:.0f}%" if free is not None and total else "?"


def _disk(d) -> list:
    """(data dir, free bytes, free inodes) cells."""
    # A data dir the run has not created yet is measured at its nearest existing parent.
    where = d["path"] + (f" (at {d['measured_at']})" if d.get("measured_at") else "")
    if d.get("error"):
        return [where, d["error"], "?"]
    return [where, f"{human_bytes(d['free_bytes'])} {_pct(d['free_bytes'], d['total_bytes'])}",
            _pct(d["free_inodes"], d["total_inodes"])]


def _idle_for(r):
    """How long the box has been idle (since when, to the second, is in --json)."""
    idle = r["idle"]
    return duration(idle["idle_s"]) if idle["state"] == "idle" else idle["state"]


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
            + [duration(r["uptime_s"]), _idle_for(r), _money(r)])


def table(doc, width: int):
    """The rows as a table `width` columns wide: a box that did not answer in red, an idle one in
    yellow."""
    from rich.text import Text

    from .columns import table as fitted

    rows = []
    for r in doc["data"]["hosts"]:
        style = "red" if not r["ok"] else ("yellow" if r["idle"]["state"] == "idle" else "")
        rows.append({k: Text(v, style=style) for k, v in zip(COLUMNS, cells(r))})
    return fitted(COLUMNS, rows, _PRIORITY, _LEAST, width)


def _bar(pct, width: int = 10):
    """A meter of `width` cells, in halves: '████▌░░░░░' for 45%; '?' cells when unknown."""
    if pct is None:
        return "?" * width
    halves = round(max(0.0, min(100.0, pct)) / 100.0 * width * 2)
    return "█" * (halves // 2) + "▌" * (halves % 2) + "░" * (width - halves // 2 - halves % 2)


def _processes(d):
    """gpustat's way: user:name/pid (memory), each GPU process of the device."""
    shown = [(f"{p['user']}:" if p["user"] else "") + f"{p['name'] or '?'}/{p['pid']}"
             + (f" ({_mib(p['used_mib'])})" if p["used_mib"] is not None else "") for p in d.get("processes") or []]
    return ", ".join(shown) or "-"


_GPU_COLUMNS = ("HOST", "GPU", "UTIL", "MEMORY", "PROCESSES")
_GPU_LEAST = {"HOST": 12, "PROCESSES": 12}


def gpu_table(doc, width: int):
    """One row per GPU of each box that answered (nvitop's and gpustat's view): its utilisation
    and memory as bars, and the processes on it; None when the report holds no GPU's processes."""
    from rich.text import Text

    from .columns import table as fitted

    rows = []
    for r in doc["data"]["hosts"]:
        for n, d in enumerate(r.get("devices") or []):
            if d.get("processes") is None:
                continue
            util = "?" if d["util_peak_pct"] is None else f"{d['util_peak_pct']:.0f}%"
            total, used = d["memory_total_mib"], d["memory_used_mib"]
            mem_pct = 100.0 * used / total if used is not None and total else None
            memory = f"{used / 1024:.1f}/{total / 1024:.1f} GiB" if used is not None and total else "?"
            rows.append({"HOST": Text(r["host"] if n == 0 else ""), "GPU": Text(str(d["index"])),
                         "UTIL": Text.assemble((_bar(d["util_peak_pct"]), "green"), f" {util:>4}"),
                         "MEMORY": Text.assemble((_bar(mem_pct), "magenta"), f" {memory}"),
                         "PROCESSES": Text(_processes(d))})
    if not rows:
        return None
    return fitted(_GPU_COLUMNS, rows, ("HOST", "GPU", "UTIL", "MEMORY", "PROCESSES"), _GPU_LEAST, width)


def _view(doc, width: int):
    """The box table, then (when the report has them) the per-GPU rows under it."""
    from rich.console import Group
    from rich.text import Text

    gpus = gpu_table(doc, width)
    return Group(table(doc, width), Text(""), gpus) if gpus is not None else table(doc, width)


def render(doc, con) -> None:
    con.print(_view(doc, con.width))
    for r in doc["data"]["hosts"]:  # what a keeper found (gpuops.keeper): the run never uses the box again
        if r.get("lost"):
            con.print(inert.text(f"{r['host']}: lost by run {r['lost'].get('run')}: {r['lost'].get('why')}"),
                      markup=False)
    # A box that did not answer gets the one stderr line (with how to see why) every verb gives it.
    render_errors({"hosts": [{"host": r["host"], "error": r["error"]} for r in doc["data"]["hosts"] if not r["ok"]]})
    summary_line(doc, con)


def watch(produce, con, asking="asking the boxes", pause_s=None):
    """The fleet (boxes, then each GPU with its bars and processes) redrawn in place until Ctrl-C
    (gpuops.render.live); the last complete report."""
    from . import live

    return live.watch(produce, con, _view, asking, live.PAUSE_S if pause_s is None else pause_s)
