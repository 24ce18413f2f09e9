"""Pure: whether several streams pay, how many, and how a payload is cut among them.

One TCP stream over a long path carries at most its window per round trip, and links often hold
each connection to a rate of its own; tools built for big transfers open several. Here that is
decided from the link as measured (gpuops.sync.lanes.measure: one stream's rate and the round
trip), never assumed:

  - a payload under MIN_BYTES, a round trip under NEAR_RTT_S, or a stream that already carries
    FAST_BYTES_S goes as one stream: on such a link (loopback, a LAN) one stream is held back by
    the CPUs, not by the path, and more streams only share them (and pay for their handshakes);
  - otherwise each stream should carry at least LANE_S seconds of data at one stream's rate (so
    its handshake, a few round trips, is paid back), up to MAX_STREAMS.

Files of SPLIT_MIN bytes or more are cut into ranges so that one big file does not hold one stream
while the others idle. The ranges depend on the file's size alone, never on the number of streams,
so a run that resumes with another number of streams finds the ranges an earlier one left.
Streams are filled longest item first (whole files and ranges alike), each onto the stream
with the fewest bytes so far; directories and symlinks go with the first.
"""

from dataclasses import dataclass, field

MIN_BYTES = 32 << 20
FAST_BYTES_S = 50e6
NEAR_RTT_S = 0.01
MAX_STREAMS = 8
LANE_S = 2.0
SPLIT_MIN = 32 << 20
RANGES = 16
ALIGN = 1 << 20


@dataclass(frozen=True)
class Range:
    rel: str
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def part_name(self, name: bytes) -> bytes:
        """The part file of this range beside `name` (it matches the *.gpuops-part rule, so no
        walk lists it and no transfer carries it)."""
        return b".%s.%d-%d.gpuops-part" % (name, self.start, self.end)


@dataclass
class Lane:
    whole: list = field(default_factory=list)    # rels sent whole (by the single-stream engine)
    ranges: list = field(default_factory=list)   # Ranges
    nbytes: int = 0


def choose(payload: int, rate_bytes_s, rtt_s=None, requested=None) -> tuple:
    """(streams, why) for `payload` bytes over a link where one stream carried `rate_bytes_s`
    with a round trip of `rtt_s` (None: not measured). `requested` (a number the caller asked
    for) wins when given."""
    if requested:
        return max(1, min(MAX_STREAMS, int(requested))), "asked for"
    if payload < MIN_BYTES:
        return 1, f"under {MIN_BYTES >> 20} MiB to send"
    if rtt_s is not None and rtt_s < NEAR_RTT_S:
        return 1, f"a round trip of {rtt_s * 1e3:.1f} ms (under {NEAR_RTT_S * 1e3:.0f}): a near link"
    if not rate_bytes_s or rtt_s is None:
        return 1, "the link could not be measured"
    if rate_bytes_s >= FAST_BYTES_S:
        return 1, f"one stream carries {rate_bytes_s / 1e6:.0f} MB/s (at least {FAST_BYTES_S / 1e6:.0f})"
    n = max(1, min(MAX_STREAMS, int(payload // (rate_bytes_s * LANE_S))))
    return n, f"one stream carries {rate_bytes_s / 1e6:.1f} MB/s"


def rate(probe_bytes: int, probe_s: float):
    """One stream's rate from a probe of `probe_bytes` that took `probe_s` once its channel was up."""
    if probe_bytes <= 0 or probe_s <= 0:
        return None
    return probe_bytes / probe_s


def ranges(rel: str, size: int) -> list:
    """The ranges a file of `size` bytes is cut into: RANGES of them, each a multiple of ALIGN
    (the last takes the rest); a file under SPLIT_MIN is one range, i.e. sent whole."""
    if size < SPLIT_MIN:
        return [Range(rel, 0, size)]
    step = -(-size // RANGES)
    step = -(-step // ALIGN) * ALIGN
    return [Range(rel, start, min(size, start + step)) for start in range(0, size, step)]


def lanes(files: dict, others, n: int) -> list:
    """Cut the send list among `n` lanes: `files` {rel: size} of regular files, `others` the rels
    of directories and symlinks (lane 0)."""
    out = [Lane() for _ in range(max(1, n))]
    out[0].whole += sorted(others)
    items: list = []
    for rel, size in files.items():
        cut = ranges(rel, size)
        items += [(size, rel, None)] if len(cut) == 1 else [(r.size, rel, r) for r in cut]
    for size, rel, piece in sorted(items, key=lambda i: (-i[0], i[1], i[2].start if i[2] else 0)):
        lane = min(out, key=lambda l: l.nbytes)
        if piece is None:
            lane.whole.append(rel)
        else:
            lane.ranges.append(piece)
        lane.nbytes += size
    for lane in out:
        lane.whole.sort()
    return [lane for lane in out if lane.whole or lane.ranges] or out[:1]


def split_files(lanes_: list) -> dict:
    """{rel: [Range, ...] in order} of the files cut into ranges."""
    found: dict = {}
    for lane in lanes_:
        for r in lane.ranges:
            found.setdefault(r.rel, []).append(r)
    return {rel: sorted(rs, key=lambda r: r.start) for rel, rs in found.items()}
