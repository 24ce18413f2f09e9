"""A run's events: what its supervisor decided and saw, appended to a bounded file in the job
directory (events.jsonl, a ringlog), and `notify`, which hands one event to the user's command.

An event is one JSON object: {seq, at, kind, run, attempt, job, ...what the kind carries}. `seq`
counts from 1 for the run and never repeats, so a reader that follows the file (`wait --until
event`) asks for what came after the last seq it saw, and can tell when the ring dropped the
oldest ones (the first seq it gets is past the one it asked after).

The notify command is the user's (`curl -d @- https://ntfy.sh/TOPIC`), run on the box through the
shell like the job's own command. The event reaches it on stdin only: never in argv, where `ps`
shows it to every user of the box, and never in the environment. Its stdin is a file, not a
pipe, so a command that never reads it cannot block the supervisor's write; its output goes to a
pipe of which only the tail is kept. It runs in a session of its own, bounded in time: at the
deadline its whole process group is killed. A command that
hangs, fails or cannot start costs the run nothing but a `notify-failed` event: `notify` never
raises and never waits past its bound.
"""

import json
import os
import select
import signal
import subprocess
import tempfile
import time

from ..host import ringlog

FILE = "events.jsonl"
MAX_BYTES, MAX_ROWS = 256 << 10, 2000
KINDS = ("attempt-started", "attempt-failed", "retrying", "stalled", "resumed", "completed", "gave-up",
         "timed-out", "stopped", "disk-low", "checkpoint-skipped", "notify-failed", "peer-lost", "tracker-warning",
         "retention-refused", "checkpoint-fallback")
# The kinds a --notify command hears by default: what a person wants to be woken for, and the
# run's ends. Routine ones are only recorded, and a failed notification is never notified (it
# would loop on a broken command).
NOTIFIED = frozenset(KINDS) - {"attempt-started", "checkpoint-skipped", "notify-failed"}
TEXT_MAX = 2000          # characters kept of one string field: reasons and paths, not logs
EVENT_MAX = 16 << 10     # bytes of one event as JSON; larger fields are cut
# The supervisor's watch waits for it: well under a gang node's silence limit (gangrules.LOST_S), so
# a hanging alert delays a stall or time-limit check by seconds and never reads as a lost node.
NOTIFY_TIMEOUT_S = 8.0
KILL_WAIT_S = 2.0
OUTPUT_MAX = 1000        # characters of the notify command's own output kept in its failure event


def _bounded(value, depth: int = 0):
    """A JSON-safe copy of `value` with strings cut to TEXT_MAX and containers to 50 items."""
    if isinstance(value, str):
        return value if len(value) <= TEXT_MAX else value[:TEXT_MAX] + "..."
    if isinstance(value, bytes):
        return _bounded(value.decode("utf-8", "replace"), depth)
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if depth >= 4:
        return str(value)[:200]
    if isinstance(value, dict):
        return dict((str(k)[:100], _bounded(v, depth + 1)) for k, v in list(value.items())[:50])
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_bounded(v, depth + 1) for v in list(value)[:50]]
    return str(value)[:200]


def make(kind, seq, run=None, attempt=None, job=None, at=None, **fields):
    """One event. ValueError for a kind not in KINDS (a supervisor bug, not the user's)."""
    if kind not in KINDS:
        raise ValueError("unknown run event kind %r" % (kind,))
    event = _bounded(fields)
    event.update(seq=seq, at=round(time.time() if at is None else at, 3), kind=kind, run=run, attempt=attempt, job=job)
    if len(ringlog.encode(event)) > EVENT_MAX:
        small = dict((k, v) for k, v in event.items() if len(ringlog.encode({k: v})) <= 512)
        small["truncated"] = sorted(set(event) - set(small))
        event = small
    return event


class Events(object):
    """The run's event file, written by its supervisor (one writer)."""

    def __init__(self, job_dir, run=None, max_bytes=MAX_BYTES, max_rows=MAX_ROWS) -> None:
        self.path = os.path.join(job_dir, FILE)
        self.run = run
        self.ring = ringlog.Ring(self.path, max_bytes, max_rows)
        newest = ringlog.last(self.path)
        self.seq = int(newest.get("seq") or 0) if newest else 0  # a restarted supervisor goes on counting
        self.error = None
        self.pending = []  # refused by the disk, oldest first (a run's events are few: no bound needed)

    def emit(self, kind, attempt=None, job=None, **fields):
        """Append one event and return it. A disk that refuses the write does not stop the run:
        the event comes back with `unrecorded` (so it can still be notified), `error` says why,
        and it is kept to be written, in order, once the disk takes it (`flush`)."""
        self.seq += 1
        event = make(kind, self.seq, self.run, attempt, job, **fields)
        self.pending.append(event)
        self.flush()
        if self.pending and self.pending[-1] is event:
            event = dict(event, unrecorded=str(self.error)[:300])
        return event

    def flush(self) -> None:
        """Write the events the disk refused so far, oldest first, until it refuses one again."""
        while self.pending:
            try:
                self.ring.append(self.pending[0])
            except (OSError, IOError) as e:
                self.error = str(e)
                return
            self.pending.pop(0)
            self.error = None


def read(job_dir, after_seq=0) -> list:
    """The events recorded, oldest first, those with seq > after_seq."""
    return [e for e in ringlog.read(os.path.join(job_dir, FILE)) if (e.get("seq") or 0) > after_seq]


def last(job_dir):
    """The newest event, or None."""
    return ringlog.last(os.path.join(job_dir, FILE))


def _printable(data):
    text = data.decode("utf-8", "replace")
    return "".join(c if c >= " " or c in "\n\t" else "?" for c in text).strip()[-OUTPUT_MAX:]


def _collect(proc, fd, deadline):
    """Read the command's output, keeping only its tail (a chatty command must not fill memory or
    a disk), until it has exited and its output ended, or the deadline. Returns (exit code or None
    when it is still running, output tail)."""
    kept, reading = b"", True
    while True:
        code, now = proc.poll(), time.time()
        if (code is not None and not reading) or now >= deadline:
            return code, kept
        if code is not None:
            deadline = min(deadline, now + 0.2)  # exited; a background child may hold the pipe open
        if not reading:
            time.sleep(min(0.05, deadline - now))
            continue
        ready, _, _ = select.select([fd], [], [], min(0.1, deadline - now))
        if ready:
            chunk = os.read(fd, 65536)
            kept = (kept + chunk)[-4 * OUTPUT_MAX:] if chunk else kept
            reading = bool(chunk)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        pass  # stuck in the kernel (D state): left for init to reap rather than hang the run


def notify(command, event, timeout_s=NOTIFY_TIMEOUT_S, env=None, cwd=None):
    """Run `command` through the shell with `event` as JSON on its stdin. None when it exited 0;
    else the fields of a notify-failed event ({for_seq, for_kind, why, exit_code, output, took_s}).
    Never raises; returns within timeout_s + KILL_WAIT_S."""
    failed = {"for_seq": event.get("seq"), "for_kind": event.get("kind"), "exit_code": None, "output": ""}
    started = time.time()
    proc, fds = None, []
    try:
        with tempfile.TemporaryFile() as stdin:
            stdin.write((json.dumps(event, sort_keys=True) + "\n").encode("utf-8"))
            stdin.flush()
            stdin.seek(0)
            r, w = os.pipe()
            fds = [r, w]
            try:
                proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=stdin, stdout=w, stderr=w, env=env,
                                        cwd=cwd, close_fds=True, start_new_session=True)
            except (OSError, ValueError) as e:
                failed["why"] = "the notify command could not start: %s" % (e,)
                return failed
            os.close(w)
            fds = [r]
            code, output = _collect(proc, r, started + max(0.0, timeout_s))
        _kill_group(proc)  # what it left in the background too: nothing of it outlives the bound
        failed["output"] = _printable(output)
        if code is None:
            failed["why"] = "the notify command ran past %gs and was killed" % timeout_s
        elif code == 0:
            return None
        else:
            failed["exit_code"] = code
            failed["why"] = ("the notify command exited %d" % code if code > 0 else
                             "the notify command was killed by signal %d" % -code)
        return failed
    except Exception as e:  # noqa: a notification must never cost the run
        if proc is not None and proc.poll() is None:
            _kill_group(proc)
        failed["why"] = "notifying failed: %s: %s" % (type(e).__name__, e)
        return failed
    finally:
        for fd in fds:
            os.close(fd)
        failed["took_s"] = round(time.time() - started, 3)


class Notifier(object):
    """Events to a --notify command, each failure recorded as a notify-failed event (not itself
    notified). `publish` emits and notifies in order, so the command hears the events in the order
    they happened."""

    def __init__(self, events, command=None, timeout_s=NOTIFY_TIMEOUT_S, env=None, cwd=None, kinds=NOTIFIED) -> None:
        self.events, self.command, self.timeout_s = events, command, timeout_s
        self.env, self.cwd, self.kinds = env, cwd, kinds

    def publish(self, kind, attempt=None, job=None, **fields):
        event = self.events.emit(kind, attempt=attempt, job=job, **fields)
        if self.command and kind in self.kinds:
            failed = notify(self.command, event, self.timeout_s, self.env, self.cwd)
            if failed:
                self.events.emit("notify-failed", attempt=attempt, job=job, **failed)
        return event
