"""Whether a failed attempt of a run is worth another: the pure decision the job's supervisor takes
after each attempt, from what it knows first hand and what triage read in the log.

The answer is a failure class in triage's vocabulary (gpuops/onbox/triage/classes.py: a --retry-on list
and triage's report speak of the same classes; tests/test_retrypolicy.py keeps every name used
here in that table). What the supervisor saw itself decides before the log is read:

    ended by `gpuops stop`          cancelled       never retried: the user ended the run
    ended by --max-runtime          timeout         never retried: the run's whole budget is spent
    ended by the stall kill         hang            transient: a collective stuck on a peer
    a peer of the gang was lost     node-fail       transient: the gang is retried as a whole
    OOM evidence on the box         oom-host        not retried: it would run out again
    a fatal Xid after launch        gpu-fault       transient: the next attempt may get a healthy GPU
    SIGKILL, no OOM evidence        unknown-death   transient: killed from outside
    SIGTERM from outside            preempted       transient: a spot reclaim or a node drain (the
                                                    job's own end, or `outside_signal`: one the
                                                    supervisor itself received and forwarded, as a
                                                    launcher like torchrun turns it into exit 1)
    SIGINT or SIGHUP from outside   cancelled       never: someone stopped it on purpose
    gone without an exit record     unknown-death   transient
then triage's class for the log (nccl-timeout, python-exception, oom-gpu ...; its oom-host without
OOM evidence on the box is a kill from outside, its cancelled without a gpuops stop a preemption),
then an application Xid (cuda-error), another signal (signal-kill), and any other exit
(subprocess-fail).

A checkpoint-load-fail is final, but for an attempt that resumed from a checkpoint while the run
has fallbacks left (`fallback`, MAX_FALLBACKS a run): then it is retried, and the supervisor
resumes the next attempt from the complete checkpoint before the one that failed.

OOM evidence is the box's, not the log's: the cgroup's OOM-kill counter rose during the attempt,
or a kernel OOM line names one of the job's processes. triage routes a bare SIGKILL to oom-host
because a log cannot tell more; the supervisor can, so a SIGKILL with the counter unchanged is a
kill from outside (and retried), as is one where nothing could be read either way (an OOM then
costs one more attempt; a spot kill not retried would cost the run).

Xid codes arrive with their kind (fatal / application / other) from gpuops/xid.py's table, which
the workstation ships in the run's policy: that module is not part of the on-box bundle.
"""

import random
import re
import signal

DEFAULT = "default"
TRANSIENT = frozenset(("preempted", "hang", "gpu-fault", "nccl-timeout", "heartbeat-timeout", "unknown-death",
                       "tpu-worker-lost", "node-fail"))
NEVER = frozenset(("cancelled", "timeout"))
# Every class this module names itself (the rest come from triage as they are).
OWN = frozenset(("cancelled", "timeout", "hang", "node-fail", "oom-host", "gpu-fault", "unknown-death", "preempted",
                 "cuda-error", "signal-kill", "subprocess-fail"))
MAX_RETRIES = 100
BACKOFF_BASE_S, BACKOFF_FACTOR, BACKOFF_CAP_S, BACKOFF_JITTER = 10.0, 2.0, 300.0, 0.1
AFTER_PROGRESS_S = 1.0  # the backoff after an attempt that went past the run's best step
LOAD_FAIL = "checkpoint-load-fail"  # retried, when the attempt resumed, from the checkpoint before
MAX_FALLBACKS = 2                   # ... at most this many times a run
_CLASS_NAME = re.compile(r"[a-z][a-z0-9-]{0,40}$")
# What ended an attempt when its own supervisor did (gpuops.onbox.run.runwatch; the exit record's ended_by).
STOP, MAX_RUNTIME, STALL, PEER_LOST = "stop", "max-runtime", "stall", "peer-lost"
ENDED_BY = (STOP, MAX_RUNTIME, STALL, PEER_LOST)


def parse_retry_on(text, known=None):
    """The classes a --retry-on value names: comma-separated class names, `default` for TRANSIENT.
    `known` (triage's CLASS_NAMES, on the workstation) refuses a name it lacks. ValueError with the
    reason for a name that is malformed, unknown, or never retried (cancelled, timeout)."""
    names = [w.strip().lower() for w in str(text or "").split(",") if w.strip()]
    if not names:
        raise ValueError("--retry-on names failure classes, comma-separated (or 'default')")
    out = set()
    for name in names:
        if name == DEFAULT:
            out |= TRANSIENT
        elif not _CLASS_NAME.match(name) or (known is not None and name not in known):
            listed = ", ".join(sorted(known)) if known is not None else "triage's class names"
            raise ValueError("--retry-on: %r is not a failure class; the classes are %s" % (name[:60], listed))
        elif name in NEVER:
            raise ValueError("--retry-on: %s is never retried (a stop or the run's max runtime ended it)" % name)
        else:
            out.add(name)
    return frozenset(out)


def check_max_retries(value):
    """--max-retries as an int in [0, MAX_RETRIES]; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES:
        raise ValueError("--max-retries takes a whole number from 0 to %d, not %r" % (MAX_RETRIES, value))
    return value


def ending_signal(facts):
    """The signal that ended the attempt: the recorded one, else the one a shell's 128+N exit code
    (or a negative Popen code) stands for; None for a plain exit."""
    if facts.get("signal"):
        return str(facts["signal"])
    code = facts.get("exit_code")
    if isinstance(code, int) and (128 < code < 160 or -64 < code < 0):
        number = code - 128 if code > 0 else -code
        try:
            return signal.Signals(number).name
        except ValueError:
            return "SIG%d" % number
    return None


def oom_evidence(facts):
    """('yes' | 'no' | 'unknown', why) from the box: the cgroup OOM-kill counter before and after
    the attempt, and kernel OOM lines naming one of the job's pids."""
    before, after = facts.get("oom_before"), facts.get("oom_after")
    pids = set(facts.get("job_pids") or [])
    named = [v for v in facts.get("kernel_oom") or [] if isinstance(v, dict) and v.get("pid") in pids]
    if named:
        v = named[0]
        return "yes", "the kernel's OOM killer killed %s (pid %s)" % (v.get("comm") or "a process", v.get("pid"))
    counted = isinstance(before, int) and isinstance(after, int)
    if counted and after > before:
        return "yes", "the cgroup's OOM-kill counter went from %d to %d" % (before, after)
    if counted:
        return "no", "the cgroup's OOM-kill counter did not move"
    if facts.get("kernel_readable") and pids:
        return "no", "no kernel OOM line names the job's processes"
    return "unknown", "neither the cgroup's OOM counter nor the kernel log could be read"


def _xids(facts, kind):
    return sorted(set(x.get("code") for x in facts.get("xids") or [] if isinstance(x, dict) and x.get("kind") == kind))


def failure_class(facts):
    """(class name or None for a clean end, why): the table in the module's docstring."""
    ended_by, sig, code = facts.get("ended_by"), ending_signal(facts), facts.get("exit_code")
    if ended_by == STOP:
        return "cancelled", "gpuops stop ended it"
    if ended_by == MAX_RUNTIME:
        return "timeout", "it reached the run's --max-runtime"
    if code == 0 and not sig and not facts.get("vanished"):
        return None, "it exited 0"
    if ended_by == STALL:
        return "hang", "no progress for the --stall-after limit: gpuops stopped it"
    if ended_by == PEER_LOST:
        return "node-fail", "a peer of its gang was lost: gpuops stopped it"
    oom, oom_why = oom_evidence(facts)
    if oom == "yes":
        return "oom-host", oom_why
    fatal = _xids(facts, "fatal")
    if fatal:
        return "gpu-fault", "Xid %s after launch: a GPU fault" % ", ".join(str(c) for c in fatal)
    if sig == "SIGKILL":
        return "unknown-death", "SIGKILL from outside, and no OOM: %s" % oom_why
    outside = facts.get("outside_signal")
    if sig == "SIGTERM" or outside == "SIGTERM":
        return "preempted", "SIGTERM from outside gpuops (a spot reclaim, a drain, a shutdown)"
    if sig in ("SIGINT", "SIGHUP") or outside in ("SIGINT", "SIGHUP"):
        return "cancelled", "%s from outside gpuops: stopped on purpose" % (sig or outside)
    if facts.get("vanished"):
        return "unknown-death", "its processes are gone and nothing recorded how it ended"
    if facts.get("triage_class") == "oom-host":
        # triage reads a worker's `exitcode: -9` as an OOM; the box saw none (a `kill -9` of a rank)
        return "unknown-death", "the log shows a process killed by SIGKILL, and no OOM: %s" % oom_why
    if facts.get("triage_class") == "cancelled":
        # torchrun turns the SIGTERM it got into exit 1 and a `got signal: 15` line: not gpuops' stop
        return "preempted", "the log shows it was stopped by a signal gpuops did not send"
    if facts.get("triage_class"):
        return str(facts["triage_class"]), "triage read it in the log"
    app = _xids(facts, "application")
    if app:
        return "cuda-error", "Xid %s after launch: the program's own GPU fault" % ", ".join(str(c) for c in app)
    if sig:
        return "signal-kill", "killed by %s" % sig
    return "subprocess-fail", "it exited %s" % code


def backoff_s(retry, base_s=BACKOFF_BASE_S, factor=BACKOFF_FACTOR, cap_s=BACKOFF_CAP_S, jitter=BACKOFF_JITTER,
              rand=random.random):
    """Seconds to wait before retry number `retry` (1 for the first): base x factor^(retry-1), at
    most cap_s, spread by +-jitter so the nodes of a fleet do not come back in step."""
    delay = min(cap_s, base_s * factor ** max(0, retry - 1))
    return round(max(0.0, delay * (1.0 + jitter * (2.0 * rand() - 1.0))), 3)


def schedule(max_retries, **kw):
    """The backoff before each retry, without jitter: what a user is shown before launching."""
    return [backoff_s(n, jitter=0.0, **kw) for n in range(1, max_retries + 1)]


def decide(facts, attempt, max_retries, retry_on=None, elapsed_s=None, max_runtime_s=None, streak=None,
           rand=random.random, base_s=BACKOFF_BASE_S, progressed_to=None, fallback=False):
    """Whether to start another attempt after attempt number `attempt` (1-based) ended as `facts`
    say. {retry, class, why, transient, attempt, attempts_left, backoff_s}; `why` explains the
    decision in one sentence, the class's reason first. `streak` counts the attempts in a row that
    failed without a new step (default: all of them): the backoff grows with it, so a run that
    crash-loops slows down while one that fails once a day after hours of progress comes back at
    once. `base_s` is the first backoff (the run policy's backoff_s). `progressed_to`, the step an
    attempt reached past the run's best before it failed (True for progress lines without step
    numbers), caps the backoff at AFTER_PROGRESS_S: that failure is no loop, and every second
    waited is a second of the run lost. `fallback`: the attempt resumed from a checkpoint and the
    run may still fall back from one, so a checkpoint-load-fail is retried (from the one before:
    the supervisor's choice) whatever --retry-on says."""
    retry_on = TRANSIENT if retry_on is None else frozenset(retry_on)
    klass, reason = failure_class(facts)
    left = max(0, int(max_retries) - (int(attempt) - 1))
    out = {"retry": False, "class": klass, "transient": klass in TRANSIENT, "attempt": attempt,
           "attempts_left": left, "backoff_s": None, "reason": reason}
    if klass is None:
        out["why"] = "completed: %s" % reason
    elif klass in NEVER:
        out["why"] = "%s (%s): never retried" % (reason, klass)
    elif klass not in retry_on and not (fallback and klass == LOAD_FAIL):
        out["why"] = "%s (%s): not a failure retried %s" % (
            reason, klass, "by default" if retry_on == TRANSIENT else "by --retry-on")
    elif left <= 0:
        out["why"] = "%s (%s): no retries left of %d" % (reason, klass, max_retries)
    else:
        wait = backoff_s(int(attempt if streak is None else max(1, streak)), base_s=base_s, rand=rand)
        since = ""
        if progressed_to is not None and progressed_to is not False:
            wait = min(wait, AFTER_PROGRESS_S)
            since = "it made progress%s, so " % ("" if progressed_to is True else " (to step %s)" % progressed_to)
        if max_runtime_s is not None and elapsed_s is not None and elapsed_s + wait >= max_runtime_s:
            out["why"] = "%s (%s): the run's --max-runtime leaves no time for another attempt" % (reason, klass)
        else:
            out.update(retry=True, backoff_s=wait,
                       why="%s (%s): %sretrying in %gs, %d of %d retries left after this one" % (
                           reason, klass, since, wait, left - 1, max_retries))
    return out
