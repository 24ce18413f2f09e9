"""One pass over a job log, as bytes, into bounded facts (gpuops.triage.facts) for classify.py.

Chunks come from an engine (gpuops.triage.engines). Bytes are never decoded as a whole: invalid
UTF-8, CRLF, bare-CR progress bars and NULs are just bytes.

Per chunk:
  * candidate lines: offsets where some signature matched, from the engine; each candidate line
    is re-read with every signature (matcher.LINE_RX), so both engines give the same facts. A
    line holding a known-harmless pattern is dropped whole.
  * step lines (`completed step: N`, the most frequent line by far) are not matched one by one:
    literal searches find the first step, the step just before each candidate line (to tell an
    error that training survived from one that ended it), and the last step; the step times
    and the last step's wall-clock time come from a window of recent steps kept at the end.
  * times are read only from bounded windows (see timestamps.py).
"""

import re

from .. import xid
from ..onbox import steps
from . import signatures as S
from . import timestamps
from .facts import MAX_TRACKED, Facts, Occ
from .matcher import LINE_RX, SIG_BY_ID, STEP_RX

VIEW_BYTES = 64 << 10
STEP_WINDOW_BYTES = 2 << 20
TS_TAIL_BYTES = 64 << 10
TEXT_BYTES = 600
HEARTBEAT_LIST_BYTES = 4096
SUMMARY_SPAN_LINES = 200

_STEP = steps.STEP_LITERAL
_NUM = re.compile(rb"-?\d+")
_TASK_RX = re.compile(S.TASK_PREFIX_PATTERN.encode("ascii"))
_ACCUSED_RX = re.compile(S.ACCUSED_TASK_PATTERN.encode("ascii"))
_EXIT_RX = {k: re.compile(v.encode("ascii")) for k, v in S.EXIT_CODE_PATTERNS.items()}
_LINEHAS = {s.id: re.compile(s.rule[len("linehas:"):].encode("ascii"))
            for s in S.SIGNATURES if s.rule and s.rule.startswith("linehas:")}
_SIGNAL_RX = re.compile(rb"SIG[A-Z0-9]+|[Ss]ignal:? (\d+)")
_XID_CODE = re.compile(rb"NVRM: Xid \([^)]{0,40}\): (\d+)")
_KILLED_RX = re.compile(rb"(?:^|\s)\d+ Killed(?:\s|$)")
_BANNER_RX = re.compile(rb"== (?P<stage>[A-Za-z0-9][A-Za-z0-9 ._/-]*?) (?P<verb>[A-Z]{2,})\b(?P<rest>[^\r\n]*)")
_STATUS_RX = re.compile(rb"Status:[ \t]*(?P<word>[A-Z]+)(?P<rest>[^\r\n]*)")
_STATUS_EXIT = re.compile(rb"(?:exit(?: code| status)?|rc|code)[ =:]*(-?\d+)")
_PT_STEPS = re.compile(rb"(?<![\w.])steps=(\d+)")
_PT_CKPT = re.compile(rb"(?<![\w.])enable_checkpointing=(\w+)")
_PT_PERIOD = re.compile(rb"(?<![\w.])checkpoint_period=(\d+)")
_CFG = re.compile(rb"Config param (checkpoint_period|steps|enable_checkpointing): *(\w+)")
_TUNNEL_L = re.compile(rb"-L ?(?:[\w.]+:)?(\d+):([\w.-]+):(\d+)")
_HOST = re.compile(rb"host=(\S+)")
_STAMP_PREFIX = re.compile(rb"\[[^\]]{0,40}\]\s*")
_TRUE = (b"true", b"True", b"TRUE", b"1", b"yes")


def _step_number(buf, pos):
    m = _NUM.match(buf, pos + len(_STEP))
    return int(m.group()) if m else None


def _text(buf, ls, le, pos):
    """The part of a line around `pos`: one bare-CR segment, at most TEXT_BYTES."""
    end = le - 1 if le > ls and buf[le - 1:le] == b"\r" else le
    start = max(ls, buf.rfind(b"\r", ls, pos) + 1)
    stop = buf.find(b"\r", pos, end)
    stop = end if stop < 0 else stop
    if stop - start <= TEXT_BYTES:
        return buf[start:stop]
    s = max(start, pos - TEXT_BYTES // 4)
    e = min(stop, s + TEXT_BYTES)
    return (b"..." if s > start else b"") + buf[s:e] + (b"..." if e < stop else b"")


def _task(buf, ls, le):
    m = _TASK_RX.match(buf[ls:min(le, ls + 48)])
    if not m:
        return None
    return int(m.group(1) or m.group(2))


def _body(buf, ls, le):
    """The line without its task prefix ("3: ", "[rank3]:") and surrounding blanks."""
    line = buf[ls:le].strip()
    m = _TASK_RX.match(line)
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

    # ------------------------------------------------------------------ pieces and chunks

    def begin_piece(self, first_line, data_start=b""):
        """A new contiguous piece (a head, then a tail, of a log read remotely)."""
        if self.pieces:
            # prev_tail is kept: it only feeds the recent-steps window, where step lines from
            # separate pieces still belong together.
            p = data_start.find(_STEP)
            if p >= 0 and _step_number(data_start, p) is not None:
                self.cur_step = _step_number(data_start, p) - 1
        self.pieces += 1
        self.f.pieces = self.pieces
        self.line_base = first_line

    def feed(self, chunk, candidates):
        f = self.f
        base = self.line_base
        if f.year_hint is None:
            found = timestamps.last_in(chunk, 0, min(len(chunk), TS_TAIL_BYTES))
            f.year_hint = timestamps.year_of(found[1]) if found else None
        if f.first_step is None:
            p = chunk.find(_STEP)
            if p >= 0:
                f.first_step = _step_number(chunk, p)
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
            if ls > step_pos:
                q = chunk.rfind(_STEP, step_pos, ls)
                if q >= 0:
                    step_val = _step_number(chunk, q)
                step_pos = ls
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
        q = chunk.rfind(_STEP)
        if q >= 0 and _step_number(chunk, q) is not None:
            self.cur_step = f.last_step = _step_number(chunk, q)
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
            r = chunk.rfind(_STEP, 0, pos)
            self.ts_carry = (stamp, _step_number(chunk, r) if r >= 0 else step_before_chunk)
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
            if target not in found:
                found[target] = (sig, m, detail)
        for cls, (sig, m, detail) in found.items():
            if sig.rule and sig.rule.startswith("yield:") and sig.rule[len("yield:"):] in found:
                continue
            event = None
            if cls == "python-exception":
                if task in self.traceback_at or len(self.traceback_at) < MAX_TRACKED:
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
            if m.start() > ls and (buf[m.start() - 1:m.start()].isalnum() or buf[m.start() - 1:m.start()] == b"_"):
                return None, None
        elif rule == "training":
            if step_at is None:
                return None, None
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
        elif rule == "xid":
            code = _XID_CODE.search(buf, m.start(), ve)
            if code is None:
                return target, None
            entry = xid.lookup(int(code.group(1)))
            return ("gpu-fault" if entry.fatal else "cuda-error"), f"Xid {entry.code} ({entry.name})"
        if target in S.CLASS_BY_NAME:
            return target, None
        self._aux(sig, m, buf, ls, le, vs, ve, line_no, task)
        return None, None

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

    def _banner(self, buf, ls, le):
        body = _body(buf, ls, le)
        stamp = _STAMP_PREFIX.match(body)  # "[2025-03-02 10:00:00] == Training START"
        m = _BANNER_RX.match(body, stamp.end() if stamp else 0)
        if not m:
            return None, None
        stage = m.group("stage").decode("utf-8", "replace")
        verb = m.group("verb")
        if verb == b"TIMEOUT":
            return S.TIMEOUT_CLASS_BY_STAGE.get(stage, "stage-fail"), stage
        if verb == b"FAILED":
            code = _STATUS_EXIT.search(m.group("rest"))
            if code and int(code.group(1)) in S.CANCEL_EXITS:
                return "cancel", stage
            return "stage-fail", stage
        self.f.stage_now = stage
        return None, None

    def _aux(self, sig, m, buf, ls, le, vs, ve, line_no, task):
        f = self.f
        target = sig.target
        view = buf[vs:ve]
        if target == S.AUX_SUMMARY:
            f.summary_marker = line_no
        elif target == S.AUX_STATUS:
            if f.summary_marker is not None and 0 <= line_no - f.summary_marker <= SUMMARY_SPAN_LINES:
                st = _STATUS_RX.search(view)
                code = _STATUS_EXIT.search(st.group("rest")) if st else None
                f.summary = {"line": line_no, "text": Occ(line_no, _text(buf, ls, le, m.start())),
                             "word": st.group("word").decode() if st else None,
                             "exit": int(code.group(1)) if code else None}
        elif target == S.AUX_PASSTHROUGH:
            steps, ckpt, period = _PT_STEPS.search(view), _PT_CKPT.search(view), _PT_PERIOD.search(view)
            if steps and f.pt_steps is None:
                f.pt_steps = int(steps.group(1))
            if ckpt and f.pt_ckpt is None:
                f.pt_ckpt = ckpt.group(1) in _TRUE
            if period and f.pt_period is None:
                f.pt_period = int(period.group(1))
        elif target == S.AUX_CONFIG:
            cfg = _CFG.search(view)
            if cfg:
                name, value = cfg.group(1), cfg.group(2)
                if name == b"checkpoint_period" and f.cfg_period is None and value.isdigit():
                    f.cfg_period = int(value)
                elif name == b"steps" and f.cfg_steps is None and value.isdigit():
                    f.cfg_steps = int(value)
                elif name == b"enable_checkpointing" and f.cfg_ckpt is None:
                    f.cfg_ckpt = value in _TRUE
        elif target == S.AUX_RAY:
            after = buf[m.end():m.end() + 1]
            if not after.isdigit():
                on = buf[m.end() - 1:m.end()] == b"1"
                f.ray = True if on else (f.ray or False)
        elif target == S.AUX_TUNNEL:
            specs = _TUNNEL_L.findall(view)
            if specs and f.tunnel is None:
                f.tunnel = Occ(line_no, _text(buf, ls, le, m.start()), task)
                f.tunnel_specs = [(int(a), h.decode("utf-8", "replace"), int(b)) for a, h, b in specs]
        elif target == S.AUX_PROM:
            f.prometheus_port = int(_NUM.search(view, m.start() - vs + len("[Prometheus] Started on port")).group())
        elif target == S.AUX_SELF_DEATH:
            if len(f.self_death) < MAX_TRACKED:
                f.self_death.setdefault(task, Occ(line_no, _text(buf, ls, le, m.start()), task))
        elif target == S.AUX_RESTORE:
            if sig.id == "restore_step":
                step = _NUM.search(view, m.start() - vs + len("restoring from this run's directory step"))
                f.restore = ("restored", int(step.group()), line_no)
            else:
                f.restore = ("fresh", None, line_no)
        elif target == S.AUX_SLURM_ID:
            if f.slurm_id is None:
                f.slurm_id = int(_NUM.search(view, m.start() - vs + len("SLURM_JOB_ID=")).group())
        elif target == S.AUX_SUCCESS:
            if f.success is None:
                f.success = Occ(line_no, _text(buf, ls, le, m.start()), task)

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
            ls = body.rfind(b"\n") + 1
            f.last_line = Occ(self.line_base - tail.count(b"\n", len(body)), _text(body, ls, len(body), ls))
        if self.window is not None:
            self._window()
        return f

    def _window(self):
        """Step time, per-task last steps and the last step's wall-clock time from recent steps."""
        f, win = self.f, self.window
        rows = []
        for m in STEP_RX.finditer(win):
            end = win.find(b"\n", m.end())
            rows.append((m.start(), int(m.group(1)), steps.seconds_on(win, m.end(), len(win) if end < 0 else end)))
        if not rows:
            return
        first_seen = {}
        for pos, step, secs in rows:
            first_seen.setdefault(step, (pos, secs))
        first = f.first_step if f.first_step is not None else rows[0][1]
        events = [(step, secs, None) for _, step, secs in rows]
        f.step_time = steps.step_time(events, first)
        if f.step_time is not None:
            f.steady_steps = len({e[0] for e in steps.steady(events, first)})
        for pos, step, _ in rows:
            ls = win.rfind(b"\n", 0, pos) + 1
            t = _task(win, ls, min(len(win), ls + 48))
            if t is not None and (t in f.task_last_steps or len(f.task_last_steps) < MAX_TRACKED):
                f.task_last_steps[t] = step
        last_pos = rows[-1][0]
        ls = win.rfind(b"\n", 0, last_pos) + 1
        on_line = timestamps.last_in(win, ls, len(win), f.year_hint)
        if on_line:
            f.last_step_basis = (on_line[1], 0.0, 0)
            return
        before = timestamps.last_before(win, ls, f.year_hint)
        if before:
            tpos, stamp = before
            tle = win.find(b"\n", tpos)
            later = sum(secs or 0.0 for pos, secs in first_seen.values() if pos > tle)
            f.last_step_basis = (stamp, later, 0)
        elif self.window_fallback:
            stamp, step_then = self.window_fallback
            if step_then is None:
                steps_after = f.last_step - (f.first_step or 0) + 1
            else:
                steps_after = max(0, f.last_step - step_then)
            f.last_step_basis = (stamp, 0.0, steps_after)
