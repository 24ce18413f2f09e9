"""How numbers are shown to people: byte sizes in binary units, durations in the largest two units;
and how a duration a person writes (`90`, `15s`, `10m`, `4h`, `1h30m`) is read back.

One formatter per quantity, so a job's age, a reap holder's age, a stall and an ETA read alike.
"""

import re

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


_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN = re.compile(_NUMBER + r"\Z")
_PART = re.compile("(" + _NUMBER + ")([dhms])")
DURATION_FORMS = "seconds (90) or a number with a unit s, m, h or d (15s, 10m, 4h, 1h30m)"


def parse_duration(text) -> float:
    """Seconds from `90`, `1.5`, `15s`, `10m`, `4h`, `2d` or a combination, largest unit first and
    each unit once (`1h30m`, `2m30s`). Raises ValueError naming the accepted forms: `10x`, `-5`,
    `m`, `30m1h`, `1h1h` and `1 h` are all refused rather than guessed at, because a stall limit or
    a time limit read wrongly kills a healthy run or never fires."""
    raw = "" if text is None else str(text)
    word = raw.strip().lower()
    if _PLAIN.match(word):
        return float(word)
    total, at, units = 0.0, 0, []
    for m in _PART.finditer(word):
        if m.start() != at:
            break
        units.append(m.group(2))
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        at = m.end()
    ranks = ["dhms".index(u) for u in units]
    if not word or at != len(word) or ranks != sorted(set(ranks)):  # each unit once, largest first
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise ValueError("a duration is %s, not %r" % (DURATION_FORMS, shown))
    return total
