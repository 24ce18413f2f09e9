"""`wait`: block until a job reaches a state, its log matches a regex, or the time is up.

The waiting happens on the box (gpuops.onbox.jobs.job_wait), one SSH call for the whole wait: it polls
the job's records there and answers within a poll of the change. The box knows phases (starting,
alive, ended); the state is derived here from the facts it returns, like `status` does. Only when
the phase was reached but the derived state is another one of the same phase (RUNNING asked,
STALLED derived) does this side ask again, a few seconds later, until the time is up.
"""

import base64
import binascii
import time

from .. import errors
from ..boundary import expect
from ..envelope import CODE_KEY, envelope
from ..engines import answers, statusrow
from .. import states
from ..units import duration
from .jobs import call, command_line, job_steps, state_now

TEXT_BYTES = 64 << 10
MAX_TEXT_BYTES = 1 << 20  # what the box sends at most (gpuops.onbox.jobs.job_wait.TEXT_MAX)
SSH_MARGIN_S = 20.0  # connect, ship, and the supervisor's exit record settling (box_stop.EXIT_SETTLE_S)
RECHECK_S = 2.0
PHASE = {name: phase for name, phase in states.PHASES.items() if name != states.PENDING}
TERMINAL = "terminal"
EVENT = "event"  # --until event: a run's next event (gpuops.onbox.run.runevents)
EVENTS_MAX = 50
_ANSWER = {"job": dict, "phase": str, "reason": str, "start": int, "next": int, "size": int, "text_start": int,
           "text_b64": str, "match": (dict, type(None))}


def parse_until(text: str):
    """'terminal', 'event' or 'STATE[,STATE]' -> the tuple of states (and EVENT) waited for;
    UsageError otherwise."""
    picked = []
    for word in (w.strip() for w in (text or TERMINAL).split(",")):
        names = states.TERMINAL if word.lower() == TERMINAL else (EVENT,) if word.lower() == EVENT else (word.upper(),)
        for name in names:
            if name not in PHASE and name != EVENT:
                raise errors.UsageError(f"--until {word!r}: wait for {TERMINAL}, {EVENT} (a run's next event) or any "
                                        f"of {', '.join(PHASE)}")
            if name not in picked:
                picked.append(name)
    if not picked:
        raise errors.UsageError(f"--until names no state; give {TERMINAL} or any of {', '.join(PHASE)}")
    return tuple(picked)


def wait(target, *, job, until=states.TERMINAL, log_regex=None, from_offset=None, timeout_s=60.0,
         max_bytes=TEXT_BYTES, jobs_dir=None, after_event=None):
    """The job's state once one of `until` (or a line matching `log_regex`) is seen, or at the
    timeout; with the log text before next_offset (at most `max_bytes`). For a run (a job launched
    with a run policy) the state is the run's: an attempt that ended while the run goes on is
    RETRYING; its events after `after_event` (a seq; default: those from the wait's start on) come
    in data.events, and EVENT in `until` returns at the first one."""
    began = time.monotonic()
    try:
        return _wait(target, job, until, log_regex, from_offset, timeout_s, max_bytes, jobs_dir, began, after_event)
    except KeyboardInterrupt:
        return _interrupted(target, job, until, log_regex, from_offset, timeout_s, began, jobs_dir, "SIGINT",
                            after_event)
    except errors.Interrupted as e:
        return _interrupted(target, job, until, log_regex, from_offset, timeout_s, began, jobs_dir, e.signal_name,
                            after_event)


def _wait(target, job, until, log_regex, from_offset, timeout_s, max_bytes, jobs_dir, began, after_event):
    deadline = began + float(timeout_s)
    phases = sorted({PHASE[s] for s in until if s != EVENT})
    offset, kept, first = from_offset, b"", None
    after = -1 if after_event is None else int(after_event)
    while True:
        left = max(0.0, deadline - time.monotonic())
        opts = {"job": job, "phases": phases, "regex": log_regex, "from_offset": offset, "timeout": left,
                "max_bytes": int(max_bytes), "jobs_dir": jobs_dir, "events_after": after, "until_event": EVENT in until}
        doc = _checked(call(target, "wait", opts, timeout_s=left + SSH_MARGIN_S), target.name, max_bytes)
        first = doc["start"] if first is None else first
        kept = (kept + doc["text"])[-int(max_bytes):] if max_bytes else b""
        row = statusrow.derive(doc["job"])
        reached = doc["reason"] in ("match", "event") or row["state"] in until
        over = row["state"] in states.TERMINAL  # nothing it waits for can come any more
        if reached or over or doc["reason"] != "phase" or time.monotonic() + RECHECK_S >= deadline:
            break
        offset = doc["next"]
        time.sleep(RECHECK_S)
    return _envelope(target.name, job, until, log_regex, doc, row, reached, kept, first,
                     time.monotonic() - began, jobs_dir)


def _interrupted(target, job, until, log_regex, from_offset, timeout_s, began, jobs_dir, signal_name: str,
                 after_event=None):
    """Stopped by a signal: where the job stands now (one more short call) and the command that
    waits on from here (the same log offset and event seq: nothing it had not shown is skipped);
    exit 130 or 143."""
    target.close()  # ends the wait on the box too
    row = state_now(target, job, jobs_dir)
    jid = (row or {}).get("job_id") or job
    waited = time.monotonic() - began
    said = f"{jid}: {row['state']}" if row else f"{jid}: state unknown (the box did not answer)"
    again = ["--until", ",".join(until) if set(until) != set(states.TERMINAL) else TERMINAL,
             "--timeout", f"{max(1.0, float(timeout_s) - waited):.0f}"]
    if log_regex:
        again += ["--log-regex", log_regex] + (["--from-offset", str(from_offset)] if from_offset is not None else [])
    if after_event is not None:
        again += ["--after-event", str(int(after_event))]
    data = {"job_id": jid, "state": row["state"] if row else states.UNREACHABLE, "until": list(until), "reached": False,
            "timed_out": False, "interrupted": signal_name, "waited_s": round(waited, 3)}
    if row:
        data["job"] = row
    out = envelope("wait", ok=False, summary=f"{said}; stopped waiting ({signal_name}) after {waited:.1f}s",
                   data=data, next=[command_line(target.name, "wait", jid, *again, jobs_dir=jobs_dir)])
    out[CODE_KEY] = errors.INTERRUPTED[signal_name]
    return out


def _checked(doc, host: str, max_bytes):
    """The box's wait answer once its shape and its offsets are gpuops's; the text decoded."""
    expect(doc, _ANSWER, host, "wait answer")  # the job's facts were checked by ops.jobs.call
    try:
        text = base64.b64decode(doc["text_b64"], validate=True)
    except (binascii.Error, ValueError):
        raise errors.BadAnswer(f"{host}: the box's wait answer is not gpuops's: its text is not base64") from None
    if not (0 <= doc["start"] <= doc["text_start"] <= doc["next"] <= doc["size"]) or \
            len(text) > min(int(max_bytes), MAX_TEXT_BYTES) or len(text) > doc["next"] - doc["text_start"]:
        raise errors.BadAnswer(f"{host}: the box's wait answer is not gpuops's: offsets {doc['start']}, "
                               f"{doc['text_start']}, {doc['next']} of {doc['size']} with {len(text)} bytes")
    if doc.get("match") is not None:
        expect(doc["match"], {"end": int, "line": str}, host, "wait answer's match")
    events = doc.get("events")
    if events is not None:
        if not isinstance(events, list) or len(events) > EVENTS_MAX:
            raise errors.BadAnswer(f"{host}: the box's wait answer is not gpuops's: its events are not a short list")
        for event in events:
            answers.run_event(event, host)
    return dict(doc, text=text)


def named(job, row):
    """The id a wait answers about: the run's, when it followed a run to its current attempt
    (asked by the run's id, a key or a name); else the job's own."""
    run = row.get("run") or {}
    return run["id"] if run.get("id") and job != row["job_id"] else row["job_id"]


def ran_for(row):
    """How long the job ran, or its run, attempts and backoffs included, once it ended; None before."""
    if row["state"] not in states.TERMINAL:
        return None
    run = row.get("run") or {}
    return run.get("duration_s") if run.get("ended") and run.get("duration_s") is not None else row.get("duration_s")


def _envelope(host: str, job, until, log_regex, doc, row, reached, kept, first, waited, jobs_dir):
    timed_out = not reached and row["state"] not in states.TERMINAL
    data = {"job_id": named(job, row), "state": row["state"], "until": list(until), "reached": reached,
            "timed_out": timed_out, "reason": "match" if doc["reason"] == "match" else
            ("state" if reached else ("timeout" if timed_out else "ended")),
            "new_text": kept.decode("utf-8", "replace"), "text_starts_at": doc["next"] - len(kept),
            "start_offset": first, "next_offset": doc["next"], "log_size": doc["size"],
            "waited_s": round(waited, 3), "job": row}
    if doc.get("match") is not None:
        data["match"] = doc["match"]
    if doc.get("events") is not None:
        data["events"] = doc["events"]
        if doc["reason"] == "event":
            data["reason"] = "event"
    jid, ran = data["job_id"], ran_for(row)
    if ran is not None:
        data["duration_s"] = round(ran, 3)
    wanted = "an end" if set(until) == set(states.TERMINAL) else "/".join(until)
    said = f"{jid}: {row['state']}"
    if row.get("exit_code") or row.get("signal"):  # a COMPLETED row's 0 goes without saying
        said += f" ({row.get('signal') or 'exit %d' % row['exit_code']})"
    if doc["reason"] == "match":
        summary = f"{said}; log line matched: {doc['match']['line'][:200]}"
    elif doc["reason"] == "event":
        last = doc["events"][-1]
        summary = f"{said}; run event {last['kind']}" + (f": {last['why'][:200]}" if last.get("why") else "")
    elif reached:
        summary = f"{said} after {duration(ran)}" if ran is not None else f"{said} after waiting {duration(waited)}"
    elif timed_out:
        summary = f"{said}; no {wanted} after {duration(waited)} (timed out)"
    else:
        summary = f"{said}; it ended, so {wanted} can no longer be reached"
    nxt = _next(host, jid, row, until, log_regex, doc["next"], timed_out, jobs_dir, doc.get("events"))
    out = envelope("wait", ok=reached, summary=summary, data=data, next=nxt)
    if timed_out:
        out[CODE_KEY] = errors.WAIT_TIMED_OUT
    return out


def _again(until, log_regex, offset: int, events) -> list:
    """The flags of a wait that goes on from where one stopped: its text from `offset` (not the
    newest bytes again), a run's events after the last one it returned (none returned twice)."""
    said = TERMINAL if set(until) == set(states.TERMINAL) else ",".join(until)
    words = ["--until", said] + (["--log-regex", log_regex] if log_regex else []) + ["--from-offset", str(offset)]
    if events:
        words += ["--after-event", str(events[-1]["seq"])]
    return words


def _next(host: str, jid, row, until, log_regex, offset: int, timed_out, jobs_dir, events=None) -> list:
    if timed_out:
        return [command_line(host, "wait", jid, *_again(until, log_regex, offset, events), jobs_dir=jobs_dir,
                             why="keep waiting, from where this wait stopped")]
    if row["state"] in states.TERMINAL:
        return job_steps(host, row, jobs_dir)
    logs = command_line(host, "logs", jid, "--from-offset", str(offset), jobs_dir=jobs_dir,
                        why="the log from where this wait stopped")
    if events:  # returned on a run's event, and the run goes on
        return [command_line(host, "wait", jid, *_again(until, log_regex, offset, events), jobs_dir=jobs_dir,
                             why="keep waiting, from where this wait stopped"), logs]
    return [logs]


def events(target, *, job: str, after_event: int = 0, jobs_dir: str | None = None) -> dict:
    """A run's events after `after_event` (a seq; 0: from its first), at once: a wait on its next
    event that does not wait. At most EVENTS_MAX come back, the oldest; `more` says the answer was
    full, so a call after its last seq may read others. A job that is not a run has none."""
    doc = wait(target, job=job, until=(EVENT,), timeout_s=0, max_bytes=0, jobs_dir=jobs_dir, after_event=after_event)
    data = doc.get("data") or {}
    if doc.get("error") or data.get("interrupted"):
        return doc
    if "events" not in data:
        return envelope("wait", ok=True, summary=f"{data['job_id']}: {data['state']}; not a run (launched without a "
                                                 "run policy), so it has no events",
                        data=dict(_events_data(data), events=[]), next=job_steps(target.name, data["job"], jobs_dir))
    found = data["events"]
    jid, now = data["job_id"], data["state"]
    last = found[-1]["seq"] if found else int(after_event or 0)
    more = len(found) >= EVENTS_MAX
    said = ", ".join(e["kind"] for e in found[-5:]) or "none"
    summary = f"{jid}: {now}; {len(found)} event(s) after {int(after_event or 0)}" + (
        f" (the latest: {said})" if found else "") + ("; more after the last" if more else "")
    if more:
        nxt = [command_line(target.name, "wait", jid, "--until", EVENT, "--after-event", str(last),
                            "--timeout", "0", jobs_dir=jobs_dir, why="the events after these")]
    elif now in states.TERMINAL:
        nxt = job_steps(target.name, data["job"], jobs_dir)
    else:
        nxt = [command_line(target.name, "wait", jid, "--until", EVENT, "--after-event", str(last),
                            jobs_dir=jobs_dir, why="returns at the run's next event")]
    return envelope("wait", ok=True, summary=summary,
                    data=dict(_events_data(data), events=found, last_event=last, more=more), next=nxt)


def _events_data(data: dict) -> dict:
    return {k: data[k] for k in ("job_id", "state", "job") if k in data}
