"""One pass over a job log, as bytes, into bounded facts (gpuops.triage.facts) for classify.py.

Chunks come from a reader (gpuops.triage.readers). Bytes are never decoded as a whole: invalid
UTF-8, CRLF, bare-CR progress bars and NULs are just bytes.

Per chunk:
  * candidate lines: offsets where some signature matched, from the reader; each candidate line
    is re-read with every signature (matcher.LINE_RX), so both readers give the same facts. A
    line holding a known-harmless pattern is dropped whole.
  * step lines (the most frequent line by far) are not matched one by one. The log's step form
    (gpuops.onbox.steps: MaxText's `completed step: N`, a tqdm bar, `Step N/M`, ...) is picked
    from the first chunk that prints one; literal searches then find the first step, the step
    just before each candidate line (to tell an error that training survived from one that ended
    it), and the last step; the step times and the last step's wall-clock time come from a
    window of recent steps kept at the end (stepwindow.py). Forms that count steps done (a bar's
    N/M, Megatron's iteration N, HF's global_step, `Step N/M`: any form but MaxText's, unless the
    log's first step is 0) are turned into the procedure's 0-indexed steps (N - 1).
  * a traceback right after CPython's `Exception ignored in:` is no failure (an error at
    shutdown), and one after `Exception in thread` a soft one (that thread ended).
  * times are read only from bounded windows (see timestamps.py).
"""

import re

from .. import xid
from ..onbox import steps
from . import aux
from . import signatures as S
from . import stepwindow, tbcontext, timestamps
from .facts import MAX_TRACKED, Facts, Occ
from .matcher import LINE_RX, SIG_BY_ID

VIEW_BYTES = 64 << 10
STEP_WINDOW_BYTES = 2 << 20
TS_TAIL_BYTES = 64 << 10
TEXT_BYTES = 600
HEARTBEAT_LIST_BYTES = 4096
# Triage projects step numbers: a form without them (HF's logging dicts) gives it nothing.
FORMS = tuple(f for f in steps.FORMS if f.name != "hf-log")
_ACCUSED_RX = re.compile(S.ACCUSED_TASK_PATTERN.encode("ascii"))
_EXIT_RX = {k: re.compile(v.encode("ascii")) for k, v in S.EXIT_CODE_PATTERNS.items()}
_LINEHAS = {s.id: re.compile(s.rule[len("linehas:"):].encode("ascii"))
            for s in S.SIGNATURES if s.rule and s.rule.startswith("linehas:")}
_SIGNAL_RX = re.compile(rb"SIG[A-Z0-9]+|[Ss]ignal:? (\d+)")
_XID_CODE = re.compile(rb"NVRM: Xid \([^)]{0,40}\): (\d+)")
_KILLED_RX = re.compile(rb"(?:^|\s)\d+ Killed(?:\s|$)")
_HOST = re.compile(rb"host=(\S+)")
_SLURM_JOB = re.compile(rb"\*\*\* JOB (\d+) ")
_NUMBER = re.compile(rb"\d+")
_KERAS_EPOCH = re.compile(rb"Epoch (\d+)/(\d+)\s*$")
_KERAS_BAR = re.compile(rb"\s*(\d+)/(\d+) (?:\[=+\] - |- \d+s - |\xe2\x94\x81)")  # [===] , verbose=2 , ━


def _text(buf, ls, le, pos):
    """The part of a line around `pos`: one bare-CR segment (a tqdm bar redraws the line after
    each CR), at most TEXT_BYTES."""
    end = le - 1 if le > ls and buf[le - 1:le] == b"\r" else le
    start = max(ls, buf.rfind(b"\r", ls, pos) + 1)
    stop = buf.find(b"\r", pos, end)
    stop = end if stop < 0 else stop
    if stop - start <= TEXT_BYTES:
        return buf[start:stop]
    s = max(start, pos - TEXT_BYTES // 4)
    e = min(stop, s + TEXT_BYTES)
    return (b"..." if s > start else b"") + buf[s:e] + (b"..." if e < stop else b"")


def _word_start(buf, ls, pos):
    """No letter, digit or underscore right before `pos` on its line."""
    before = buf[pos - 1:pos] if pos > ls else b""
    return not (before.isalnum() or before == b"_")


_task = stepwindow.task_of


_NOTICE = ((b"Exception ignored in", "ignored"), (b"Exception in thread", "thread"))


def _after_notice(buf, ls):
    """'ignored' when the line before a traceback is CPython's `Exception ignored in: ...` (an error
    in a destructor or at interpreter exit: Python/errors.c, nothing ended), 'thread' after
    `Exception in thread ...` (Lib/threading.py: that thread ended, the program may go on)."""
    prev = buf[buf.rfind(b"\n", 0, max(0, ls - 1)) + 1:ls]
    return next((kind for notice, kind in _NOTICE if notice in prev), None)


def _body(buf, ls, le):
    """The line without its task prefix ("3: ", "[rank3]:") and surrounding blanks."""
    line = buf[ls:le].strip()
    m = stepwindow.TASK_RX.match(line)
    return line[m.end():].strip() if m else line


class Scanner:
    def __init__(self):
        self.f = Facts()
        self.line_base = 1
        self.cur_step = None
        self.prev_tail = b""  # the last STEP_WINDOW_BYTES of the stream before this chunk
        self.ts_carry = None
        self.window = None
        self.window_fallback = None
        self.final_tail = b""
        self.pieces = 0
        self.traceback_at = {}
        self.contexts = tbcontext.Contexts()
        self.form = None
        self.counts = False  # the form's numbers count steps done (N/M, 1-based): step N - 1

    # ------------------------------------------------------------------ step lines

    def _pick(self, data):
        if self.form is None:
            self.form = steps.pick(data, FORMS)
            self.f.step_form = self.form.name if self.form else None
            if self.form is not None:
                # Only MaxText's `completed step: N` is known to be 0-indexed; another form is read
                # as a count of steps done (Megatron's iteration N, HF's global_step, `Step N/M`)
                # unless the log's first step is 0.
                self.counts = steps.counts_done(self.form, self.form.first(data))

    def _index(self, found):
        """The procedure's 0-indexed step of a Step (N/M bars count steps done: N - 1; a bar at
        0/M has done none)."""
        if found is None or found.step is None:
            return None
        if self.counts:
            return found.step - 1 if found.step > 0 else None
        return found.step

    def _first(self, buf):
        return next((i for i in map(self._index, self.form.scan(buf)) if i is not None), None)

    def _last(self, buf, start=0, end=None):
        return self.form.last(buf, start, end) if self.form is not None else None

    # ------------------------------------------------------------------ pieces and chunks

    def begin_piece(self, first_line, data_start=b""):
        """A new contiguous piece (a head, then a tail, of a log read remotely)."""
        if self.pieces:
            # prev_tail is kept: it only feeds the recent-steps window, where step lines from
            # separate pieces still belong together.
            self._pick(data_start)
            first = self._first(data_start) if self.form is not None else None
            if first is not None:
                self.cur_step = first - 1
        self.pieces += 1
        self.f.pieces = self.pieces
        self.line_base = first_line

    def feed(self, chunk, candidates):
        f = self.f
        base = self.line_base
        if f.year_hint is None:
            found = timestamps.last_in(chunk, 0, min(len(chunk), TS_TAIL_BYTES))
            f.year_hint = timestamps.year_of(found[1]) if found else None
        self._pick(chunk)
        if f.first_step is None and self.form is not None:
            f.first_step = self._first(chunk)
        chunk_first_step = self.cur_step
        nl_pos = nl_count = 0
        step_pos, step_val = 0, self.cur_step
        covered = -1
        for p in candidates:
            if p < covered:
                continue
            ls = chunk.rfind(b"\n", 0, p) + 1
            le = chunk.find(b"\n", p)
            if le < 0:
                le = len(chunk)
            nl_count += chunk.count(b"\n", nl_pos, ls)
            nl_pos = ls
            if p > step_pos:
                # Up to the match, not the line start: a tqdm bar and what ended the run often
                # share one line (the bar never printed its newline).
                q = self._last(chunk, step_pos, p)
                if q is not None:
                    step_val = self._index(q)
                step_pos = p
            if le - ls <= VIEW_BYTES:
                vs, ve = ls, le
            else:
                vs, ve = max(ls, p - 512), min(le, p + VIEW_BYTES)
            covered = ve
            self._line(chunk, ls, le, vs, ve, base + nl_count, step_val)
        total_nl = chunk.count(b"\n")
        self._after_chunk(chunk, base, total_nl, chunk_first_step)
        self.line_base = base + total_nl
        f.bytes += len(chunk)

    def _after_chunk(self, chunk, base, total_nl, step_before_chunk):
        f = self.f
        last = self._last(chunk)
        if last is not None and self._index(last) is not None:
            self.cur_step = f.last_step = self._index(last)
            if last.total:
                f.form_total = last.total
            q = last.start
            qs = chunk.rfind(b"\n", 0, q) + 1
            qe = chunk.find(b"\n", q)
            qe = len(chunk) if qe < 0 else qe
            line_no = base + total_nl - chunk.count(b"\n", q)
            f.last_step_occ = Occ(line_no, _text(chunk, qs, qe, q), _task(chunk, qs, qe), f.last_step, S.STEP)
            start = qe - STEP_WINDOW_BYTES
            if start >= 0:
                self.window = chunk[start:qe]
            else:
                self.window = self.prev_tail[max(0, len(self.prev_tail) + start):] + chunk[:qe]
            self.window_fallback = self.ts_carry
        found = timestamps.last_in(chunk, max(0, len(chunk) - TS_TAIL_BYTES), None, f.year_hint)
        if found:
            pos, stamp = found
            f.year_hint = timestamps.year_of(stamp) or f.year_hint
            r = self._last(chunk, 0, pos)
            self.ts_carry = (stamp, self._index(r) if r is not None else step_before_chunk)
        if len(chunk) >= STEP_WINDOW_BYTES:
            self.prev_tail = chunk[-STEP_WINDOW_BYTES:]
        else:
            self.prev_tail = self.prev_tail[len(chunk) - STEP_WINDOW_BYTES:] + chunk
        tail = chunk[-TS_TAIL_BYTES:]
        if len(tail) < TS_TAIL_BYTES:
            tail = self.final_tail[len(tail) - TS_TAIL_BYTES:] + tail
        self.final_tail = tail

    # ------------------------------------------------------------------ one candidate line

    def _line(self, buf, ls, le, vs, ve, line_no, step_at):
        hits = []
        pos = vs
        while True:
            # Every start, not finditer's non-overlapping matches: `== JOB SUMMARY` must not be
            # hidden inside the banner match of `========== JOB SUMMARY`.
            m = LINE_RX.search(buf, pos, ve)
            if m is None:
                break
            sig = SIG_BY_ID[m.lastgroup]
            if sig.target == S.HARMLESS:
                return
            hits.append((sig, m))
            pos = m.start() + 1
        if not hits:
            return
        f = self.f
        task = _task(buf, ls, le)
        found = {}
        for sig, m in hits:
            target, detail = self._route(sig, m, buf, ls, le, vs, ve, step_at, line_no, task)
            if target is None:
                continue
            if target == "cancel":
                if f.cancel_hint is None and sig.id in S.STOP_SIGNAL_SIGNATURES and "train-timeout" not in f.classes:
                    f.cancel_hint = Occ(line_no, _text(buf, ls, le, m.start()), task, step_at, sig.id)
                continue
            if sig.id in S.FRAMEWORK_OF:
                aux.framework(f, sig.id, line_no)
            if target not in found:
                found[target] = (sig, m, detail)
            if sig.id in S.END_REPORT_SIGNATURES:
                # The launcher's report stays beside the class its exit code routes to.
                f.end_report = Occ(line_no, _text(buf, ls, le, m.start()), task, step_at, sig.id, detail)
                if target != sig.target and sig.target in S.CLASS_BY_NAME and sig.target not in found:
                    found[sig.target] = (sig, m, detail)
        for cls, (sig, m, detail) in list(found.items()):
            if sig.rule and sig.rule.startswith("yield:") and any(c in found for c in sig.rule[6:].split("|")):
                continue
            routed = self.contexts.route(cls, task, line_no)
            if routed != cls:
                if routed in found:
                    continue  # the line already says it: one occurrence
                cls = routed
            event = None
            if sig.id == "traceback":
                shutdown = _after_notice(buf, ls)
                if shutdown == "ignored":
                    continue
                if shutdown == "thread":
                    sig = S.THREAD_TRACEBACK
            if sig.id in S.BLOCK_HEADERS:
                self.contexts.opened(task)
                opened = self.traceback_at.get(task)
                nested = opened is not None and line_no - opened <= S.TRACEBACK_SPAN and sig.id == "cxx_terminate"
                if not nested and (task in self.traceback_at or len(self.traceback_at) < MAX_TRACKED):
                    self.traceback_at[task] = line_no
            elif S.CLASS_BY_NAME[cls].role == "root":
                tb = self.traceback_at.get(task)
                if tb is not None and line_no - tb <= S.TRACEBACK_SPAN:
                    event = tb
            occ = Occ(line_no, _text(buf, ls, le, m.start()), task, step_at, sig.id, detail, event)
            f.add(cls, occ)
            if cls == "heartbeat-timeout":
                for t in _ACCUSED_RX.findall(buf, ls, min(len(buf), le + HEARTBEAT_LIST_BYTES)):
                    if len(f.accused) < MAX_TRACKED:
                        f.accused.add(int(t))
            if cls in S.HEARTBEAT_TRUE_POSITIVE and task is not None and len(f.crash_by_task) < MAX_TRACKED:
                f.crash_by_task.setdefault(task, (cls, occ))

    def _route(self, sig, m, buf, ls, le, vs, ve, step_at, line_no, task):
        """(class | 'cancel' | None, detail) for one match; aux facts are recorded here."""
        rule, target = sig.rule, sig.target
        if rule == "killed":
            # Only the bare-CR segment holding the match: a progress bar left without a newline
            # often shares the line with the shell's notice.
            seg_start = max(ls, buf.rfind(b"\r", ls, m.start()) + 1)
            seg_end = buf.find(b"\r", m.end(), le)
            if _body(buf, seg_start, le if seg_end < 0 else seg_end) != b"Killed" and not _KILLED_RX.search(buf, vs, ve):
                return None, None
        elif rule == "word":
            if not _word_start(buf, ls, m.start()):
                return None, None
        elif rule == "cancel":
            return self._cancel(m, buf, ls, ve)
        elif rule and rule.startswith("linehas:"):
            if not _LINEHAS[sig.id].search(buf, vs, ve):
                return None, None
        elif rule == "exit":
            return self._exit(sig, m, buf, ve)
        elif rule == "signal":
            found = _SIGNAL_RX.search(buf, m.start(), ve)
            name = None
            if found:
                name = found.group(1).decode() if found.group(1) else found.group().decode()
            routes = S.SIGNAL_ROUTE_OVERRIDES.get(sig.id, {})
            return routes.get(name) or S.SIGNAL_ROUTES.get(name) or target, name
        elif rule == "banner":
            return self._banner(buf, ls, le)
        elif rule and rule.startswith("ctx:"):
            self.contexts.mark(task, rule[4:], line_no)
            return None, None
        elif rule and rule.startswith("after:"):
            if not self.contexts.has(task, rule[6:], line_no):
                return None, None
        elif rule == "keras_epoch":
            header = _KERAS_EPOCH.match(aux.strip_ansi(_body(buf, ls, le)))
            if header:
                self.f.keras_epoch = (int(header.group(1)), int(header.group(2)))
            return None, None
        elif rule == "keras_done":
            if not self._keras_done(buf, ls, le, m.start()):
                return None, None
        elif rule == "final_save":
            n = _NUMBER.search(buf, m.start(), ve)
            if n is None or self.f.max_epochs is None or int(n.group()) != self.f.max_epochs:
                return None, None
        elif rule == "xid":
            code = _XID_CODE.search(buf, m.start(), ve)
            if code is None:
                return target, None
            entry = xid.lookup(int(code.group(1)))
            return ("gpu-fault" if entry.fatal else "cuda-error"), f"Xid {entry.code} ({entry.name})"
        if target in S.CLASS_BY_NAME:
            return target, None
        aux.record(self.f, sig, m, buf, vs, ve, line_no, task, step_at, lambda pos: _text(buf, ls, le, pos))
        return None, None

    def _keras_done(self, buf, ls, le, pos):
        """A Keras bar drawn to its end (N/N) after the last epoch's header: fit() finished. The
        bar redraws after each CR, so only the segment holding the match counts."""
        epoch = self.f.keras_epoch
        if epoch is None or epoch[0] != epoch[1]:
            return False
        start = max(ls, buf.rfind(b"\r", ls, pos) + 1)
        bar = _KERAS_BAR.match(aux.strip_ansi(buf[start:pos]))
        return bar is not None and bar.group(1) == bar.group(2)

    def _exit(self, sig, m, buf, ve):
        found = _EXIT_RX[sig.id].search(buf, m.start(), ve)
        code = int(found.group(1)) if found else None
        if sig.id == "node_exit" and code is not None:
            host = _HOST.search(buf, m.start(), ve)
            name = host.group(1).decode("utf-8", "replace") if host else "?"
            if len(self.f.node_exits) < MAX_TRACKED:
                self.f.node_exits[name] = code
        routes = S.EXIT_ROUTES.get(sig.id, {})
        if code in routes:
            return routes[code], None if code is None else f"exit {code}"
        if code is not None and code < 0 and "negative" in routes:
            return routes["negative"], f"exit {code}"
        return sig.target, None if code is None else f"exit {code}"

    def _cancel(self, m, buf, ls, ve):
        if not _word_start(buf, ls, m.start()):
            return None, None
        line = buf[ls:ve]
        job = _SLURM_JOB.search(line)
        if job and self.f.slurm_id is None:
            self.f.slurm_id = int(job.group(1))  # slurmstepd names the job it cancels
        for reason, cls in S.CANCEL_REASONS:
            if reason in line:
                return cls, reason.decode()
        failed = any(S.CLASS_BY_NAME[c].role in ("root", "cause", "exit") for c in self.f.classes)
        if failed and b"*** STEP " in line:
            return None, None  # srun --kill-on-bad-exit ending the other tasks of a failed step
        return "cancelled", None

    def _banner(self, buf, ls, le):
        found = aux.banner(_body(buf, ls, le))
        if found is None:
            return None, None
        stage, verb, m = found
        if verb == b"TIMEOUT":
            return S.TIMEOUT_CLASS_BY_STAGE.get(stage, "stage-fail"), stage
        if verb == b"FAILED":
            code = aux.STATUS_EXIT.search(m.group("rest"))
            if code and int(code.group(1)) in S.CANCEL_EXITS:
                return "cancel", stage
            return "stage-fail", stage
        self.f.stage_now = stage
        return None, None

    # ------------------------------------------------------------------ end of the log

    def finish(self, truncated):
        f = self.f
        f.truncated = truncated
        f.lines = self.line_base if truncated else self.line_base - 1
        tail = self.final_tail
        found = timestamps.last_in(tail, 0, None, f.year_hint)
        f.end_stamp = found[1] if found else (self.ts_carry[0] if self.ts_carry else None)
        body = tail.rstrip(b"\r\n")
        if body:
            # The last bare-CR segment: a tqdm line starts with a CR, so its first one is empty.
            ls = max(body.rfind(b"\n"), body.rfind(b"\r")) + 1
            f.last_line = Occ(self.line_base - tail.count(b"\n", len(body)), _text(body, ls, len(body), ls))
        if self.window is not None:
            stepwindow.read(f, self.form, self._index, self.window, self.window_fallback)
        return f
