"""On-box `wait`: block until a job reaches one of the wanted phases, a line of its log matches a
regex, or the time is up; then answer once with the job's facts and the log text before `next`.
Entry: main(argv).

Waiting here, next to the records, costs one SSH call however long the wait, and notices an exit
within one poll. The box knows only phases, as the job's engine tells them (gpuops.onbox.engines.registry):
"starting" (no start record yet, or queued), "alive", "paused" and "ended". The caller maps its
states onto phases and derives the state from the facts returned, so the state rules stay in one
place (gpuops.engines.statusrow).
"""

import base64
import os
import re
import time

from ..engines import registry
from . import job_facts
from ..host import jobrecord
from ..triage import logscan
from ..run import runrecord
from ..host.jobrecord import LOG, META, JobError

POLL_S = 0.2
SCHEDULER_POLL_S = 1.0  # how often a pause asks whether a job ended before its checkpoint
SCAN_CHUNK = 1 << 20
LINE_MAX = 64 << 10  # a line is matched on its first 64 KiB: a progress bar without newlines stays bounded
TEXT_MAX = 1 << 20
PHASES = ("starting", "alive", "paused", "ended")
# tqdm and friends redraw with \r: each redraw is a line to a reader, and to the regex.
_LINE_END = re.compile(b"[\r\n]")


def phase(job_id):
    jdir = jobrecord.job_dir(job_id)
    meta = jobrecord.read_json(os.path.join(jdir, META))
    if meta is None:
        return "starting"
    return registry.of(meta).phase(job_id, meta)


class Scan(object):
    """Finds the first line matching `pattern` in what is appended to a log, chunk by chunk.
    `pos` is the first byte not yet looked at; an unfinished last line waits for its end."""

    def __init__(self, log, start, pattern: str) -> None:
        self.log, self.pos, self.pattern = log, start, pattern
        self.carry = b""

    def run(self, final, deadline):
        """(end offset, line) of the first matching line, or None once everything written is read.
        `final`: the job has ended, so an unfinished last line is complete."""
        while time.time() < deadline:
            data = logscan.read_range(self.log, self.pos, SCAN_CHUNK)
            if not data:
                break
            hit = self._feed(data)
            if hit:
                return hit
        if final and self.carry and self._matches(self.carry):
            line, self.carry = self.carry, b""
            return self.pos, line
        return None

    def _feed(self, data):
        at, start = self.pos, 0
        while True:
            nl = _LINE_END.search(data, start)
            if nl is None:
                self.carry += data[start:start + max(0, LINE_MAX - len(self.carry))]
                self.pos = at + len(data)
                return None
            line, self.carry = self.carry + data[start:nl.start()], b""
            start = nl.end()
            if self._matches(line):
                self.pos = at + start
                return self.pos, line

    def _matches(self, line) -> bool:
        return self.pattern.search(line[:LINE_MAX].decode("utf-8", "replace")) is not None


def wait(opts):
    """A run (a job launched with a run policy, named by its id or by what its attempts share) is
    waited on as a whole: its phase is the current attempt's until the run has ended, "starting"
    between attempts, and a log regex is looked for in the current attempt's log (from its start
    once the attempt changes). With `events_after` (a seq; negative: the newest at the start), the
    run's events after it come with the answer, and `until_event` returns as soon as there is one."""
    ref = opts.get("job")
    named = jobrecord.resolve(ref, follow=False)
    run_id = runrecord.run_of(jobrecord.read_json(jobrecord.path(named, META)))
    run_id = run_id if run_id and (run_id == named or ref != named) else None
    # a run whose supervisor has not started yet (a Ray job Ray holds): followed as one once it has
    later, run_id = (run_id, None) if run_id and not runrecord.is_run(run_id) else (None, run_id)
    wanted = set(opts.get("phases") or ([] if opts.get("until_event") else ["ended"]))
    if not wanted <= set(PHASES):
        raise JobError("usage", "unknown phase in %r" % (sorted(wanted),))
    try:
        pattern = re.compile(opts["regex"]) if opts.get("regex") else None
    except re.error as e:
        raise JobError("usage", "log regex: %s" % e)
    after = opts.get("events_after")
    after = after if isinstance(after, int) and not isinstance(after, bool) and (run_id or later) else None
    if after is not None and after < 0:  # from now on
        after = runrecord.newest_seq(run_id or later)
    job_id = jobrecord.current(run_id) if run_id else named
    log = jobrecord.path(job_id, LOG)
    size = logscan.size_of(log) or 0
    start = min(max(0, int(opts.get("from_offset") or 0)), size)
    most = min(max(0, int(opts.get("max_bytes") or 0)), TEXT_MAX)
    deadline = time.time() + max(0.0, float(opts.get("timeout") or 0))
    scan = Scan(log, start, pattern) if pattern else None
    match, events = None, []
    meta = jobrecord.read_json(jobrecord.path(job_id, META)) or {}
    every = registry.of(meta).POLL_S
    asked = 0.0
    while True:
        if time.time() - asked >= every:
            if run_id and jobrecord.current(run_id) != job_id:
                job_id = jobrecord.current(run_id)
                log, start = jobrecord.path(job_id, LOG), 0
                scan = Scan(log, 0, pattern) if pattern else None
            now_phase, asked = phase(job_id), time.time()
            if later and runrecord.is_run(later):  # looked at after the phase: run.json comes before any end
                run_id, later = later, None
            if run_id:
                now_phase = runrecord.phase(runrecord.read(run_id) or {}, now_phase)
                events = runrecord.events(run_id, after) if after is not None else []
        if scan is not None:
            match = scan.run(now_phase == "ended", deadline)
        if match is not None:
            reason = "match"
        elif events and opts.get("until_event"):
            reason = "event"
        elif now_phase in wanted:
            reason = "phase"
        elif now_phase == "ended":
            reason = "ended"  # will never change again: no wanted phase can come
        elif time.time() >= deadline:
            reason = "timeout"
        else:
            time.sleep(POLL_S)
            continue
        break
    facts = job_facts.facts(job_id, opts.get("progress_regex"))
    size = logscan.size_of(log) or 0
    nxt = scan.pos if scan is not None else size
    start = min(start, nxt)
    text_start = max(start, nxt - most)
    doc = {"job": facts, "phase": now_phase, "reason": reason, "start": start, "next": nxt, "size": max(size, nxt),
           "text_start": text_start, "text_b64": base64.b64encode(logscan.read_range(log, text_start,
                                                                                    nxt - text_start)).decode("ascii")}
    if match is not None:
        doc["match"] = {"end": match[0], "line": match[1][:LINE_MAX].decode("utf-8", "replace")}
    if run_id and after is not None:
        doc["events"] = runrecord.events(run_id, after)
    return doc


def main(argv):
    return jobrecord.serve({"wait": wait}, argv)
