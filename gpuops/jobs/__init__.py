"""Detached jobs, the caller's side: pure rules over the facts the on-box code reports.

states   every state a job can be in, as one table (names, alive/terminal/healthy, style, meaning)
state    facts -> a state row, by the rules (and the progress policy of gpuops.onbox.triage.steps)
spec     flag values (--label k=v, --env K=V, --gpus, --secret-env) -> validated launch options
platform what a platform profile changes about a launch (job dir, env, proxy hook)
frames   decoder for the framed log stream (gpuops.onbox.triage.logscan writes it)
lastseen the last state seen per host and job, so an unreachable host still says what it knew
"""
