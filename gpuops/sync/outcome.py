"""What an engine reports about one transfer: its attempts, the bytes it moved, how it ended."""

from dataclasses import asdict, dataclass, field
from typing import Optional

# Failure kinds an engine can end with; ops turns each into one clear message.
TRANSPORT = "transport"      # the connection kept failing until the retry budget ran out
DISK_FULL = "disk-full"      # the destination ran out of bytes or inodes mid-transfer
PARTIAL = "partial"          # some files could not be transferred (rsync 23): see file_errors
FATAL = "fatal"              # not worth retrying: usage, protocol, permissions at the root
INTERRUPTED = "interrupted"  # someone pressed ^C


@dataclass
class Attempt:
    exit: Optional[int]
    outcome: str           # ok | retry | partial | vanished | disk-full | fatal | interrupted
    meaning: str
    seconds: float
    bytes_sent: int        # file data sent in this attempt (exact when it finished, else last progress)
    message: str = ""


@dataclass
class Outcome:
    engine: str
    attempts: list = field(default_factory=list)
    bytes_sent: int = 0    # file data over all attempts
    bytes_reused: int = 0  # data the receiver already had (resumed partials, delta matches)
    wire_bytes: int = 0    # bytes on the wire in the direction of the data, where known
    failure: Optional[dict] = None
    vanished: list = field(default_factory=list)
    file_errors: list = field(default_factory=list)
    compressed: bool = False  # the data went compressed (rsync --compress)
    streams: Optional[dict] = None   # how many streams carried it and why (gpuops.sync.striped)
    wall_s: Optional[float] = None   # the transfer's own seconds where its attempts overlapped

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)

    def fail(self, kind, message) -> None:
        self.failure = {"kind": kind, "message": message}

    def as_dict(self) -> dict:
        doc = asdict(self)
        doc["retries"] = self.retries
        return doc


def merge(total: Outcome, more: Outcome) -> None:
    """Add `more` (a repair pass, one stream of several) to `total`."""
    total.attempts += more.attempts
    total.bytes_sent += more.bytes_sent
    total.bytes_reused += more.bytes_reused
    total.wire_bytes += more.wire_bytes
    total.vanished += more.vanished
    total.file_errors += more.file_errors
    total.failure = more.failure or total.failure
