"""On-box `stream`: a job's log as frames (gpuops.onbox.triage.logscan.frame), from a tail or an offset,
once or following until the job ends (or `until_s` seconds have passed). Entry: main(argv).

Each channel is bounded (_STREAM_MAX bytes, _STREAM_MAX_S seconds); the caller reconnects from
the `next` offset of the end frame, so a byte is never lost or repeated across channels.
"""

import select
import sys
import time

from ..engines import registry
from ..host import jobrecord
from ..triage import logscan
from ..host.jobrecord import EXIT, LOG, META, JobError

_STREAM_CHUNK, _STREAM_MAX, _STREAM_MAX_S, _KEEPALIVE_S = 64 << 10, 16 << 20, 600.0, 10.0


def stream(opts):
    out = sys.stdout.buffer
    sys.stdout.flush()
    try:
        job_id = jobrecord.resolve(opts.get("job"))
    except JobError as e:
        _emit(out, logscan.frame(b"E", {"error": {"kind": e.kind, "message": str(e)}}))
        return None
    log = jobrecord.path(job_id, LOG)
    size = logscan.size_of(log) or 0
    if opts.get("from_offset") is not None:
        pos = min(max(0, int(opts["from_offset"])), size)
    else:
        pos = logscan.tail_offset(log, int(opts.get("tail") or 0))
        limit = opts.get("max_bytes")
        if limit is not None and size - pos > int(limit):
            # a tail bigger than the page: its end is what a tail is for, starting at a whole line
            pos = size - int(limit)
            line = logscan.read_range(log, pos, int(limit)).find(b"\n")
            pos += line + 1 if 0 <= line < int(limit) - 1 else 0
    _emit(out, logscan.frame(b"H", {"job_id": job_id, "start": pos, "size": size}))
    follow, limit = bool(opts.get("follow")), opts.get("max_bytes")
    # a tail is the last N lines when asked: a page ends at the size it was counted in, or a job still
    # writing adds lines to it (its `next` offset picks them up)
    stop_at = size if not follow and opts.get("from_offset") is None else None
    sent, began, beat = 0, time.time(), time.time()
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    until = opts.get("until_s")
    while True:
        if until is not None and time.time() - began >= float(until):
            end = {"reason": "timeout"}  # the caller's --timeout, kept here so the channel ends on time
        else:
            want = _STREAM_CHUNK if limit is None else min(_STREAM_CHUNK, int(limit) - sent)
            if stop_at is not None:
                want = min(want, stop_at - pos)
            data = logscan.read_range(log, pos, want) if want > 0 else b""
            if data:
                if not _emit(out, logscan.frame(b"D", data)):
                    return None
                pos += len(data)
                sent += len(data)
                continue
            end = _stream_end(job_id, meta, follow, limit is not None and sent >= int(limit))
        if end is None and (sent >= _STREAM_MAX or time.time() - began > _STREAM_MAX_S):
            end = {"reason": "rotate"}  # bounded per channel: the caller reconnects from `next`
        if end is not None:
            while end["reason"] in ("exited", "vanished"):
                tail = logscan.read_range(log, pos, _STREAM_CHUNK)
                if not tail:
                    break
                if not _emit(out, logscan.frame(b"D", tail)):
                    return None
                pos += len(tail)
            end.update(next=pos, job_id=job_id, name=meta.get("name"), launched_at=meta.get("launched_at"),
                       engine=jobrecord.engine(meta))
            _emit(out, logscan.frame(b"E", end))
            return None
        if time.time() - beat > _KEEPALIVE_S:
            if not _emit(out, logscan.frame(b"K")):
                return None
            beat = time.time()
        if _reader_gone():
            return None
        time.sleep(0.2)


def _stream_end(job_id, meta, follow, limited):
    exit_rec = jobrecord.read_json(jobrecord.path(job_id, EXIT))
    if not follow or limited:
        return {"reason": "eof", "ended": exit_rec is not None}
    if exit_rec is not None:
        return {"reason": "exited", "exit": exit_rec}
    return registry.of(meta).stream_end(job_id, meta)


def _emit(out, data) -> bool:
    try:
        out.write(data)
        out.flush()
        return True
    except (OSError, IOError, ValueError):
        return False


def _reader_gone():
    """True when the SSH side of stdout is closed (a dropped link): stop polling for nobody."""
    try:
        p = select.poll()
        p.register(1, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def main(argv):
    return jobrecord.serve({"stream": stream}, argv)
