"""Wall-clock times printed in logs: ISO 8601 / Python logging (also 2025/03/02), absl/glog, date(1).

A log's times tell when the last step finished and when the log ends; triage never uses the
file's mtime (a hung job keeps printing warnings). absl lines carry no year: the year of the
latest full date seen before them is used, else the year of `now` (resolved in classify).

Times are parsed from bounded windows only (a step line, the bytes before it, a chunk's tail),
never from the whole log: the pattern starts with digits, which are everywhere in logs.
"""

import re
from datetime import datetime, timedelta, timezone

_MONTHS = {m: i + 1 for i, m in enumerate(
    (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"))}

TS_RX = re.compile(
    rb"(?P<iso>(?P<Y>\d{4})[-/](?P<M>\d\d)[-/](?P<D>\d\d)[T ](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
    rb"(?:[.,](?P<f>\d{1,9}))?(?P<z>Z|[+-]\d\d:?\d\d(?![\d:]))?)"
    rb"|(?P<absl>(?<![\w.])[IWEF](?P<aM>\d\d)(?P<aD>\d\d) (?P<ah>\d\d):(?P<am>\d\d):(?P<as>\d\d)\.(?P<af>\d{1,6}))"
    rb"|(?P<date>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<dM>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +"
    rb"(?P<dD>\d{1,2}) (?P<dh>\d\d):(?P<dm>\d\d):(?P<ds>\d\d)(?: [A-Z]{2,5}| [+-]\d{4})? (?P<dY>\d{4}))"
)


class Stamp:
    """A parsed time; `year_known` is False for absl lines (year filled in later)."""

    __slots__ = ("when", "year_known")

    def __init__(self, when, year_known=True) -> None:
        self.when = when
        self.year_known = year_known

    def epoch(self, now):
        """Seconds since the epoch. A naive log time is read in the zone of `now`; against a naive
        `now`, a zoned log time is read as its wall-clock time: both sides compare like clocks."""
        when = self.when
        if when.tzinfo is not None and now.tzinfo is None:
            when = when.replace(tzinfo=None)
        if not self.year_known:
            when = when.replace(year=now.year)
            if when.replace(tzinfo=None) > now.replace(tzinfo=None) + timedelta(days=1):
                when = when.replace(year=now.year - 1)
        if when.tzinfo is None and now.tzinfo is not None:
            when = when.replace(tzinfo=now.tzinfo)
        return when.timestamp()

    def clock(self):
        """Seconds on the log's own clock: good for the time between two of its lines, whatever
        `now` is (a zone-less time is read as UTC, a year-less one in year 2000)."""
        when = self.when if self.when.tzinfo is not None else self.when.replace(tzinfo=timezone.utc)
        return when.timestamp()

    def iso(self):
        return self.when.isoformat() if self.year_known else self.when.strftime("--%m-%dT%H:%M:%S")


def _frac(text):
    return int((text or b"0").ljust(6, b"0")[:6])


def _parse(m, year_hint):
    try:
        if m.group("iso"):
            z = m.group("z")
            tz = None
            if z == b"Z":
                tz = timezone.utc
            elif z:
                digits = z.replace(b":", b"")
                sign = -1 if digits[:1] == b"-" else 1
                tz = timezone(sign * timedelta(hours=int(digits[1:3]), minutes=int(digits[3:5])))
            return Stamp(datetime(int(m.group("Y")), int(m.group("M")), int(m.group("D")), int(m.group("h")),
                                  int(m.group("m")), int(m.group("s")), _frac(m.group("f")), tzinfo=tz))
        if m.group("absl"):
            when = datetime(year_hint or 2000, int(m.group("aM")), int(m.group("aD")), int(m.group("ah")),
                            int(m.group("am")), int(m.group("as")), _frac(m.group("af")))
            return Stamp(when, year_known=year_hint is not None)
        return Stamp(datetime(int(m.group("dY")), _MONTHS[m.group("dM")], int(m.group("dD")), int(m.group("dh")),
                              int(m.group("dm")), int(m.group("ds"))))
    except ValueError:  # 2024-13-45 and other impossible dates
        return None


def last_in(buf, start=0, end=None, year_hint=None):
    """(position, Stamp) of the last time in buf[start:end], or None."""
    found = None
    for m in TS_RX.finditer(buf, start, len(buf) if end is None else end):
        stamp = _parse(m, year_hint)
        if stamp is not None:
            found = (m.start(), stamp)
    return found


def last_before(buf, end, year_hint=None, windows=(4096, 65536, 1 << 20)):
    """The last time before `end`, looking back through growing windows (cheap when close)."""
    for width in windows:
        start = max(0, end - width)
        found = last_in(buf, start, end, year_hint)
        if found is not None or start == 0:
            return found
    return last_in(buf, 0, end, year_hint)


def year_of(stamp):
    return stamp.when.year if stamp is not None and stamp.year_known else None
