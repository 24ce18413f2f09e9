"""The progress policy: which lines are training steps, how long a step takes, when silence is a stall.

`gpuops status`, `logs`, `diagnose` and `triage` all judge progress with these rules, so a job
that status calls STALLED is one triage calls hanging, and the other way round.

Step lines (FORMS, in this order; status judges a log by the first of them it prints at all, so
the noise of a MaxText log, `iteration 1234` in a busy-wait warning, never passes for progress;
lines are read with their escape sequences removed, gpuops.onbox.triage.escapes). A run's supervisor
stalls by a rule built on these forms and more shapes (gpuops.onbox.run.progress: a count that moves,
a stronger form taking over when it moves):
    maxtext     `completed step: N, seconds: X` (triage's procedure is written for it)
    tqdm        a training progress bar `NN%|###  | N/M [elapsed<left, R it/s]`: HF Trainer's and
                Accelerate scripts' bars have no description, Lightning's reads `Epoch E: ` (its
                count restarts each epoch, so the step is E x M + N); bars of other work (loading
                checkpoint shards, validation, downloads) are not steps
    step        `step N`, `Step N/M`, `global_step=N`, `global step: N`
    iter        `iter N`, `iteration N`
    hf-log      HF Trainer's logging dicts `{'loss': .., 'epoch': ..}`: progress without a number
A user pattern (group 1 = step number) is tried before all of them. Forms that print N/M count
steps done (the bar at 3000/3000 has finished step 2999 of 0..2999): `counts` says so, and triage's
0-indexed projection takes N - 1. A step line's own duration is its `seconds: X`, or the inverse
of a bar's rate (`5.00it/s` is 0.2 s, `1.80s/it` 1.8 s).

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
from typing import Optional

STEP_LITERAL = b"completed step: "
STEP_PATTERN = rb"completed step: (\d+)"
SECONDS_PATTERN = rb"seconds:\s*([0-9]+(?:\.[0-9]+)?)"
_RATE = re.compile(rb"([0-9]+(?:\.[0-9]+)?)(it/s|s/it)")
_BAR = re.compile(rb"[ \t]*(?P<desc>[^\r\n|]{0,80}?)[ \t:]*\d{1,3}%\|[^|\r\n]{0,200}\|[ \t]*(?P<n>\d+)/(?P<m>\d+) \[")
_BAR_DESC = re.compile(rb"(?:Epoch (?P<epoch>\d+)(?:/\d+)?|Training|Train|train|Steps|steps|Iteration)?$")
_LINE_START = re.compile(rb"[^\r\n]*\Z")


WARMUP_STEPS = 5
RECENT_STEPS = 1000
STALL_STEPS = 10.0
STALL_MIN_S = 600.0
STALL_NO_STEP_TIME_S = 1800.0

SECONDS_RX = re.compile(SECONDS_PATTERN)


class Step:
    """One step line found: where its match starts and ends, the step number (None for a form
    without numbers, or a bar of other work), the total the line names, and the step's own
    duration. For the progress judge (gpuops.onbox.run.progress): `count`, what the line counts (a
    bar's N even where the step is E x M + N, or a bar of other work's N); `series`, which count it
    is (a bar's description and total: a validation bar counts apart from the training bar);
    `done`, whether the count reached the total the line names."""

    __slots__ = ("start", "end", "step", "total", "seconds", "count", "series", "done")

    def __init__(self, start, end, step, total: Optional[int]=None, seconds=None, count: Optional[int]=None, series=None, done=False) -> None:
        self.start, self.end, self.step, self.total, self.seconds = start, end, step, total, seconds
        self.count = step if count is None else count
        self.series, self.done = series, done


class Form:
    """A way of printing steps. `literal` is what a fast search looks for; `read(buf, pos, end)`
    turns a literal found at `pos` into a Step, or None when the line is not a step after all."""

    def __init__(self, name: str, literal, read, counts=False) -> None:
        self.name, self.literal, self.read, self.counts = name, literal, read, counts

    def scan(self, buf, start=0, end=None):
        """Every Step in buf[start:end], in order."""
        end = len(buf) if end is None else end
        pos = buf.find(self.literal, start, end)
        while pos >= 0:
            found = self.read(buf, pos, end)
            if found is not None:
                yield found
            pos = buf.find(self.literal, pos + 1, end)

    def last(self, buf, start=0, end=None):
        """The last Step in buf[start:end], or None (searched backwards: cheap when it is near)."""
        end = len(buf) if end is None else end
        pos = buf.rfind(self.literal, start, end)
        while pos >= 0:
            found = self.read(buf, pos, end)
            if found is not None:
                return found
            pos = buf.rfind(self.literal, start, pos)
        return None

    def first(self, buf, start=0, end=None):
        return next(self.scan(buf, start, end), None)

    def search(self, data):
        """The first Step in data (a regex's search, for callers that take patterns)."""
        return self.first(data)


def line_end(buf, pos, end):
    """Where the line (or the bar's draw) holding `pos` ends: at \n, at \r, or at `end`."""
    stop = len(buf) if end is None else end
    for sep in (b"\n", b"\r"):
        found = buf.find(sep, pos, stop)
        if found >= 0:
            stop = found
    return stop


def seconds_on(line, start=0, end=None):
    """The `seconds: X` a step line carries between `start` and `end`, or None."""
    m = SECONDS_RX.search(line, start, len(line) if end is None else end)
    return float(m.group(1)) if m else None


def _rate_seconds(buf, start, end):
    m = _RATE.search(buf, start, end)
    if not m or float(m.group(1)) <= 0:
        return None
    value = float(m.group(1))
    return round(1.0 / value, 6) if m.group(2) == b"it/s" else value


def _regex_form(name: str, pattern, literal, counts=False):
    rx = re.compile(pattern)

    def read(buf, pos, end, rx=rx):
        seg = max(buf.rfind(b"\n", 0, pos), buf.rfind(b"\r", 0, pos)) + 1
        stop = line_end(buf, pos, end)
        m = rx.search(buf, max(seg, pos - 16), stop)
        if m is None or m.start() > pos + len(literal):
            return None
        total = int(m.group(2)) if m.lastindex and m.lastindex >= 2 and m.group(2) else None
        step = int(m.group(1)) if m.lastindex else None
        return Step(m.start(), m.end(), step, total, seconds_on(buf, m.end(), stop))

    return Form(name, literal, read, counts)


def read_bar(buf, pos, end, work=False):
    """A tqdm bar's Step: a training bar's, or with `work` a bar of any work (its step None when
    the work is not training)."""
    seg = max(buf.rfind(b"\n", 0, pos), buf.rfind(b"\r", 0, pos)) + 1
    if pos - seg > 120:
        return None
    stop = line_end(buf, pos, end)
    m = _BAR.match(buf, seg, stop)
    if m is None:
        return None
    label, count, total = m.group("desc").strip(), int(m.group("n")), int(m.group("m"))
    training = bar_step(label, count, total)
    if training is None and not work:
        return None  # a bar of other work: loading shards, validation, a download
    n, shown = training or (None, None)
    return Step(seg, m.end(), n, shown, _rate_seconds(buf, m.end(), stop), count, label[:80] + b"/%d" % total,
                count >= total)


def bar_step(label, n, total: int):
    """(step, total) of a bar labelled `label` at n of total, or None for a bar of other work
    (loading checkpoint shards, validation, a download). Lightning's count restarts each epoch
    (`Epoch 2`, its rich bar's `Epoch 2/9`), so its step is E x total + n."""
    desc = _BAR_DESC.match(label.strip())
    if desc is None:
        return None
    if desc.group("epoch") is not None:
        return int(desc.group("epoch")) * total + n, None
    return n, total


def _read_maxtext(buf, pos, end):
    m = _MAXTEXT.match(buf, pos)
    if m is None:
        return None
    stop = line_end(buf, m.end(), end)
    return Step(pos, m.end(), int(m.group(1)), None, seconds_on(buf, m.end(), stop))


_MAXTEXT = re.compile(STEP_PATTERN)
FORMS = (
    Form("maxtext", STEP_LITERAL, _read_maxtext),
    Form("tqdm", b"%|", read_bar, counts=True),
    # `(?!\.?\d)`: a number followed by a dot and digits is an id or a version (Slurm's
    # `*** STEP 5120.0`), not a step.
    _regex_form("step", rb"(?i)(?<![a-z0-9])(?:global[_ ])?step\b\s*[:=#]?\s*(\d+)(?!\.?\d)(?:\s*/\s*(\d+))?", b"tep"),
    _regex_form("step-upper", rb"(?<![A-Za-z0-9])STEP\b\s*[:=#]?\s*(\d+)(?!\.?\d)(?:\s*/\s*(\d+))?", b"STEP"),
    _regex_form("iter", rb"(?i)\biter(?:ation)?\b\s*[:=#]?\s*(\d+)", b"iter"),
    _regex_form("hf-log", rb"\{'loss': [^\r\n]*'epoch': ", b"{'loss': "),
)


class _UserForm(Form):
    """The user's --progress-regex (group 1 = step number): no literal to look for, so it is
    matched with the regex itself."""

    def __init__(self, regex) -> None:
        self.rx = re.compile(regex.encode("utf-8"))
        super().__init__("user", None, None)

    def scan(self, buf, start=0, end=None):
        end = len(buf) if end is None else end
        for m in self.rx.finditer(buf, start, end):
            step = None
            if m.groups():
                try:
                    step = int(m.group(1))
                except (TypeError, ValueError):
                    step = None
            yield Step(m.start(), m.end(), step, None, seconds_on(buf, m.end(), line_end(buf, m.end(), end)))

    def last(self, buf, start=0, end=None):
        found = None
        for found in self.scan(buf, start, end):
            pass
        return found


def compile_patterns(user_regex=None):
    """The forms to try, the user's first. Raises re.error on a bad user pattern."""
    return ([_UserForm(user_regex)] if user_regex else []) + list(FORMS)


def counts_done(form, first):
    """Whether `form`'s numbers count steps done, so step N is the procedure's 0-indexed N - 1: a
    bar's N/M always; any other form but MaxText's `completed step: N` (the one known to be
    0-indexed) unless the log's first step, `first`, is 0."""
    if form.counts:
        return True
    return form.name != "maxtext" and first is not None and first.step != 0


def pick(data, forms=FORMS):
    """The first form in `forms` that finds a step in data, or None."""
    return next((f for f in forms if f.first(data) is not None), None)


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
