"""What every engine's state rule shares (pure): a job's progress from the lines the box found,
its seconds per step, and what an exit code says of a signal."""

import signal

from ..onbox import steps


def since(now, then):
    if now is None or then is None:
        return None
    return max(0.0, float(now) - float(then))


def code_hint(code):
    """'exit 137 = 128+SIGKILL …' for codes a shell uses to report a child killed by a signal."""
    if code is None or not 128 < code < 128 + 65:
        return None
    try:
        name = signal.Signals(code - 128).name
    except ValueError:
        return None
    extra = " (often the OOM killer)" if name == "SIGKILL" else ""
    return "exit %d = 128+%s: a process inside the job was killed by %s%s" % (code, name, name, extra)


def progress(facts, now):
    """{last, step_time_s, silent_s} from the progress lines the box found in the job's log."""
    found = facts.get("progress") or {}
    events = found.get("events") or []
    out = {"last": None, "step_time_s": None, "silent_s": None}
    if found.get("regex_error"):
        out["regex_error"] = found["regex_error"]
    if not events:
        return out
    last = events[-1]
    at = last.get("at")
    if at is None and facts.get("log_size") is not None and last.get("end", 0) >= facts["log_size"] - 1:
        at = facts.get("log_mtime")  # the progress line is the log's last line: mtime is its time
    out["last"] = {"step": last.get("step"), "text": last.get("text"), "at": at}
    out["step_time_s"] = step_time(events, found.get("first_step"))
    out["silent_s"] = since(now, at)
    return out


def step_time(events, first_step=None):
    """Seconds per step of on-box progress events (dicts with step, seconds, at)."""
    return steps.step_time(((e.get("step"), e.get("seconds"), e.get("at")) for e in events), first_step)


def add_hint(row, note):
    row["hint"] = (row["hint"] + "; " + note) if row.get("hint") else note
