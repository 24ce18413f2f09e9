"""What every target shares: how a command runs and how its answer comes back.

    target.run(line, stdin=b"", timeout_s=None, on_stdout=None) -> Result
    target.ship(entry, args=(), stdin=b"", timeout_s=60, on_stdout=None) -> Result
    target.run_onbox(entry, args=(), stdin=b"", timeout_s=60, on_stdout=None) -> dict

`line` is a POSIX sh line. `run` puts it under the box's own deadline (`timeout -k`, which kills
the remote command when it overruns: a local timer alone would leave it running and holding the
GPU), hands it to `sh` untouched by any login shell, feeds stdin, collects stdout (passing chunks
to `on_stdout` as they come) and stderr, and gives up locally GRACE_S after the box's deadline.
`ship` runs an on-box entry (gpuops.onbox), its source sent through stdin ahead of the caller's
stdin; `run_onbox` also reads the entry's one JSON document, and checks it against the entry's
shape (gpuops.shapes) before anyone reads it. Each call is exactly one exec
channel, so a verb's round trips can be counted. `later`, a callable returning the rest of stdin,
lets a call start before its input is ready: the box runs the login rc and starts the interpreter
meanwhile (on a box with conda or pyenv in its rc, most of a call's cost); it may be called again
when the call is retried.

The box is untrusted: what it prints is read up to a bound (`max_bytes`; for an entry's answer,
ANSWER_BYTES), past which the command is killed and the call fails with BadAnswer (exit 3)
instead of filling this machine's memory. A stream (`stream=True`: a log followed or mirrored,
whose size is the log's) is handed to `on_stdout` chunk by chunk and kept nowhere here; the
consumer bounds what it keeps.

A subclass only says how to start a command (`_spawn`, returning an object with stdin, stdout,
stderr, kill() and wait()), how to close its connection, and what its own failures look like.
"""

import socket
import threading

from .. import onbox, shapes
from ..errors import BadAnswer, TimedOut
from ..units import human_bytes
from . import wrap
from .resident import NothingRan
from .result import Result, check_onbox

# How long the local side waits past the box's deadline (and timeout's own -k grace) before it
# stops waiting: long enough for a slow link to bring back the killed command's exit status.
GRACE_S = 15
# What a command may print before it is cut off. An entry's JSON answer is far smaller than this
# (a probe ~100 KiB, a status page well under 1 MiB); a manifest lists every file of a tree.
OUTPUT_BYTES = 64 << 20
ANSWER_BYTES = {"manifest": 256 << 20, "destlock": (256 << 20) + (1 << 20)}  # the lock's channel may carry one
STDERR_BYTES = 1 << 20


class Target:
    name = "?"
    is_local = False

    def _spawn(self, command):
        raise NotImplementedError

    def _checked(self, result):
        """The Result, or the transport's own failure raised as a typed error."""
        return result

    def close(self) -> None:
        pass

    def drop_link(self) -> None:
        """The link failed or stalled under a transfer: close it and never reuse it, so the next
        call shakes hands afresh instead of riding a connection that is already dead."""
        self.close()

    def _on_deadline(self) -> None:
        """A call outlived its deadline: the link is suspect (a transport may stop reusing it)."""

    _python = None

    def _resident(self, src, args, timeout_s, site):
        """A callable that starts this shipped call on the box's resident helper (see
        gpuops.remote.resident), or None to use an exec channel. `site`: the call needs the box's
        site-packages (gpuops.onbox.NEEDS_SITE), on the helper as on an exec channel."""
        return None

    def _resident_lost(self, stuck) -> None:
        """The helper did not greet: nothing ran, and the call goes over an exec channel. `stuck`:
        nothing came back at all, so the link itself is suspect."""

    def _known_python(self):
        """(the box's interpreter an earlier call on this connection named, or None; a token for
        _learned_python). Kept with the target, whose connection is one box for its lifetime; a
        transport whose connections outlive it keeps it with them instead."""
        return self._python, None

    def _learned_python(self, path, seen) -> None:
        """Remember `path` (already valid) as what the box runs; None forgets."""
        self._python = path

    def run(self, line, stdin=b"", timeout_s=None, on_stdout=None, max_bytes=OUTPUT_BYTES, stream=False, later=None):
        command = wrap.with_timeout(["sh", "-c", line], timeout_s) if timeout_s else line
        return self._call(lambda: self._spawn(command), stdin, timeout_s, on_stdout, max_bytes, stream, later)

    def _call(self, spawn, stdin, timeout_s, on_stdout, max_bytes, stream, later):
        """Run what `spawn()` starts (an exec channel, or a call on the resident helper) to its end."""
        started = {}
        expired = threading.Event()

        def expire() -> None:
            # The whole call is bounded, the handshake and channel setup included: a box that
            # trickles a byte now and then must not hold the caller past its deadline.
            expired.set()
            self._on_deadline()
            if "proc" in started:
                started["proc"].kill()
            else:
                self.close()

        timer = threading.Timer(timeout_s + wrap.KILL_AFTER_S + GRACE_S, expire) if timeout_s else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            try:
                proc = started["proc"] = spawn()
            except Exception:
                if expired.is_set():
                    raise TimedOut(f"{self.name}: no answer within {timeout_s:g}s") from None
                raise
            reader = _StderrReader(proc.stderr)
            try:
                out = _pump(proc, stdin, on_stdout, None if stream else max_bytes, keep=not stream, later=later)
            except BaseException:  # the caller's on_stdout refused what came: the command ends too
                proc.kill()
                proc.wait()
                raise
            if out is None:
                proc.kill()
            code = proc.wait()
        finally:
            if timer:
                timer.cancel()
        err = reader.join()
        if out is None:
            raise BadAnswer(f"{self.name}: the box answered more than {human_bytes(max_bytes)}, the most gpuops "
                            "reads from one command; it was stopped")
        if expired.is_set():
            raise TimedOut(f"{self.name}: no answer within {timeout_s:g}s")
        return self._checked(Result(out, err, code))

    def ship(self, entry, args=(), stdin=b"", timeout_s=60, on_stdout=None, max_bytes=None, stream=False,
             later=None):
        src = onbox.script(entry)
        limit = max_bytes or ANSWER_BYTES.get(entry, OUTPUT_BYTES)
        site = entry in onbox.NEEDS_SITE
        if entry not in onbox.STARTS_JOBS:
            direct = self._resident(src, args, timeout_s, site)
            if direct is not None:
                try:
                    return self._call(direct, stdin or b"", timeout_s, on_stdout, limit, stream, later)
                except NothingRan as e:
                    self._resident_lost(e.stuck)
        # An entry that starts the user's commands runs as the login shell finds python3 (a
        # shim's environment included), so what a job inherits never depends on this cache.
        known, seen = (None, None) if entry in onbox.STARTS_JOBS else self._known_python()
        while True:
            line = wrap.python_line(len(src), args, site=site, python=known)
            result = self.run(line, stdin=src + (stdin or b""), timeout_s=timeout_s, on_stdout=on_stdout,
                              max_bytes=limit, stream=stream, later=later)
            ran, result.stderr = wrap.took_python(result.stderr)
            if ran is None and known is not None and result.exit in (126, 127) and not result.stdout:
                # The remembered interpreter could not even be started (the shell's own exit
                # codes, and no line from the bootstrap): nothing ran, so asking again is safe.
                self._learned_python(None, seen)
                known = None
                continue
            if ran is not None and ran != known:
                self._learned_python(ran, seen)
            return result

    def run_onbox(self, entry, args=(), stdin=b"", timeout_s=60, on_stdout=None, later=None):
        result = self.ship(entry, args, stdin, timeout_s, on_stdout, later=later)
        doc = check_onbox(result, self.name, timeout_s)
        return shapes.checked(entry, doc, self.name, action=args[0] if args else None)


class _StderrReader(threading.Thread):
    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.data = b""
        self.start()

    def run(self) -> None:
        # Keep only the first STDERR_BYTES but read on: a command blocked on a full pipe never ends.
        kept: list = []
        try:
            while True:
                chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
                if not chunk:
                    break
                if sum(len(c) for c in kept) < STDERR_BYTES:
                    kept.append(chunk)
        except (OSError, ValueError, socket.timeout):
            pass
        self.data = b"".join(kept)[:STDERR_BYTES]

    def join(self, timeout=None):
        super().join(timeout)
        return self.data


def _pump(proc, payload, on_stdout, max_bytes, keep=True, later=None):
    """Feed `payload` to the command's stdin on a thread and collect its stdout until EOF (only
    handed to `on_stdout` when not `keep`); None once it printed more than `max_bytes` (None: no
    bound, for a stream the caller consumes). `later()`, when given, is called on that thread once
    `payload` is on its way and returns the rest of stdin; what it raises ends the command and is
    raised here."""
    refused = []

    def feed() -> None:
        try:
            if payload:
                proc.stdin.write(payload)
            if later is not None:
                getattr(proc.stdin, "flush", lambda: None)()
                try:
                    rest = later()
                except BaseException as e:  # noqa: BLE001 - handed to the caller below
                    refused.append(e)
                    proc.kill()
                    return
                if rest:
                    proc.stdin.write(rest)
            proc.stdin.close()
        except (OSError, EOFError, ValueError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    chunks, size = [], 0
    while True:
        chunk = proc.stdout.read1(65536)
        if not chunk:
            break
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            return None
        if keep:
            chunks.append(chunk)
        if on_stdout:
            on_stdout(chunk)
    writer.join()
    if refused:
        raise refused[0]
    return b"".join(chunks)
