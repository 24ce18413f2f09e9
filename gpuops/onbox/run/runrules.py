"""A run supervisor's rules, pure: what happens next, given the clock, the facts and the policy.
gpuops.onbox.run.runloop and gpuops.onbox.run.runwatch carry them out (spawn, signal, write, publish);
every rule here is unit-tested without a process (tests/test_runrules.py).

Times are the supervisor's monotonic clock (time.monotonic): a wall clock stepped by NTP or by
hand must neither end a healthy run at its --max-runtime nor take it for a stall.
"""

from typing import Optional

from ..triage import retrypolicy

# What ends a run, as its last event says (gpuops.onbox.run.runevents kinds), by its final class.
COMPLETED, STOPPED, TIMED_OUT, GAVE_UP = "completed", "stopped", "timed-out", "gave-up"
CHECKPOINTS = "checkpoints"  # a watch round's routine work: retention and the disk watch
STOPPED_WAITING = "gpuops stop ended the run while it waited to retry"


def end_kind(klass: Optional[str]) -> str:
    """The event that ends a run whose last attempt was judged `klass` and not retried."""
    return {None: COMPLETED, "cancelled": STOPPED, "timeout": TIMED_OUT}.get(klass, GAVE_UP)


def deadline(started: float, max_runtime_s: Optional[float]) -> Optional[float]:
    """When (on the monotonic clock) a run started at `started` reaches its --max-runtime; None
    without one."""
    return started + float(max_runtime_s) if max_runtime_s else None


def watch_action(stop: bool, peer_lost: Optional[str], now: float, run_deadline: Optional[float], stalled: bool,
                 checkpoint_due: bool) -> Optional[str]:
    """What one round of an attempt's watch does, in the order that protects the run: a `gpuops
    stop` first (it always wins), then a lost peer of the gang, then the run's time limit, then a
    stall, then the routine checkpoint look. One of retrypolicy's ended-by words, CHECKPOINTS, or
    None."""
    if stop:
        return retrypolicy.STOP
    if peer_lost:
        return retrypolicy.PEER_LOST
    if run_deadline is not None and now >= run_deadline:
        return retrypolicy.MAX_RUNTIME
    if stalled:
        return retrypolicy.STALL
    return CHECKPOINTS if checkpoint_due else None


def handover(stop_asked: bool, now: float, run_deadline: Optional[float]) -> Optional[dict]:
    """Whether the next attempt may start: None when it may; else the run's final decision
    ({class, why}). A stop asked at any moment before the start wins over the retry."""
    if stop_asked:
        return {"class": "cancelled", "why": STOPPED_WAITING}
    if run_deadline is not None and now >= run_deadline:
        return {"class": "timeout", "why": "the run reached its --max-runtime while it waited to retry"}
    return None


def progress_account(best: Optional[int], streak: int, attempt_best: Optional[int], progressed: bool) -> dict:
    """The run's best step and failure streak after an attempt that reached `attempt_best` (None
    when its progress lines carry no step numbers; `progressed`: it printed any). The streak (the
    attempts in a row without a new step) restarts at 1 after an attempt that went past the best:
    that failure is no crash loop. {went_on, best, streak, progressed_to} where progressed_to is
    what retrypolicy.decide takes (the new best step, True without numbers, None without
    progress)."""
    if attempt_best is None:
        went_on = bool(progressed)
        new_best = best
    else:
        went_on = best is None or attempt_best > best
        new_best = attempt_best if best is None else max(attempt_best, best)
    return {"went_on": went_on, "best": new_best, "streak": 1 if went_on else streak + 1,
            "progressed_to": ((True if attempt_best is None else attempt_best) if went_on else None)}
