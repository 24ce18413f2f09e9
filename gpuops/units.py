"""How numbers are shown to people: byte sizes in binary units, durations in the largest two units.

One formatter per quantity, so a job's age, a reap holder's age, a stall and an ETA read alike.
"""

GIB = 1024 ** 3


def gib(n):
    """Bytes as GiB with two decimals (the unit preflight evidence is given in); None stays None."""
    return None if n is None else round(n / GIB, 2)


def human_bytes(n) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def duration(seconds) -> str:
    """'3h 05m', '12m 30s', '45s', '3d 00h'; 'unknown' for None."""
    if seconds is None:
        return "unknown"
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h >= 48:
        return f"{h // 24}d {h % 24:02d}h"
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {s:02d}s"
    return f"{s}s"
