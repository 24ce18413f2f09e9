"""Facts from lines that name no failure: the JOB SUMMARY's status, the projection's numbers
(PASSTHROUGH_ARGS, config dump), Ray dashboards, restores, completion markers, the framework.

`record(f, sig, m, buf, vs, ve, line_no, task, step_at, text)` is called by the Scanner for every
match of an AUX_* signature; `text(start)` gives the evidence text of the line around `start`.
"""

import re

from . import escapes
from . import signatures as S
from .facts import MAX_TRACKED, Occ

SUMMARY_SPAN_LINES = 200

_NUM = re.compile(rb"-?\d+")
_STATUS_RX = re.compile(rb"Status:[ \t]*(?P<word>[A-Z]+)(?P<rest>[^\r\n]*)")
STATUS_EXIT = re.compile(rb"(?:exit(?: code| status)?|rc|code)[ =:]*(-?\d+)")
_PT_STEPS = re.compile(rb"(?<![\w.])steps=(\d+)")
_PT_CKPT = re.compile(rb"(?<![\w.])enable_checkpointing=(\w+)")
_PT_PERIOD = re.compile(rb"(?<![\w.])checkpoint_period=(\d+)")
_CFG = re.compile(rb"Config param (checkpoint_period|steps|enable_checkpointing): *(\w+)")
_TUNNEL_L = re.compile(rb"-L ?(?:[\w.]+:)?(\d+):([\w.-]+):(\d+)")
_TRUE = (b"true", b"True", b"TRUE", b"1", b"yes")
# A harness stage banner, `== <Stage> VERB ...` (seed 002's `== ... FAILED (exit=`): at the start of
# the line (after a task prefix and a [timestamp]), or, for the verbs that end a stage, after any
# prefix a launcher or logger puts before it (a plain timestamp, a host, a level) and with any
# number of `=` (`=== Eval FAILED (exit=1) ===`). A stage name may hold `:`, `()`, `#`, `,`.
_STAMP_PREFIX = re.compile(rb"\[[^\]]{0,40}\]\s*")
_BANNER_RX = re.compile(rb"=*== (?P<stage>[A-Za-z0-9][A-Za-z0-9 ._/:()#,+@-]{0,80}?) (?P<verb>[A-Z]{2,})\b"
                        rb"(?P<rest>[^\r\n]*)")
_ANYWHERE = re.compile(rb"(?:^|(?<=[\s\]:]))=*== (?P<stage>[A-Za-z0-9][A-Za-z0-9 ._/:()#,+@-]{0,80}?) "
                       rb"(?P<verb>FAILED|TIMEOUT)\b(?P<rest>[^\r\n]*)")


def strip_ansi(data):
    """Terminal colour and cursor codes (tput / ANSI escapes) removed: a summary printed in colour
    must read as the same summary."""
    return escapes.strip(data)


def banner(line):
    """(stage, verb, match) of a harness stage banner on a line (its task prefix removed), or None."""
    body = strip_ansi(line)
    stamp = _STAMP_PREFIX.match(body)  # "[2025-03-02 10:00:00] == Training START"
    m = _BANNER_RX.match(body, stamp.end() if stamp else 0) or _ANYWHERE.search(body)
    if not m:
        return None
    return m.group("stage").decode("utf-8", "replace"), m.group("verb"), m


def record(f, sig, m, buf, vs, ve, line_no, task, step_at, text):
    target = sig.target
    view = buf[vs:ve]
    if target == S.AUX_SUMMARY:
        f.summary_marker = line_no
    elif target == S.AUX_STATUS:
        _status(f, view, line_no, text(m.start()))
    elif target == S.AUX_PASSTHROUGH:
        steps, ckpt, period = _PT_STEPS.search(view), _PT_CKPT.search(view), _PT_PERIOD.search(view)
        if steps and f.pt_steps is None:
            f.pt_steps = int(steps.group(1))
        if ckpt and f.pt_ckpt is None:
            f.pt_ckpt = ckpt.group(1) in _TRUE
        if period and f.pt_period is None:
            f.pt_period = int(period.group(1))
    elif target == S.AUX_CONFIG:
        _config(f, view)
    elif target == S.AUX_RAY:
        after = buf[m.end():m.end() + 1]
        if not after.isdigit():
            on = buf[m.end() - 1:m.end()] == b"1"
            f.ray = True if on else (f.ray or False)
    elif target == S.AUX_TUNNEL:
        specs = _TUNNEL_L.findall(view)
        if specs and f.tunnel is None:
            f.tunnel = Occ(line_no, text(m.start()), task)
            f.tunnel_specs = [(int(a), h.decode("utf-8", "replace"), int(b)) for a, h, b in specs]
    elif target == S.AUX_PROM:
        f.prometheus_port = int(_NUM.search(view, m.start() - vs + len("[Prometheus] Started on port")).group())
    elif target == S.AUX_SELF_DEATH:
        if len(f.self_death) < MAX_TRACKED:
            f.self_death.setdefault(task, Occ(line_no, text(m.start()), task))
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
        occ = Occ(line_no, text(m.start()), task, step_at, sig.id)
        if sig.id in S.WEAK_SUCCESS_SIGNATURES:
            f.weak_success = occ
        else:
            f.success = occ
    elif target == S.AUX_FRAMEWORK:
        framework(f, sig.id, line_no)
    elif target == S.AUX_RESTART:
        f.restart = Occ(line_no, text(m.start()), task, step_at, sig.id)
    elif target == S.AUX_PROGRESS:
        f.progress_marks.append(line_no)
    elif target == S.AUX_RANKS:
        if sig.id in ("ranks_nccl", "ranks_torchrun_omp"):
            f.collective = True
        else:
            count = _NUM.search(view, m.start() - vs)  # the first number the line names there
            if count:
                f.world = max(f.world or 0, int(count.group()))
    elif target == S.AUX_TOTAL:
        number = _NUM.search(view, m.start() - vs)
        f.max_epochs = int(number.group()) if number else f.max_epochs


def framework(f, sig_id, line_no):
    """Count the lines that show which framework printed the log (frameworks.shown decides)."""
    name = S.FRAMEWORK_OF.get(sig_id)
    if name is not None:
        f.frameworks[name] = f.frameworks.get(name, 0) + 1


def _status(f, view, line_no, text):
    if f.summary_marker is None or not 0 <= line_no - f.summary_marker <= SUMMARY_SPAN_LINES:
        return
    st = _STATUS_RX.search(strip_ansi(view))
    if st is None:
        return
    code = STATUS_EXIT.search(st.group("rest"))
    f.summary = {"line": line_no, "text": Occ(line_no, text), "word": st.group("word").decode(),
                 "exit": int(code.group(1)) if code else None}


def _config(f, view):
    cfg = _CFG.search(view)
    if not cfg:
        return
    name, value = cfg.group(1), cfg.group(2)
    if name == b"checkpoint_period" and f.cfg_period is None and value.isdigit():
        f.cfg_period = int(value)
    elif name == b"steps" and f.cfg_steps is None and value.isdigit():
        f.cfg_steps = int(value)
    elif name == b"enable_checkpointing" and f.cfg_ckpt is None:
        f.cfg_ckpt = value in _TRUE
