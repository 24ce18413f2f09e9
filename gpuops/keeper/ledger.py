"""A run's ledger: its wall time from the keeper's launch to its end, each second once, split into
what it bought. Pure over the marks the keeper's loop (gpuops.keeper.loop) sets as the run moves.

A mark starts a phase that lasts until the next mark (or the end):
  launch      placing, pushing a checkpoint and launching (the first attempt's: "launch"; a
              later one's: "relaunch", recovery's cost)
  running     an attempt runs. On a box that was later lost, the time after its newest checkpoint
              that reached the vault (`redone_after`) is "redone": the next box computes those
              steps again. The rest is "useful".
  detection   the box stopped answering (from its last answer) until the keeper called it lost
  idle        the run completed; the box is still rented until it is stopped (or the keeper ends)
Money is the phase's box's price (the fleet file's usd_per_hour) for the phase's seconds, counted by
the minute's rate; a box without a price costs nothing here and is named in `unpriced`.
"""

KINDS = ("useful", "redone", "detection", "launch", "relaunch", "idle")


def _cost(price, seconds):
    return (price or 0.0) * seconds / 3600.0


def _pieces(mark, start, stop, first_launch):
    kind = mark["kind"]
    if kind == "launch":
        return [("launch" if first_launch else "relaunch", start, stop)]
    if kind == "running":
        cut = mark.get("redone_after")
        if cut is None:
            return [("useful", start, stop)]
        cut = min(max(cut, start), stop)
        return [("useful", start, cut), ("redone", cut, stop)]
    return [(kind, start, stop)]


def ledger(marks, end) -> dict:
    """{wall_s, usd, totals: {kind: {seconds, usd}}, rows: [{kind, box, seconds, usd}], unpriced}."""
    marks = sorted(marks, key=lambda m: m["at"])
    totals = {k: {"seconds": 0.0, "usd": 0.0} for k in KINDS}
    rows, unpriced, launches = [], set(), 0
    for i, mark in enumerate(marks):
        stop = marks[i + 1]["at"] if i + 1 < len(marks) else end
        stop = max(stop, mark["at"])
        launches += mark["kind"] == "launch"
        price = mark.get("usd_per_hour")
        if price is None and mark.get("box"):
            unpriced.add(mark["box"])
        for kind, a, b in _pieces(mark, mark["at"], stop, launches == 1):
            seconds = b - a
            if seconds <= 0:
                continue
            usd = _cost(price, seconds)
            totals[kind]["seconds"] += seconds
            totals[kind]["usd"] += usd
            rows.append({"kind": kind, "box": mark.get("box"), "seconds": seconds, "usd": usd})
    wall = (end - marks[0]["at"]) if marks else 0.0
    return {"wall_s": wall, "usd": sum(t["usd"] for t in totals.values()), "totals": totals, "rows": rows,
            "unpriced": sorted(unpriced)}


def line(doc) -> str:
    """One line a person reads: the money and where it went."""
    parts = [f"{k} {doc['totals'][k]['seconds']:.0f}s ${doc['totals'][k]['usd']:.4f}" for k in KINDS
             if doc["totals"][k]["seconds"] > 0]
    text = f"${doc['usd']:.4f} over {doc['wall_s']:.0f}s: " + ", ".join(parts)
    if doc["unpriced"]:
        text += f" (no price for {', '.join(doc['unpriced'])})"
    return text
