"""`logs`: a job's log as an exact page, a bounded tail, or followed until the job ends.

Pages are exact: the box sends at most `max_bytes` from the start offset and `next_offset` is the
first byte not returned, so paging from 0 reproduces the log byte for byte. A page of text under
--json ends on a whole UTF-8 character (a character the bound would split waits for the next
page). `--follow` survives a dropped link by resuming at the next undelivered byte, stops at its
`timeout_s`, and on SIGINT or SIGTERM (gpuops.errors.Interrupted) still returns its envelope with
the offset to resume from.
"""

import base64
import json
import os
import threading
import time

from .. import contained, engines, errors
from ..boundary import answer, expect
from ..envelope import CODE_KEY, envelope
from ..engines import answers, statusrow
from ..jobs import frames
from .. import states
from .jobs import ENTRIES, call, command_line, one_line, payload, raise_reported, state_now
from typing import Optional

STREAM_IDLE_S = 30  # the box sends a keepalive frame every 10 s; silence this long = dead link
PAGE_TIMEOUT_S = 120  # a page is at most MAX_BYTES read from a file: a box still sending after this is stuck or lying
PAGE_BYTES = 1 << 20  # a page for people, printed as it comes
TEXT_BYTES = 64 << 10  # the text a --json page or follow keeps unless told otherwise
MAX_BYTES = 16 << 20

class _Stream:
    """One framed stream call: delivers D payloads to `sink`, remembers header and end."""

    def __init__(self, sink, host: str, limit: Optional[int]=None) -> None:
        self.host = host
        self.reader = frames.FrameReader()
        self.sink = sink
        self.limit = limit  # a page: the box may send no more than it was asked for
        self.header = None
        self.end = None
        self.received = 0
        self.heard = time.monotonic()
        self.stale = False

    def on_chunk(self, chunk):
        self.heard = time.monotonic()
        for kind, body in self.reader.feed(chunk):
            if kind == frames.HEADER:
                self.header = expect(answer(body, self.host), {"start": int, "size": int}, self.host, "log header")
            elif kind == frames.DATA:
                self.received += len(body)
                if self.limit is not None and self.received > self.limit:
                    raise errors.BadAnswer(f"{self.host}: the box's answer is not gpuops's: it sent more than the "
                                           f"{self.limit} bytes of log asked for")
                self.sink(body)
            elif kind == frames.END:
                self.end = answer(body, self.host)


def stream_once(target, opts, s, timeout_s=None):
    """One channel of the on-box `stream` action, feeding the _Stream `s` (whose header and byte
    count stay valid even when this raises; its end is None if the link dropped). Nothing is kept
    here: a log mirrored or followed is as big as the log."""
    from ..remote import wrap

    done = threading.Event()

    def watchdog() -> None:
        # The box sends a keepalive frame every 10 s: silence means a half-open link. Dropping the
        # link makes the blocked read return, whatever the transport: on a kept master that means
        # the master itself, which holds our end of the channel's pipes (OpenSSH passes a mux
        # client's stdio to the master), so killing the client alone leaves the read blocked until
        # the master's keepalives give out.
        while not done.wait(1.0):
            if time.monotonic() - s.heard > STREAM_IDLE_S:
                s.stale = True
                target.drop_link()
                return

    guard = threading.Thread(target=watchdog, daemon=True)
    if not target.is_local:
        guard.start()
    try:
        result = target.ship(ENTRIES["stream"], ["stream"], stdin=payload(opts), timeout_s=timeout_s,
                             on_stdout=s.on_chunk, stream=True)
    finally:
        done.set()
        if guard.is_alive():
            guard.join()  # never close the target from two threads at once
    if s.header is None and s.end is None:
        if result.exit == 127 and wrap.NO_PYTHON_MARK in result.err_text:
            raise errors.PythonMissing(f"{target.name}: python3 is not on the remote PATH")
        if s.stale or result.exit in (-1, 255):  # -1: paramiko lost the channel; 255: ssh itself failed
            raise errors.Unreachable(f"{target.name}: the log stream's connection dropped")
        tail = (result.err_text.strip().splitlines() or [f"exit {result.exit}, no output"])[-1]
        raise errors.GpuopsError(f"{target.name}: log stream failed: {tail[:300]}")
    if s.end and s.end.get("error"):
        raise_reported(target, s.end["error"])
    return s


def logs(target, *, job, tail=100, follow=False, from_offset=None, save=None, jobs_dir=None, sink=None,
         reconnect_s=120.0, notice=None, max_bytes=None, timeout_s=None, encoding="text", attempt=None):
    """Print (via `sink`) or keep (no sink: --json) a page from a tail or an offset, or follow
    until the job ends or `timeout_s` passes.

    A page holds at most `max_bytes` (default: PAGE_BYTES printed, TEXT_BYTES kept); a follow
    keeps the newest `max_bytes` of what it read. Follow survives a dropped link: it reconnects
    (with backoff, up to `reconnect_s`) and resumes at the next undelivered byte. `--save DIR`
    mirrors the whole log to DIR/<job>/log, resuming a previous partial copy. A kept page is text
    (decoded as UTF-8; text_exact says whether nothing was replaced), or with encoding "base64" its
    exact bytes (bytes_b64), for a log that is not UTF-8. With `attempt` (N from 1), the log of
    that attempt of the run `job` names, not of its current one.
    """
    notice = notice or (lambda msg: None)
    keep = int(max_bytes or (TEXT_BYTES if sink is None else PAGE_BYTES))
    save_file = None
    if save:
        save_file, from_offset = _open_save(target, job, save, jobs_dir, attempt)
    kept = bytearray()

    def deliver(data) -> None:
        if save_file is not None:
            save_file.write(data)
        if sink is not None:
            sink(data)
        else:
            kept.extend(data)
            if len(kept) > keep:  # a follow keeps the newest bytes; text_starts_at says where they begin
                del kept[:len(kept) - keep]

    opts = {"job": job, "jobs_dir": jobs_dir, "follow": bool(follow), "attempt": attempt}
    if from_offset is not None:
        opts["from_offset"] = int(from_offset)
    else:
        opts["tail"] = int(tail)
    paged = not follow and not save
    if paged:
        opts["max_bytes"] = keep
    run = _Run(target, opts, deliver, reconnect_s, notice, timeout_s)
    try:
        run.go()
    except KeyboardInterrupt:
        run.stopped("SIGINT")
    except errors.Interrupted as e:
        run.stopped(e.signal_name)
    finally:
        if save_file is not None:
            save_file.close()
    if paged and sink is None and len(kept) == keep > 3:
        # only a full page: the next one starts with the bytes cut, so paging always moves on
        cut = _split_character(kept)
        del kept[len(kept) - cut:]
        run.offset = run.offset - cut if run.offset is not None else None
    return _logs_envelope(target, run, save, bytes(kept), sink, jobs_dir, encoding)


class _Run:
    """The channels of one `logs` call: where it started, how far it got, and how it ended."""

    def __init__(self, target, opts, deliver, reconnect_s, notice, timeout_s) -> None:
        self.target, self.opts, self.deliver = target, opts, deliver
        self.reconnect_s, self.notice = reconnect_s, notice
        self.deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
        self.start = self.offset = self.end = self.size = None
        self.interrupted: Optional[str] = None
        self.reconnects, self.job_id, self.timed_out = 0, opts["job"], False

    def go(self):
        opts, give_up = self.opts, None
        while True:
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    self.timed_out = True
                    return
                opts["until_s"] = left
            paged = "max_bytes" in opts
            s, err = _Stream(self.deliver, self.target.name, opts["max_bytes"] if paged else None), None
            try:
                stream_once(self.target, opts, s, PAGE_TIMEOUT_S if paged else None)
            except errors.BadAnswer:
                raise  # a lying box is not a dropped link: resuming would not help
            except errors.HostError as e:
                err = e
            finally:
                self._count(s)
            if s.header is not None:
                give_up = None
            if s.end is not None:
                reason = s.end.get("reason")
                if reason == "rotate":
                    opts.pop("tail", None)
                    opts["from_offset"] = expect(s.end, {"next": int}, self.target.name, "log stream's end")["next"]
                    continue
                self.timed_out = reason == "timeout"
                self.end = s.end
                return
            # the link dropped mid-stream (or could not be opened): reconnect and resume
            if self.offset is None and err is not None and self.reconnects == 0:
                raise err
            give_up = give_up or time.monotonic() + self.reconnect_s
            if time.monotonic() > give_up:
                raise errors.Unreachable(
                    f"{self.target.name}: lost the log stream and could not reconnect within "
                    f"{self.reconnect_s:g}s; resume with --from-offset {self.offset}")
            self.reconnects += 1
            self.notice(f"gpuops: connection lost; resuming at byte {self.offset} (attempt {self.reconnects})")
            self.target.drop_link()  # a kept master on a frozen link would stall the next try the same way
            time.sleep(min(8.0, 0.5 * 2 ** min(self.reconnects - 1, 4)))
            opts.pop("tail", None)
            if self.offset is not None:
                opts["from_offset"] = self.offset

    def _count(self, s) -> None:
        """What stream `s` delivered, counted even when a signal cut it short."""
        if s.header is None:
            return
        self.job_id = answers.job_id(s.header.get("job_id", self.job_id), self.target.name)
        if self.start is None:
            self.start = s.header["start"]
        self.size = max(self.size or 0, s.header["size"])
        self.offset = s.header["start"] + s.received

    def stopped(self, signal_name: str) -> None:
        self.interrupted = signal_name
        self.target.close()  # ends the channel on the box too


def _split_character(buf):
    """How many bytes at the end of `buf` begin a UTF-8 character they do not finish (0 to 3)."""
    for back in range(1, min(4, len(buf)) + 1):
        byte = buf[-back]
        if byte < 0x80:
            return 0
        if byte >= 0xC0:  # a lead byte: 110xxxxx needs 2 bytes, 1110xxxx 3, 11110xxx 4
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back if need > back else 0
    return 0


def _open_save(target, job, save, jobs_dir, attempt=None):
    """The local mirror file (append mode) and the offset to resume from; saves meta/exit too."""
    doc = call(target, "status", {"job": job, "jobs_dir": jobs_dir, "attempt": attempt})
    if not doc["jobs"]:
        raise errors.BadAnswer(f"{target.name}: the box's answer is not gpuops's: no record of job {job!r}")
    return save_records(save, doc["jobs"][0])


def save_records(save, facts):
    """Write a job's meta and exit records to SAVE/<job id>/ and open its log there for appending:
    (file, bytes it already holds). The id and the records come from the box, so every write goes
    through gpuops.contained and stays in SAVE, whatever they say and whatever links SAVE holds."""
    os.makedirs(save, exist_ok=True)
    root = contained.Root(save)
    folder = contained.one_name(facts["job_id"])
    root.makedirs(folder)
    for name, rec in (("meta.json", facts.get("meta")), ("exit.json", facts.get("exit"))):
        if rec is not None:
            root.write_atomic(f"{folder}/{name}", json.dumps(rec, indent=2, sort_keys=True).encode("utf-8"))
    with root.parent(f"{folder}/log") as (d, name):
        fd = d.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    log = os.fdopen(fd, "ab")
    return log, os.fstat(fd).st_size


def _logs_envelope(target, run, save, kept, sink, jobs_dir, encoding="text"):
    end = run.end or {}
    job_id, start, offset = run.job_id, run.start, run.offset
    if offset is None:  # stopped before the box said where it starts: resume where it was asked to
        offset = start if start is not None else run.opts.get("from_offset")
    data = {"job_id": job_id, "start_offset": start, "next_offset": offset,
            "bytes": (offset or 0) - (start or 0), "log_size": run.size, "reconnects": run.reconnects,
            "end": end.get("reason"), "timed_out": run.timed_out, "interrupted": run.interrupted}
    if sink is None and encoding == "base64":
        data["bytes_b64"], data["text_exact"] = base64.b64encode(kept).decode("ascii"), True
    elif sink is None:
        try:
            data["text"], data["text_exact"] = kept.decode("utf-8"), True
        except UnicodeDecodeError:
            data["text"], data["text_exact"] = kept.decode("utf-8", "replace"), False
    if sink is None:
        data["text_starts_at"] = data["next_offset"] - len(kept) if data["next_offset"] is not None else None
    ok, summary = True, f"{job_id}: bytes {start}..{data['next_offset']}"
    if run.size is not None and data["next_offset"] is not None and end.get("reason") == "eof":
        data["more"] = data["next_offset"] < run.size
        summary += f" of {run.size}"
    ended = end.get("reason") in ("exited", "vanished")
    if ended:
        rec = end.get("exit")
        meta = {"name": end.get("name"), "launched_at": end.get("launched_at")}
        if end.get("engine") in engines.names():
            meta["engine"] = end["engine"]
        # what the end frame says, as facts every engine's rule reads: the process is gone, and a
        # scheduler knows the job while it has an exit record
        row = statusrow.derive(answers.facts({"job_id": job_id, "exit": rec, "liveness": "gone", "meta": meta,
                                          "scheduler": {"known": bool(rec)}}, target.name))
        data.update(state=row["state"], exit=rec, name=end.get("name"), duration_s=row.get("duration_s"))
        ok = row["state"] == states.COMPLETED
        summary += f"; job ended: {one_line(row).split(': ', 1)[1]}"
    elif run.opts["follow"] and (run.interrupted or run.timed_out):
        row = state_now(target, job_id, jobs_dir)  # a follow cut short says where the job stands
        if row:
            data.update(state=row["state"], name=row.get("name"))
    elif end.get("reason") == "eof":
        data["ended"] = bool(end.get("ended"))
    if run.timed_out:
        summary += "; stopped following at its --timeout"
    if run.interrupted:
        summary += f"; stopped by {run.interrupted}"
    if save:
        data["saved_to"] = os.path.join(save, job_id)
        summary += f"; saved to {data['saved_to']}"
    again = ["--from-offset", str(data["next_offset"])] + (["--follow"] if run.opts["follow"] else [])
    if run.opts.get("attempt"):  # the first attempt's id is the run's: without it, the next page is another log
        again += ["--attempt", str(run.opts["attempt"])]
    nxt = [] if not ok or ended else [command_line(target.name, "logs", job_id, *again, jobs_dir=jobs_dir)]
    if data.get("ended") and not data.get("more"):  # read to the end of an ended job's log: the same page forever
        which = ["--attempt", str(run.opts["attempt"])] if run.opts.get("attempt") else []
        nxt = [command_line(target.name, "triage", job_id, *which, jobs_dir=jobs_dir,
                            why="what its log says: the job ended and its log has no more")]
    out = envelope("logs", ok=ok and not run.timed_out and not run.interrupted, summary=summary, data=data,
                   next=nxt)
    if run.interrupted:
        out[CODE_KEY] = errors.INTERRUPTED[run.interrupted]
    elif run.timed_out:
        out[CODE_KEY] = errors.WAIT_TIMED_OUT
    return out
