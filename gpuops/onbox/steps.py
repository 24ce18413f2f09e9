"""The progress policy: which lines are training steps, how long a step takes, when silence is a stall.

`gpuops status`, `logs`, `diagnose` and `triage` all judge progress with these rules, so a job
that status calls STALLED is one triage calls hanging, and the other way round.

Step lines. MaxText's `completed step: N, seconds: X` comes first (triage's procedure is written
for it and finds it with a literal search); then `step N` / `global_step=N`, `iter N` and tqdm's
`N/M [`. A user pattern (group 1 = step number) is tried before all of them. A `seconds: X` on a
step line is that step's own duration.

Step time. The mean of the lines' own `seconds:` over the most recent RECENT_STEPS steps, leaving
out warm-up (the first WARMUP_STEPS steps after the first step seen, when it is known): compile
and cache warm-up make the first steps slow. Without `seconds:` values, the time between the
first and last timed step lines divided by the steps between them. Only warm-up steps, or nothing
timed: unknown.

Stall. No new step for max(STALL_STEPS x step time, STALL_MIN_S) seconds, or STALL_NO_STEP_TIME_S
when the step time is unknown: checkpoint saves and evaluations pause steps for minutes, so a
shorter bar would cry wolf. Judged from when the last step line was written, never from the
log's mtime (a hung job keeps printing warnings).

Stdlib only: the on-box log scanner imports this too.
"""

import re

STEP_LITERAL = b"completed step: "
STEP_PATTERN = rb"completed step: (\d+)"
SECONDS_PATTERN = rb"seconds:\s*([0-9]+(?:\.[0-9]+)?)"
PATTERNS = (
    STEP_PATTERN,
    rb"(?i)\b(?:global[_ ])?step\b\s*[:=#]?\s*(\d+)",
    rb"(?i)\biter(?:ation)?\b\s*[:=#]?\s*(\d+)",
    rb"(\d+)/\d+ \[\d",
)

WARMUP_STEPS = 5
RECENT_STEPS = 1000
STALL_STEPS = 10.0
STALL_MIN_S = 600.0
STALL_NO_STEP_TIME_S = 1800.0

SECONDS_RX = re.compile(SECONDS_PATTERN)


def compile_patterns(user_regex=None):
    """Byte regexes, the user's first. Raises re.error on a bad user pattern."""
    sources = ([user_regex.encode("utf-8")] if user_regex else []) + list(PATTERNS)
    return [re.compile(s) for s in sources]


def seconds_on(line, start=0, end=None):
    """The `seconds: X` a step line carries between `start` and `end`, or None."""
    m = SECONDS_RX.search(line, start, len(line) if end is None else end)
    return float(m.group(1)) if m else None


def steady(events, first_step=None):
    """The (step, seconds, at) events that count for the step time: past warm-up, and among the
    most recent RECENT_STEPS step numbers. A line without a step number always counts."""
    numbered = sorted(set(e[0] for e in events if e[0] is not None))
    floor = numbered[-RECENT_STEPS] if len(numbered) > RECENT_STEPS else None
    warm = first_step + WARMUP_STEPS if first_step is not None else None
    return [e for e in events if e[0] is None or ((warm is None or e[0] >= warm) and (floor is None or e[0] >= floor))]


def step_time(events, first_step=None):
    """Seconds per step from (step, seconds, at) events (step or at may be None), or None.

    A line without a step number counts as one step."""
    events = list(events)
    kept = steady(events, first_step)
    if any(e[1] is not None for e in events):
        secs = [e[1] for e in kept if e[1] is not None]
        return sum(secs) / len(secs) if secs else None
    timed = [e for e in kept if e[2] is not None]
    if len(timed) < 2:
        return None
    first, last = timed[0], timed[-1]
    if first[0] is not None and last[0] is not None:
        steps = last[0] - first[0]
    else:
        steps = len(timed) - 1
    if steps <= 0:
        return None
    return max(0.0, (last[2] - first[2]) / steps)


def stall_after(step_time_s, factor=STALL_STEPS, floor=STALL_MIN_S):
    """Seconds of silence after the last step that make a running job stalled."""
    if step_time_s:
        return max(factor * step_time_s, floor)
    return max(STALL_NO_STEP_TIME_S, floor)


def stalled(last_step_at, step_time_s, now, factor=STALL_STEPS, floor=STALL_MIN_S):
    """True/False: has it gone too long without a step? None when that cannot be told."""
    if last_step_at is None or now is None:
        return None
    return now - last_step_at > stall_after(step_time_s, factor, floor)
