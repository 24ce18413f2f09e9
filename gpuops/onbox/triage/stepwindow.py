"""What the recent step lines say, read once at the end of the scan: the step time, each task's
last step, and the wall-clock time of the last step (from its own line, the time printed before
it, or the last time of an earlier chunk counted forward by the steps since)."""

import re

from . import steps
from . import signatures as S
from . import timestamps
from .facts import MAX_TRACKED

TASK_RX = re.compile(S.TASK_PREFIX_PATTERN.encode("ascii"))


def task_of(buf, ls, le):
    """The task a line's prefix names ("3: ", "[rank3]:"), or None."""
    m = TASK_RX.match(buf[ls:min(le, ls + 48)])
    if not m:
        return None
    return int(m.group(1) or m.group(2))


def _stamp_at(f, win, pos):
    ls = win.rfind(b"\n", 0, pos) + 1
    le = win.find(b"\n", pos)
    found = timestamps.last_in(win, ls, len(win) if le < 0 else le, f.year_hint)
    return found[1].clock() if found else None


def read(f, form, index, win, fallback):
    """Fill f.step_time, f.steady_steps, f.task_last_steps and f.last_step_basis from `win`, the
    bytes that end with the last step line; `index` turns a Step into the 0-indexed step and
    `fallback` is (Stamp, step then) of the last time before the window, or None."""
    rows = [(st.start, index(st), st.seconds) for st in form.scan(win) if st.step is not None]
    if not rows:
        return
    first_seen = {}
    for pos, step, secs in rows:
        first_seen.setdefault(step, (pos, secs))
    first = f.first_step if f.first_step is not None else rows[0][1]
    events = [(step, secs, None) for _, step, secs in rows]
    if all(secs is None for _, _, secs in rows):
        # No `seconds:` on the lines: the time between the step lines' own stamps, as status
        # takes the time between their writes.
        events = [(step, None, _stamp_at(f, win, pos)) for pos, step, _ in rows[-steps.RECENT_STEPS:]]
    f.step_time = steps.step_time(events, first)
    if f.step_time is not None:
        f.steady_steps = len({e[0] for e in steps.steady(events, first)})
    for pos, step, _ in rows:
        ls = win.rfind(b"\n", 0, pos) + 1
        t = task_of(win, ls, min(len(win), ls + 48))
        if t is not None and (t in f.task_last_steps or len(f.task_last_steps) < MAX_TRACKED):
            f.task_last_steps[t] = step
    last_pos = rows[-1][0]
    ls = win.rfind(b"\n", 0, last_pos) + 1
    on_line = timestamps.last_in(win, ls, len(win), f.year_hint)
    if on_line:
        f.last_step_basis = (on_line[1], 0.0, 0)
        return
    before = timestamps.last_before(win, ls, f.year_hint)
    if before and form.counts:
        # A bar is redrawn, not printed once per step: count the steps done since the time.
        tpos, stamp = before
        done = [step for pos, step, _ in rows if pos < tpos and step is not None]
        f.last_step_basis = (stamp, 0.0, f.last_step - (done[-1] if done else -1))
    elif before:
        tpos, stamp = before
        tle = win.find(b"\n", tpos)
        later = sum(secs or 0.0 for pos, secs in first_seen.values() if pos > tle)
        f.last_step_basis = (stamp, later, 0)
    elif fallback:
        stamp, step_then = fallback
        if step_then is None:
            steps_after = f.last_step - (f.first_step or 0) + 1
        else:
            steps_after = max(0, f.last_step - step_then)
        f.last_step_basis = (stamp, 0.0, steps_after)
