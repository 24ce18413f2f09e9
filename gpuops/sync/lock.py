"""One writer per destination, on either end: a push or pull to a destination that another
transfer is writing is refused (exit 5) with the holder named, instead of ending "verified" with a
destination that mixes both trees.

Both ends use the flock of gpuops.onbox.sync.destlock, on a file beside the destination (outside its
tree), so every writer sees it whichever login it came through. Here (pull's --dst) its fallback
is the per-user state directory.
On the box (push's --dst) the destlock entry holds it on a channel of its own for the whole push;
if that channel drops mid-push, the lock is taken again. A holder that died has released its lock
with its last breath (the kernel drops an flock with its process), so it is simply taken over.
"""

import json
import os
import secrets
import socket
import threading
import time

from .. import errors, pullindex, shapes
from ..boundary import answer
from ..onbox.sync import destlock

# A writer that has just finished lets go of the box's lock a heartbeat later: a taker waits this
# long before calling the destination busy.
RELEASE_WAIT_S = 2.0
# How long the box may take to say whether the lock is free.
ANSWER_S = 120.0
RETAKE_PAUSE_S = 1.0
LINE_BYTES = 64 << 10
_SHOWN = 80


def owner(verb) -> dict:
    return {"verb": verb, "pid": os.getpid(), "host": socket.gethostname(), "token": secrets.token_hex(8)}


def refused(where, holder) -> errors.Busy:
    def shown(key):
        value = holder.get(key)
        text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else "?"
        return "".join(c if c.isprintable() else "?" for c in text[:_SHOWN])

    return errors.Busy(f"{where} is being written by another transfer (gpuops {shown('verb')}, pid {shown('pid')} "
                          f"on {shown('host')}, started {shown('started_at')}); run this again once it has ended")


class Here:
    """The lock on a destination on this machine, held from construction to release()."""

    def __init__(self, path, verb) -> None:
        where = os.path.join(pullindex.state_dir(), "locks")
        self._file, self._fd, holder = destlock.take_for(path, owner(verb), where)
        if self._fd is None:
            raise refused(path, holder)

    def release(self) -> None:
        if self._fd is not None:
            destlock.release(self._fd, self._file)
            self._fd = None


class _Released(Exception):
    """Raised into the lock's channel by its own output callback: the command is ended with it."""


class OnBox(threading.Thread):
    """The lock on a destination on the box, asked for at once and held on its own channel until
    release(). acquire() waits for the box's answer and raises Refused when another holds it.
    With a `listing` (a manifest request), the same channel also answers the destination's
    manifest once the lock is held: listing() returns it."""

    def __init__(self, target, path, verb, listing=None) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.where = f"{target.name}:{path}"
        self._owner = owner(verb)
        request = {"path": path, "owner": self._owner, "wait_s": RELEASE_WAIT_S}
        self._retake = json.dumps(request).encode("ascii")
        self._request = (json.dumps({**request, "manifest": listing}).encode("utf-8", "surrogateescape")
                         if listing is not None else self._retake)
        self._listing: dict = {}
        self._listed = threading.Event()
        if listing is None:
            self._listed.set()
        self._answered = threading.Event()
        self._released = threading.Event()
        self.held = False
        self.holder = None  # who has it, when the box refused it
        self.error: Exception | None = None
        self.lost = None    # who took it while a dropped channel was being replaced
        self.start()

    def acquire(self):
        if not self._answered.wait(ANSWER_S):
            raise errors.TimedOut(f"{self.target.name}: no answer about the destination lock within {ANSWER_S:g}s")
        if self.error is not None:
            raise self.error
        if not self.held:
            raise refused(self.where, self.holder)

    def listing(self, timeout_s) -> dict:
        """The destination's manifest the box took while holding the lock (after acquire())."""
        if not self._listed.wait(timeout_s):
            raise errors.TimedOut(f"{self.target.name}: no manifest of the destination within {timeout_s:g}s")
        if "doc" not in self._listing:
            raise self._listing.get("error") or errors.HostError(
                f"{self.target.name}: the destination lock's channel ended before its manifest")
        doc = self._listing["doc"]
        if "error" in doc:
            raise errors.HostError(f"{self.target.name}: the on-box manifest refused the request: {doc['error']}")
        return doc

    def release(self) -> None:
        """Let go: the channel ends at its next heartbeat (or is gone already)."""
        self._released.set()

    def check(self):
        """Refused when another transfer took the lock while this one's channel was down."""
        if self.lost is not None:
            raise refused(self.where, self.lost)

    def run(self) -> None:
        try:
            self._hold()
        finally:
            self._listed.set()  # a channel that ended before its manifest line: listing() says so

    def _hold(self) -> None:
        while not self._released.is_set():
            doc, err = self._one_channel()
            if err is not None and "doc" not in self._listing:
                self._listing["error"] = err
            self._request = self._retake  # a channel taken again only holds the lock
            if self._released.is_set():
                return
            holder = _holder(doc)
            if not self.held:  # the first answer decides
                if holder is None:
                    self.error = err or errors.HostError(
                        f"{self.target.name}: the destination lock failed: {str((doc or {}).get('error'))[:300]}")
                self.holder = holder
                self._answered.set()
                return
            if holder is not None and holder.get("token") != self._owner["token"]:
                self.lost = holder
                return
            # The channel dropped, or the process of an earlier one of ours still holds the lock
            # for us: take it again once that one has gone.
            time.sleep(RETAKE_PAUSE_S)

    def _one_channel(self):
        """(first line, error) of one run of the destlock entry, which held the lock for as long as
        its channel lived when that line said so."""
        heard, found = bytearray(), {}

        listing = self._request is not self._retake

        def on_stdout(chunk):
            if self._released.is_set():
                raise _Released()
            if "doc" in found and not (listing and self.held and not self._listed.is_set()):
                return
            start = len(heard)  # only the new bytes are searched for the end of a line
            heard.extend(chunk)
            if "doc" not in found:
                end = heard.find(b"\n", start)
                if end < 0:
                    if len(heard) > LINE_BYTES:
                        raise errors.BadAnswer(f"{self.target.name}: the destination lock answered no line in "
                                               f"{LINE_BYTES} bytes")
                    return
                found["doc"] = doc = shapes.checked("destlock", answer(bytes(heard[:end]), self.target.name),
                                                    self.target.name)
                del heard[:end + 1]
                start = 0
                if "holding" in doc:
                    self.held = True
                    self._answered.set()
            if listing and self.held:
                end = heard.find(b"\n", start)
                if end >= 0:
                    self._listing["doc"] = shapes.checked("manifest", answer(bytes(heard[:end]), self.target.name),
                                                          self.target.name)
                    heard.clear()
                    self._listed.set()

        try:
            self.target.run_onbox("destlock", stdin=self._request, timeout_s=None, on_stdout=on_stdout)
        except _Released:
            pass
        except errors.GpuopsError as e:
            return found.get("doc"), e
        return found.get("doc"), None


def _holder(doc):
    """The holder's record from a refusal (an empty one when the box's is not a record)."""
    if doc is None or "held_by" not in doc:
        return None
    return doc["held_by"] if isinstance(doc["held_by"], dict) else {}
