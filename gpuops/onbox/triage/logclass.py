"""triage's verdict on a job's log, computed on the box: what the supervisor asks after a failed
attempt, before deciding to retry (retrypolicy takes the class as `triage_class`).

There is one classifier: this module imports gpuops.onbox.triage itself, the package it lives in,
which `gpuops triage` runs on the workstation and the bundle ships to the box, and reads the log
through logexcerpt, the bounded view `gpuops triage --job` reads over SSH. So a class decided on
the box is the one `gpuops triage --job` reports for that attempt afterwards (with the same job
state, exit record and clock), and its pure-Python scanner needs nothing from the box but python3.

    classify_log(path, now=None, job_state=None, exit_record=None, progress=None,
                 head=logexcerpt.HEAD, tail=logexcerpt.TAIL)
        -> {"status", "primary", "also", "stage", "progress"} (triage's data keys of those names)

Entry: main(argv), a batch of logs as JSON on stdin, {"logs": [{"log": PATH, "now": EPOCH,
"job_state": ..., "exit_record": ..., "progress": ...}, ...], "head": N, "tail": N}; it prints
{"answers": [...], "now": EPOCH}, one answer per log in order: {"log", "size", KEYS...}, or
{"log", "error"} for one that cannot be read (the others are still answered).
"""

import json
import sys
import time
from datetime import datetime

from . import logexcerpt
from .logtriage import triage_pieces

KEYS = ("status", "primary", "also", "stage", "progress")


def classify_log(path, now=None, job_state=None, exit_record=None, progress=None, head=logexcerpt.HEAD,
                 tail=logexcerpt.TAIL):
    """triage's status, primary class, other classes, stage and progress for the log at `path`,
    from its head, step lines and tail (at most head + tail bytes plus the step lines).

    now          when the verdict is made: None (this box's clock), a datetime, or epoch seconds
    job_state    the job's state as gpuops' table names it (FAILED, KILLED, RUNNING ...) or as
                 Slurm does; None when unknown (the log alone then says whether it ended)
    exit_record  {"exit_code": int or None, "signal": "SIGKILL" or None}: the supervisor's own
                 record of how the job's leader ended (it stands in for a JOB SUMMARY)
    progress     {"at": epoch the last step line was written, "step_time_s": ...}, as
                 gpuops.engines.statusrow.dated_progress gives it from the growth samples: the stall
                 is then judged as `status` judges it
    OSError when the log cannot be read."""
    return _verdict(path, now, job_state, exit_record, progress, head, tail)[1]


def _verdict(path, now, job_state, exit_record, progress, head, tail):
    """(the log's size when read, the verdict)"""
    size, _, pieces = logexcerpt.read(path, head, tail)
    data = triage_pieces(pieces, now=_datetime(now), slurm_state=job_state, exit_record=exit_record,
                         progress=progress).data
    return size, dict((k, data[k]) for k in KEYS)


def _datetime(now):
    if now is None or isinstance(now, datetime):
        return now
    return datetime.fromtimestamp(float(now))  # naive local time, as `triage --job` reads the box's clock


def answer(request, head=logexcerpt.HEAD, tail=logexcerpt.TAIL):
    """One log's answer for main: its verdict and size, or why it has none."""
    path = request.get("log") if isinstance(request, dict) else None
    if not isinstance(path, str) or not path:
        return {"log": None, "error": "each request names its log: {\"log\": PATH, ...}"}
    now = request.get("now")
    if now is not None and (isinstance(now, bool) or not isinstance(now, (int, float))):
        return {"log": path, "error": "now is epoch seconds, not %r" % (now,)}
    try:
        size, out = _verdict(path, now, request.get("job_state"), request.get("exit_record"), request.get("progress"),
                             head, tail)
    except (OSError, IOError) as e:
        return {"log": path, "error": "cannot read %s: %s" % (path, e.strerror or e)}
    out.update(log=path, size=size)
    return out


def main(argv):
    raw = sys.stdin.buffer.read()
    try:
        doc = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except ValueError:
        doc = None
    logs = doc.get("logs") if isinstance(doc, dict) else None
    if argv or not isinstance(logs, list):
        sys.stderr.write("usage: logclass < {\"logs\": [{\"log\": PATH, \"now\": EPOCH, \"job_state\": ...}]}\n")
        return 2
    head, tail = int(doc.get("head") or logexcerpt.HEAD), int(doc.get("tail") or logexcerpt.TAIL)
    answers = [answer(r, head, tail) for r in logs]
    sys.stdout.write(json.dumps({"answers": answers, "now": time.time()}) + "\n")
    return 0
