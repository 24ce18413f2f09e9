"""How fast the link carried a transfer, and whether compressing would have paid (gotcha U15).

The rate is what the transfer itself saw (its attempts' bytes on the wire and seconds), never a
probe of its own. Whether the data compresses is judged on a sample of what was sent, read from
this machine's copy (the source of a push, the destination of a pull) and compressed with zlib
at its fastest level, about what rsync's --compress gets. Compression is offered only where it
pays: a link slower than a core compresses, data that shrinks, and seconds to save.
"""

import os
import zlib

# Below this rate one core compresses faster than the link carries, so compressing costs no time.
SLOW_BYTES_S = 20e6
WORTH = 0.8             # offered only when the sample shrinks to this share of its size or less
MIN_SAVED_S = 1.0       # ... and the transfer would have been this much shorter
SAMPLE_BYTES = 4 << 20
PIECE = 256 << 10       # read from several places of the biggest files, not just their heads


def measure(outcome):
    """{"bytes", "seconds", "bytes_per_s", "streams"} of the data's direction over every attempt
    (over the transfer's wall time where several streams ran at once), and how many streams carried
    it, why and what the link measured (gpuops.sync.striped); None when nothing measurable moved."""
    seconds = outcome.wall_s or sum(a.seconds for a in outcome.attempts)
    moved = outcome.wire_bytes or outcome.bytes_sent
    if seconds <= 0 or moved <= 0:
        return None
    return {"bytes": moved, "seconds": round(seconds, 3), "bytes_per_s": round(moved / seconds),
            "streams": outcome.streams or {"count": 1}}


def sample_ratio(root, files):
    """Compressed size / size of a sample of `files` ([(relative path, size)]) under local
    `root`, biggest first; None when nothing could be read."""
    raw = packed = 0
    for rel, size in sorted(files, key=lambda f: -f[1]):
        if raw >= SAMPLE_BYTES:
            break
        pieces = max(1, min(4, size // PIECE))
        try:
            with open(os.path.join(os.fsencode(root), rel.encode("utf-8", "surrogateescape")), "rb") as f:
                for i in range(pieces):
                    f.seek(size * i // pieces)
                    data = f.read(PIECE)
                    raw += len(data)
                    packed += len(zlib.compress(data, 1))
        except OSError:
            continue
    return packed / raw if raw else None


def offer(link, ratio):
    """Seconds --compress would have saved on this link, or None when it would not pay."""
    if link is None or ratio is None or link["bytes_per_s"] >= SLOW_BYTES_S or ratio > WORTH:
        return None
    saved = link["seconds"] * (1 - ratio)
    return saved if saved >= MIN_SAVED_S else None
