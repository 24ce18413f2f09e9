"""Manifests of both ends: the local tree walked in-process, the remote one in one round trip.

Both ends run the same walker (gpuops.onbox.manifest), so rules, names and hashes agree by
construction. The remote call survives a dropped connection: it reconnects with the operation's
backoff, since a sync that just resumed after a cut must still be able to verify.
"""

import json
import os
import threading

from ..errors import AuthFailed, HostError, HostKeyChanged, PythonMissing
from ..onbox import manifest as walker

# Seconds a remote manifest may take: a floor, plus time to read the bytes it hashes and to
# stat the entries it walks, at rates slow disks still manage.
_FLOOR_S = 120
_HASH_RATE = 40 << 20
_STAT_RATE = 5000


def budget_s(nbytes=0, nentries=0) -> float:
    return _FLOOR_S + nbytes / _HASH_RATE + nentries / _STAT_RATE


def local(root, request) -> dict:
    return walker.build({**request, "root": root})


class Hasher:
    """Hashes local file entries in place on a thread, so the local side's reading overlaps the
    remote round trip and the transfer. wait(rels) blocks only until those particular files are
    done; stop() skips the rest when they turn out not to be needed."""

    def __init__(self, root, entries):
        self._root = os.fsencode(root)
        self._todo = [e for e in entries if e[1] == "f" and e[3] is None]
        self._index = {e[0]: i for i, e in enumerate(self._todo)}
        self._count = 0  # files are hashed in list order, so a count is a watermark
        self._stopped = False
        self._finished = False
        self._cond = threading.Condition()
        self.errors = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            for e in self._todo:
                if self._stopped:
                    break
                walker.hash_entries(self._root, [e], self.errors)
                with self._cond:
                    self._count += 1
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def wait(self, rels=None):
        """Until every rel in `rels` (all of them when None) is hashed, or the thread ended."""
        last = len(self._todo) - 1 if rels is None else max((self._index.get(r, -1) for r in rels), default=-1)
        with self._cond:
            self._cond.wait_for(lambda: self._finished or self._count > last)

    def stop(self):
        self._stopped = True
        self._thread.join()


def remote(target, root, request, timeout_s, backoff=None) -> dict:
    """The box's manifest of `root`; reconnects and retries while the backoff allows."""
    payload = json.dumps({**request, "root": root}).encode("utf-8", "surrogateescape")
    while True:
        try:
            doc = target.run_onbox("manifest", stdin=payload, timeout_s=timeout_s)
        except (AuthFailed, HostKeyChanged, PythonMissing):
            raise
        except HostError:
            target.close()
            if backoff is not None and backoff.wait():
                continue
            raise
        if "error" in doc:
            raise HostError(f"{target.name}: the on-box manifest refused the request: {doc['error']}")
        return doc


def free_space(target, root, backoff=None):
    """(free bytes, free inodes or None) where `root` is on the box."""
    doc = remote(target, root, {"paths": [], "space": True}, timeout_s=60, backoff=backoff)
    space = doc.get("space") or {}
    return space.get("free_bytes"), space.get("free_inodes") if space.get("total_inodes") else None
