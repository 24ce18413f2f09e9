"""Several streams where the link pays for them, one where it does not (gpuops.sync.stripes).

StripedEngine wraps the single-stream rsync engine and is used in its place. For a transfer worth
it, it measures the link (gpuops.sync.lanes.measure, on an Early thread) and lets stripes.choose
decide; with one stream, everything goes through the wrapped engine exactly as before. With
several, each lane (its
own SSH connection) carries its whole files with an rsync of its own over its connection, and
its ranges of the big files (gpuops.sync.ranges); every lane has its own retry budget, with the
same bounds as the transfer's, so one lane's retries do not spend another's. The lane that brings
a file's last range joins the file. A repair pass (force) is always one stream: it resends
the few paths verification found different, whole.

How it went is the Outcome as for one stream, plus `streams` (how many, why, the measurement) and
`wall_s` (the lanes ran at once, so their attempts' seconds overlap).
"""

import copy
import os
import threading
import time

from . import lanes as L
from . import ranges, stripes
from .outcome import DISK_FULL, FATAL, TRANSPORT, Attempt, Outcome, merge
from .retry import Backoff

STALL_MIN_S = 10.0


class StripedEngine:
    name = "rsync"

    def __init__(self, inner, target, direction: str, src_map: dict, requested=None, early=None) -> None:
        self.inner, self.target, self.direction, self.src_map = inner, target, direction, src_map
        self.requested, self.early = requested, early

    def run(self, rels, force: bool = False) -> Outcome:
        files = {r: self.src_map[r].size for r in rels if self.src_map[r].kind == "f"}
        payload = sum(files.values())
        early, self.early = self.early or Early(self.target), None  # the measurement is the first run's
        try:
            if force or not L.can_stripe(self.target) or (payload < stripes.MIN_BYTES and not self.requested):
                early.close()
                return self.inner.run(rels, force)
            if not self.requested and not early.started:
                biggest = max(files, key=lambda rel: files[rel])
                early.start(self.inner.remote_root.rstrip("/") + "/" + biggest if self.direction == "pull" else None)
            measured = early.result() if not self.requested else {}
            rate = stripes.rate(measured.get("probe_bytes", 0), measured.get("probe_s", 0))
            n, why = stripes.choose(payload, rate, measured.get("rtt_s"), self.requested)
            choice = {"count": n, "why": why, **measured, **({"rate_bytes_s": round(rate)} if rate else {})}
            if n == 1:
                early.close()
                outcome = self.inner.run(rels, force)
            else:
                outcome = self._striped(rels, files, n, early)
        finally:
            early.close()
        outcome.streams = choice
        return outcome

    def _striped(self, rels, files, n, early) -> Outcome:
        started = time.monotonic()
        others = [r for r in rels if r not in files]
        plan = stripes.lanes(files, others, n)
        conns = early.take(len(plan))
        tally = _Tally(self.inner.progress, len(plan))
        results = [Outcome(self.name) for _ in plan]
        backoffs = [Backoff(budget_s=self.inner.backoff.budget_s) if self.inner.backoff else None for _ in plan]
        self._split = stripes.split_files(plan)
        self._pending = {rel: len(pieces) for rel, pieces in self._split.items()}
        self._lock = threading.Lock()
        self._whole: set = set()  # files to send whole after the lanes (their ranges found the way blocked)
        threads = [threading.Thread(target=self._lane, args=(conns[i], plan[i], results[i], backoffs[i], tally.lane(i)),
                                    daemon=True) for i in range(len(plan))]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)
        total = Outcome(self.name, compressed=self.inner.compress)
        for one in results:
            merge(total, one)
        if self._whole and total.failure is None:
            # the way to these files was blocked when their ranges came; the lanes' rsyncs have
            # put the source's directories there since
            merge(total, self.inner.run(sorted(self._whole)))
        if self.inner.backoff is not None:
            self.inner.backoff.retries += sum(b.retries for b in backoffs if b)
        total.wall_s = round(time.monotonic() - started, 3)
        return total

    def _lane(self, conn, lane, outcome, backoff, progress) -> None:
        """A lane's ranges first (a big file's ranges then end together, early, and its join on
        the box overlaps the lanes' whole files), then its whole files in one rsync."""
        try:
            for piece in lane.ranges:
                if self._range(conn, piece, outcome, backoff, progress):
                    self._landed(conn, piece, outcome)
                elif outcome.failure is not None:
                    return
            if lane.whole and outcome.failure is None:
                engine = copy.copy(self.inner)
                engine.target, engine.backoff, engine.progress = conn, backoff, progress
                merge(outcome, engine.run(lane.whole))
        except Exception as e:  # noqa: BLE001 - one lane's surprise is its failure, said, not a lost thread
            outcome.fail(FATAL, f"stream {conn.index}: {type(e).__name__}: {e}")

    def _landed(self, conn, piece, outcome) -> None:
        """Count a range in; the lane that brings a file's last range joins the file."""
        with self._lock:
            self._pending[piece.rel] -= 1
            last = self._pending[piece.rel] == 0
        if last:
            self._join(conn, piece.rel, self._split[piece.rel], outcome)

    def _range(self, conn, piece, outcome, backoff, progress) -> bool:
        copy_range = ranges.push if self.direction == "push" else ranges.pull
        stall_s = max(STALL_MIN_S, 2 * self.inner.io_timeout)
        while True:
            started, moved = time.monotonic(), [0]

            def count(nbytes) -> None:
                moved[0] += nbytes
                progress.add(nbytes)

            try:
                sent, had = copy_range(conn, self.inner.local_root, self.inner.remote_root, piece, count, stall_s)
            except ranges.RangeFailed as e:
                outcome.attempts.append(Attempt(None, e.kind, str(e), round(time.monotonic() - started, 3),
                                                moved[0], str(e)))
                outcome.bytes_sent += moved[0]
                outcome.wire_bytes += moved[0]
                if e.kind == "retry":
                    progress.note(f"stream {conn.index}: {e}; retrying")
                    conn.drop_link()
                    if backoff is not None and backoff.wait():
                        continue
                    outcome.fail(TRANSPORT, f"a range of {piece.rel} kept failing: {e}")
                elif e.kind == "setup":
                    with self._lock:
                        self._whole.add(piece.rel)
                else:
                    outcome.fail(DISK_FULL if e.kind == "disk-full" else FATAL, str(e))
                return False
            outcome.attempts.append(Attempt(0, "ok", f"range {piece.start}-{piece.end} of {piece.rel}",
                                            round(time.monotonic() - started, 3), sent))
            outcome.bytes_sent += sent
            outcome.wire_bytes += sent
            outcome.bytes_reused += had
            return True

    def _join(self, conn, rel, pieces, outcome) -> None:
        try:
            if self.direction == "push":
                st = os.stat(os.path.join(os.fsencode(self.inner.local_root), rel.encode("utf-8", "surrogateescape")))
                ranges.join_remote(conn, self.inner.remote_root, rel, pieces, st.st_mode, st.st_mtime)
            else:
                ranges.join_local(conn, self.inner.local_root, self.inner.remote_root, rel, pieces)
        except (ranges.RangeFailed, OSError) as e:
            kind = getattr(e, "kind", "fatal")
            outcome.fail(DISK_FULL if kind == "disk-full" else TRANSPORT if kind == "retry" else FATAL,
                         f"joining the ranges of {rel}: {e}")


class Early(threading.Thread):
    """The link's measurement on a thread of its own, started as early as the caller can (a push:
    once its own tree is walked, while the box lists the destination), and the lanes' connections,
    their handshakes started while the probe still runs once the round trip says the link is far:
    there a handshake is several round trips. Whatever lane is not taken is closed."""

    def __init__(self, target) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.lanes: list = []
        self.ciphers: list | None = None
        self.started = False
        self._remote_file = None
        self._measured: dict = {}
        self._lock = threading.Lock()
        self._closed = False

    def start(self, remote_file=None) -> None:
        if not L.can_stripe(self.target):
            return
        self._remote_file = remote_file
        self.started = True
        super().start()

    def run(self) -> None:
        try:
            self._measured = L.measure(self.target, self._remote_file, on_far=self._warm)
        except Exception:  # noqa: BLE001 - a link that cannot be measured is carried as one stream
            self._measured = {}

    def _warm(self) -> None:
        with self._lock:
            if self._closed:
                return
            self.ciphers = L.cipher_order(self.target)
            self.lanes = [L.Lane(self.target, i, self.ciphers) for i in range(stripes.MAX_STREAMS)]
        for lane in self.lanes:
            threading.Thread(target=lane.warm, daemon=True).start()

    def result(self) -> dict:
        if self.started:
            self.join()
        return self._measured

    def take(self, n) -> list:
        """`n` lanes; those started beyond them are closed meanwhile."""
        with self._lock:
            if self.ciphers is None:
                self.ciphers = L.cipher_order(self.target)
            while len(self.lanes) < n:
                self.lanes.append(L.Lane(self.target, len(self.lanes), self.ciphers))
            for lane in self.lanes[n:]:
                threading.Thread(target=lane.close, daemon=True).start()
            self.lanes = self.lanes[:n]
            return list(self.lanes)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            lanes, self.lanes = self.lanes, []
        for lane in lanes:
            lane.close()


class _Tally:
    """The lanes' progress as one bar: rsync reports its own running total, ranges add to it."""

    def __init__(self, progress, n) -> None:
        self.progress = progress
        self._done = [0] * n
        self._ranges = [0] * n
        self._files = [0] * n
        self._lock = threading.Lock()

    def lane(self, i):
        return _LaneProgress(self, i)

    def report(self, i, done=None, files=None, add=0) -> None:
        if self.progress is None:
            return
        with self._lock:
            if done is not None:
                self._done[i] = done
            if files is not None:
                self._files[i] = files
            self._ranges[i] += add
            total, nfiles = sum(self._done) + sum(self._ranges), sum(self._files)
        self.progress.update(total, nfiles)


class _LaneProgress:
    def __init__(self, tally, i) -> None:
        self._tally, self._i = tally, i

    def update(self, done, files=None) -> None:
        self._tally.report(self._i, done=done, files=files)

    def add(self, nbytes) -> None:
        self._tally.report(self._i, add=nbytes)

    def note(self, text: str) -> None:
        if self._tally.progress is not None:
            self._tally.progress.note(text)
