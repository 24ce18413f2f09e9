"""Training progress projection, exactly as the triage procedure defines it.

Steps are 0-indexed: `completed step: N` means step N is done; `steps=T` runs steps 0..T-1, so a
run is complete at last_step == T - 1.

    first_step          the first completed step in the log; N > 0 means the run was restored
                        from checkpoint N - 1 (a restore resumes at the step after the checkpoint)
    checkpoint_period   `Config param checkpoint_period: N`, else checkpoint_period= in
                        PASSTHROUGH_ARGS, else 200 when enable_checkpointing=true was passed
    last_periodic_ckpt  the highest multiple of the period that is <= last_step; none when
                        last_step < period (the step-0 checkpoint of a fresh run is its starting
                        state, not a periodic checkpoint)
    steps_lost          last_step - last_periodic_ckpt; with no periodic checkpoint every step
                        this run trained is lost: last_step - first_step + 1
    step_time_s         mean `seconds:` of recent steps, leaving out warm-up steps (the first
                        five relative to the first step)
    expected_step_now   last_step + (now - time of the last step) / step_time, rounded down
    eta_s               (total_steps - 1 - last_step) * step_time

Values that do not apply are None: a completed run loses nothing and has nothing left to run; a
healthy running one (failed=False) has lost nothing either.
"""

import math

from .signatures import PROGRESS_KEYS


def checkpoint_period(cfg_period, arg_period, checkpointing_enabled, default_period):
    if cfg_period:
        return cfg_period
    if arg_period:
        return arg_period
    if checkpointing_enabled:
        return default_period
    return None


def project(*, first_step, last_step, total_steps, period, step_time, last_step_epoch, now_epoch, completed,
            failed=True):
    out = dict.fromkeys(PROGRESS_KEYS)
    out.update(first_step=first_step, last_step=last_step, total_steps=total_steps, checkpoint_period=period,
               step_time_s=round(step_time, 4) if step_time else None)
    if last_step is None:
        return out
    if period:
        out["last_periodic_ckpt"] = (last_step // period) * period if last_step >= period else None
    if completed:
        return out
    if period and failed:
        ckpt = out["last_periodic_ckpt"]
        out["steps_lost"] = last_step - ckpt if ckpt is not None else last_step - (first_step or 0) + 1
    if step_time and last_step_epoch is not None and now_epoch is not None:
        out["expected_step_now"] = int(math.floor(last_step + max(0.0, now_epoch - last_step_epoch) / step_time))
    if step_time and total_steps:
        out["eta_s"] = round(max(0, total_steps - 1 - last_step) * step_time, 1)
    return out
