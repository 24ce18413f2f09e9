"""Manifests of both ends: the local tree walked in-process, the remote one in one round trip.

Both ends run the same walker (gpuops.onbox.sync.manifest), so rules, names, hashes and the digest
cache (gpuops.onbox.sync.digestcache) agree by construction. The remote call survives a dropped
connection: it reconnects with the operation's backoff, since a sync that just resumed after a
cut must still be able to verify.
"""

import json
import os
import threading

from ..errors import AuthFailed, GpuopsError, HostError, HostKeyChanged, PythonMissing, TimedOut
from ..onbox.sync import manifest as walker

# Seconds a remote manifest may take: a floor, plus time to read the bytes it hashes and to
# stat the entries it walks, at rates slow disks still manage.
_FLOOR_S = 120
_HASH_RATE = 40 << 20
_STAT_RATE = 5000


def budget_s(nbytes=0, nentries=0) -> float:
    return _FLOOR_S + nbytes / _HASH_RATE + nentries / _STAT_RATE


FIELDS = ("hashed_files", "hashed_bytes", "cache_hits")


def cache_mode(rehash: bool) -> str:
    """The manifest request's "cache" value: reuse digests of unchanged files, or read everything."""
    return "rehash" if rehash else "use"


class Tally:
    """Files and bytes read to hash, and digests taken from the caches, per end, over every manifest
    of one operation: the envelope's proof of what verification actually read."""

    def __init__(self) -> None:
        self.sides = {"local": dict.fromkeys(FIELDS, 0), "remote": dict.fromkeys(FIELDS, 0)}
        self._lock = threading.Lock()  # manifests running beside the transfer add from their threads

    def add(self, side, counters) -> None:
        with self._lock:
            for k in FIELDS:
                self.sides[side][k] += (counters or {}).get(k, 0)


def rule_lines(root, request) -> list:
    """The rule lines a walk of local `root` applies (what the other end is told to apply)."""
    root_b = walker.fs_name(root)
    return walker.rules_for(root_b, request).lines if os.path.isdir(root_b) else []


def local(root, request) -> walker.Scan:
    """The local tree looked at (walked, or just `paths`); nothing hashed yet, see Hasher."""
    return walker.Scan({**request, "root": root})


class Hasher:
    """Hashes a local scan's file entries on a thread (into scan.entries), so the local side's
    reading overlaps the remote round trip and the transfer. Digests of unchanged files come from
    the digest cache. wait(rels) blocks only until those particular files are done; stop() skips
    the rest when they turn out not to be needed; finish() saves the cache and counts what was
    read."""

    def __init__(self, scan) -> None:
        self._scan = scan
        self._todo = [rel for rel, e in scan.entries.items() if e.kind == "f" and e.sha256 is None]
        self._index = {rel: i for i, rel in enumerate(self._todo)}
        self.total_files, self.total_bytes = len(self._todo), sum(scan.entries[rel].size for rel in self._todo)
        self._count = 0  # files are hashed in list order, so a count is a watermark
        self._bytes = 0
        self._stopped = False
        self._finished = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for rel in self._todo:
                if self._stopped:
                    break
                size = self._scan.entries[rel].size
                self._scan.hash([rel])
                with self._cond:
                    self._count += 1
                    self._bytes += size
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def wait(self, rels=None) -> None:
        """Until every rel in `rels` (all of them when None) is hashed, or the thread ended."""
        last = len(self._todo) - 1 if rels is None else max((self._index.get(r, -1) for r in rels), default=-1)
        with self._cond:
            self._cond.wait_for(lambda: self._finished or self._count > last)

    def watch(self, report, until=None, every_s=0.1) -> None:
        """report(bytes, files) hashed so far, as they go, until every file is or until() is true."""
        with self._cond:
            while not self._finished and not (until and until()):
                report(self._bytes, self._count)
                self._cond.wait(every_s)
            report(self._bytes, self._count)

    def stop(self) -> None:
        self._stopped = True
        self._thread.join()

    def finish(self, tally) -> None:
        """After wait() or stop(): save the digest cache, add what was read to `tally`."""
        self._thread.join()
        tally.add("local", self._scan.finish())


def remote(target, root, request, timeout_s, backoff=None, tally=None, when=None) -> dict:
    """The box's manifest of `root`; reconnects and retries while the backoff allows. What the
    box read to hash is added to `tally`. `when`, if given, returns the request (or raises) once
    it may be sent: the channel and the box's interpreter start before that."""
    def payload():
        return json.dumps({**(request if when is None else when()), "root": root}).encode("utf-8", "surrogateescape")

    while True:
        try:
            if when is None:
                doc = target.run_onbox("manifest", stdin=payload(), timeout_s=timeout_s)
            else:
                doc = target.run_onbox("manifest", timeout_s=timeout_s, later=payload)
        except (AuthFailed, HostKeyChanged, PythonMissing):
            raise
        except HostError:
            target.close()
            if backoff is not None and backoff.wait():
                continue
            raise
        if "error" in doc:
            raise HostError(f"{target.name}: the on-box manifest refused the request: {doc['error']}")
        if tally is not None:
            tally.add("remote", doc.get("hashing"))
        return doc


class Pending:
    """remote() on a thread, started before the caller's own work so the two overlap; result()
    returns its document or raises what it raised. With `when`, the channel opens at once and the
    request is what `when()` returns once it is known."""

    def __init__(self, target, root, request, timeout_s, tally=None, when=None) -> None:
        self._out: dict = {}
        self._thread = threading.Thread(target=self._run, args=(target, root, request, timeout_s, tally, when),
                                        daemon=True)
        self._thread.start()

    def _run(self, target, root, request, timeout_s, tally, when) -> None:
        try:
            self._out["doc"] = remote(target, root, request, timeout_s, tally=tally, when=when)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread in result()
            self._out["error"] = e

    def failed(self) -> bool:
        """True once the request has failed (result() would raise)."""
        return "error" in self._out

    def result(self, timeout_s=None) -> dict:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimedOut(f"no manifest from the box within {timeout_s:g}s")
        if "error" in self._out:
            raise self._out["error"]
        return self._out["doc"]


class Early:
    """A manifest whose channel opens now and whose request comes later (ask): a verification
    started as the transfer starts, so the box's login rc and interpreter start-up are behind it
    when the transfer ends. The box's deadline covers the transfer too, so ask() bounds the wait
    for the answer itself. It answers once, and None when asked again, when not `needed`, or when
    its channel failed (the transfer's link was cut, killing it): the caller then asks afresh. Used
    as a context manager, whose end lets an unasked channel go."""

    def __init__(self, target, root, timeout_s, tally=None, needed=True) -> None:
        self._ready = threading.Event()
        self._request = None
        self._asked = not needed
        self._pending = Pending(target, root, None, timeout_s, tally, when=self._wait) if needed else None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._ready.set()  # unasked: the request is None, and the channel ends without one

    def _wait(self):
        self._ready.wait()
        if self._request is None:
            raise _Dropped()
        return self._request

    def ask(self, request, timeout_s):
        if self._asked:
            return None
        self._asked = True
        self._request = request
        self._ready.set()
        try:
            return self._pending.result(timeout_s)
        except TimedOut:
            raise
        except GpuopsError:  # whatever ended this channel, a fresh one (with retries) is the judge
            return None


class _Dropped(Exception):
    """Ends the channel of an Early manifest that was never asked."""


def follow(target, root, request, timeout_s, on_output, tally) -> dict:
    """Run the landing follower (gpuops.onbox.sync.landing) on the box: one attempt, no retries (it
    is only a head start). Its output is passed on as it comes: the first byte says it is
    watching, so verification can be held back until it would be told to stop."""
    payload = json.dumps({**request, "root": root}).encode("utf-8", "surrogateescape")
    doc = target.run_onbox("landing", stdin=payload, timeout_s=timeout_s, on_stdout=on_output)
    tally.add("remote", doc.get("hashing"))
    return doc


def free_space(target, root, backoff=None):
    """(free bytes, free inodes or None) where `root` is on the box."""
    doc = remote(target, root, {"paths": [], "space": True}, timeout_s=60, backoff=backoff)
    space = doc.get("space") or {}
    return space.get("free_bytes"), space.get("free_inodes") if space.get("total_inodes") else None
