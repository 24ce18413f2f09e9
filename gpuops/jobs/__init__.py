"""Detached jobs, the caller's side: pure rules over the facts the on-box code reports.

state    facts -> STARTING | RUNNING | STALLED | COMPLETED | FAILED | KILLED | VANISHED | UNREACHABLE
spec     flag values (--label k=v, --env K=V, --gpus, --secret-env) -> validated launch options
frames   decoder for the framed log stream (gpuops.onbox.logscan writes it)
lastseen the last state seen per host and job, so an unreachable host still says what it knew
"""
