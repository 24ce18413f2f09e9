"""What counts as progress in a run's output: the rule its supervisor stalls by (gpuops.onbox.run.runwatch),
pure over the bytes the job printed and the times they were read.

Read as a person reads it. Escape sequences go first (gpuops.onbox.triage.escapes: loguru's and rich's
colours, Keras' bold count, rich's cursor moves), and a line ends at \\n, at \\r (tqdm redraws its
bar in place) and at a backspace (Keras' Progbar backs over its last draw). stdout and stderr
arrive in the one log, so a bar on either counts.

A count that moves. Every form below reads a count from a line: a step number, a bar's N of N/M,
a percentage, or, for a form without numbers, the line's text. Lines of one form and one series
(a bar's description and total: a validation bar counts apart from the training bar it
interrupts, each epoch's Lightning bar apart from the last) are progress when the count differs
from the one the series showed before. A bar redrawn with the same count (tqdm's monitor thread, a
refresh while the step hangs) or a warning repeated with the same number is not progress; the first
line of a series is not either (a lone "resuming from checkpoint at step 25" says nothing moved).
The user's --progress-regex is the user's word: a match counts when its group 1 moves, or, without
a group, every time it matches.

Forms, strongest first (FORMS): the user's; MaxText's `completed step: N`; tqdm bars of any work
(HF Trainer's and Accelerate's bare bars, Lightning's `Epoch E:` bar, its validation bar,
`Loading checkpoint shards`); the ━ bars of Keras 3's Progbar (`N/M ━━━`) and rich (Lightning's
RichProgressBar: `Epoch E/X ━━━ N/M`; rich's default columns: `━━━  33%`), Keras 2's `[====>...]`;
HF Trainer's logging dicts; JSON lines (`{"step": N}`, `"train/global_step": N`); `step N`,
`Step N/M`, `global_step=N` (DeepSpeed's `step=N, skipped=`); `STEP N`; `iteration N` (Megatron's
`iteration N/ M |`); and last a tqdm bar without a total (`123it [00:05, 24.6it/s]`). A line is
read by the strongest form that reads it.

Several forms in one log. A stronger form takes over the moment it moves: a run that printed
plain step lines and then a bar is judged by the bar. A weaker form's moves are not progress while
a stronger one holds: one that has moved and whose last count did not reach its total. So the
noise of a hung MaxText run (`rccl busy wait, iteration N`, N rising) never passes for progress,
while a preprocessing bar that ran to 100 % holds nothing and the step lines after it count. A
bar without a total, and the user's pattern, hold nothing.

The phase (`phase`): a run that has not moved yet is starting; one whose output is silent while
its checkpoint directory grows is saving a checkpoint, which is no stall however long it takes
(large models on network disks save for many minutes); silent past the limit with nothing growing,
stalled. A run whose last move took a count to its total (the bar at 1000/1000, `Step 300/300`)
has finished what it was counting: what follows (saving the final model, an evaluation, an upload,
torchrun's agent tearing down) prints nothing for as long as it takes, so it gets the start-up
allowance again, as a run that has not moved yet does. A hang right after a bar that ran to its
end is then found later, never a healthy run's last minutes killed.
"""

import collections
import functools
import hashlib
import re

from ..triage import escapes, steps

SEGMENTS_MAX = 4096     # lines of one read judged (the newest): a burst of output is progress already
LINE_MAX = 4096         # of a line, what is read: a progress line is short, and a longer one is judged by its head
_LINES = re.compile(rb"[\r\n]")
SERIES_MAX = 256        # series remembered: the box's output must not grow the supervisor without bound
TEXT_COUNT_BYTES = 200  # of a line without numbers, what is compared

STARTING, TRAINING, SAVING, STALLED = "starting", "training", "saving checkpoint", "stalled"
PHASES = (STARTING, TRAINING, SAVING, STALLED)

_GLYPH = rb"(?:\xe2\x94\x81|\xe2\x95\xb8|\xe2\x95\xba)"  # rich's and Keras 3's bar: U+2501, U+2578, U+257A
_KERAS = re.compile(rb"[ \t]*(?P<n>\d+)/(?P<m>\d+)(?: " + _GLYPH + rb"| \[[=>.]*\](?: - |$))")
_RICH = re.compile(rb"(?P<desc>[^\r\n]{0,80}?)[ \t]*" + _GLYPH + rb"+[ \t]+(?:(?P<n>\d+)/(?P<m>\d+|--)|(?P<pct>\d{1,3})%)")
_JSON = re.compile(rb'"(?:[\w./-]{0,40}[_/.])?(?:step|iter|iteration)"[ \t]*:[ \t]*(\d+)(?![\d.])')
_COUNT_BAR = re.compile(rb"(?:(?P<desc>[^\r\n|]{0,80}): )?(?P<n>\d+)(?:[A-Za-z]{1,10}| ?\|[^|\r\n]{0,200}\| \d+/\?) "
                        rb"\[(?:\d+:)?\d\d:\d\d")


def _segment(buf, pos):
    return max(buf.rfind(b"\n", 0, pos), buf.rfind(b"\r", 0, pos)) + 1


class _LineForm(steps.Form):
    """A form read from the whole line a literal is found in (`read(buf, seg, stop)`), once a line
    however often the literal occurs in it (a bar draws its glyph twenty times)."""

    def scan(self, buf, start=0, end=None):
        end = len(buf) if end is None else end
        pos = buf.find(self.literal, start, end)
        while pos >= 0:
            seg, stop = _segment(buf, pos), steps.line_end(buf, pos, end)
            found = self.read(buf, seg, stop)
            if found is not None:
                yield found
            pos = buf.find(self.literal, stop, end)


def _read_keras(buf, seg, stop):
    m = _KERAS.match(buf, seg, stop)
    if m is None:
        return None
    n, total = int(m.group("n")), int(m.group("m"))
    # Keras' count restarts each epoch (its `Epoch 3/10` line comes before the bar): no step number
    return steps.Step(seg, m.end(), None, count=n, series=b"keras/" + m.group("m"), done=n >= total)


def _read_glyph_bar(buf, seg, stop):
    keras = _read_keras(buf, seg, stop)
    if keras is not None:
        return keras
    m = _RICH.match(buf, seg, stop)
    if m is None:
        return None
    label = m.group("desc").strip()
    if m.group("pct") is not None:
        pct = int(m.group("pct"))
        return steps.Step(seg, m.end(), None, count=pct, series=b"rich%:" + label[:80], done=pct >= 100)
    n, m_ = int(m.group("n")), m.group("m")
    total = int(m_) if m_.isdigit() else None
    step = steps.bar_step(label, n, total) if total is not None else None
    return steps.Step(seg, m.end(), step[0] if step else None, step[1] if step else None, count=n,
                      series=b"rich:" + label[:80] + b"/" + m_, done=total is not None and n >= total)


def _read_json(buf, seg, stop):
    m = _JSON.search(buf, seg, stop)
    if m is None:
        return None
    return steps.Step(m.start(), m.end(), int(m.group(1)))


def _read_count_bar(buf, seg, stop):
    m = _COUNT_BAR.match(buf, seg, stop)
    if m is None:
        return None
    return steps.Step(seg, m.end(), None, count=int(m.group("n")), series=(m.group("desc") or b"").strip()[:80])


def _forms():
    """(form, holds) strongest first; see the module's docstring."""
    by_name = dict((f.name, f) for f in steps.FORMS)
    bars = steps.Form("bar", b"%|", functools.partial(steps.read_bar, work=True), counts=True)
    return ((by_name["maxtext"], True), (bars, True),
            (_LineForm("glyph-bar", b"\xe2\x94\x81", _read_glyph_bar), True),
            (_LineForm("keras", b"] - ", _read_keras), True),
            (by_name["hf-log"], True),
            (_LineForm("json", b'":', _read_json), True),
            (by_name["step"], True), (by_name["step-upper"], True), (by_name["iter"], True),
            (_LineForm("count-bar", b" [", _read_count_bar), False))


FORMS = _forms()


class Judge(object):
    """Progress in one attempt's output, fed as it grows (`feed`). `moved_at` is when a count last
    moved (None before the first move), `max_step` the highest step number a move showed."""

    def __init__(self, user_regex=None) -> None:
        user = [(steps.compile_patterns(user_regex)[0], False)] if user_regex else []
        self.forms = user + list(FORMS)
        self.user = bool(user)
        self.counts = collections.OrderedDict()  # (rank, series) -> the count it showed last
        self.moved = [None] * len(self.forms)    # rank -> when it last moved
        self.done = [False] * len(self.forms)    # rank -> whether its last count reached its total
        self.moved_at, self.max_step = None, None
        self.finished = False  # whether the last move took its count to its total

    def feed(self, data, now):
        """Judge the complete lines in `data`; True when a count moved."""
        moved = False
        for line in [l[:LINE_MAX] for l in _LINES.split(escapes.plain(data)) if l.strip()][-SEGMENTS_MAX:]:
            for rank, (form, _) in enumerate(self.forms):
                if form.literal is not None and form.literal not in line:
                    continue
                found = form.first(line)
                if found is not None:
                    moved = self._moves(rank, found, line, now) or moved
                    break
        return moved

    def _moves(self, rank, found, line, now) -> bool:
        count = found.count
        if count is None:
            count = hashlib.sha1(line[:TEXT_COUNT_BYTES]).hexdigest()
        key = (rank, found.series)
        before = self.counts.pop(key, None)
        self.counts[key] = count
        if len(self.counts) > SERIES_MAX:
            self.counts.popitem(last=False)
        self.done[rank] = bool(found.done)
        user_any = self.user and rank == 0 and found.count is None
        if not user_any and (before is None or before == count):
            return False
        if any(self.moved[r] is not None and not self.done[r] and holds for r, (_, holds) in enumerate(self.forms[:rank])):
            return False  # a stronger form holds: this one's moves are noise beside it
        self.moved[rank] = self.moved_at = now
        self.finished = _finished(found)
        if found.step is not None and (self.max_step is None or found.step > self.max_step):
            self.max_step = found.step
        return True


def _finished(found) -> bool:
    """Whether a move took its count to its total (a bar's last draw, `Step 300/300`)."""
    if found.done:
        return True
    # the line's own count against the total it names: a Lightning bar's step runs on past it (E x M + N)
    return found.total is not None and isinstance(found.count, int) and found.count >= found.total > 0


def phase(now, started_at, moved_at, limit_s, startup_s, saving_at=None, finished=False):
    """(phase, stalled) of an attempt at `now`: see the module's docstring. `limit_s` is the
    --stall-after limit (None: never stalled), `startup_s` the longer limit before the first move
    and after a move that `finished` its count, `saving_at` when its checkpoint directory was last
    seen to change."""
    since = moved_at if moved_at is not None else started_at
    silent = now - since
    bar = limit_s if moved_at is not None and not finished else max(limit_s or 0, startup_s)
    saving = saving_at is not None and saving_at >= since and now - saving_at <= (limit_s or bar)
    if saving:
        return SAVING, False
    if limit_s and silent > bar:
        return STALLED, True
    return (STARTING if moved_at is None else TRAINING), False


class Tracker(object):
    """One attempt's progress and phase: its output fed as it is read (`read`), judged each round
    (`check`). `saving` is a gpuops.onbox.run.savewatch.Watch of the checkpoint directory, or None; it
    is sampled only once the output has been silent for half the limit."""

    def __init__(self, started_at, limit_s, startup_s, user_regex=None, saving=None) -> None:
        self.judge = Judge(user_regex)
        self.started_at, self.limit_s, self.startup_s, self.saving = started_at, limit_s, startup_s, saving
        self.moved_at = None

    def read(self, data, now) -> bool:
        """Feed complete lines; True when a count moved."""
        if not self.judge.feed(data, now):
            return False
        self.moved_at = now
        if self.saving is not None:
            self.saving.reset()
        return True

    def check(self, now):
        """(phase, stalled) now."""
        since = self.moved_at if self.moved_at is not None else self.started_at
        saving_at = None
        if self.saving is not None and self.limit_s and now - since > min(self.limit_s, self.startup_s) / 2.0:
            saving_at = self.saving.sample(now)
        return phase(now, self.started_at, self.moved_at, self.limit_s, self.startup_s, saving_at,
                     self.judge.finished)
