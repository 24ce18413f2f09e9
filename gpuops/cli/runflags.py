"""The run policy's flags on `launch` (gpuops.jobs.runpolicy: retries from the newest complete
checkpoint, the stall kill, the time limit, retention, alerts), added to the verb the way
gpuops.cli.engineflags adds each engine's: the body receives them in one dict, `run_flags`."""

from .engineflags import adds

HELP = {
    "max_retries": "attempts after the first when one fails for a transient reason (preemption, a lost node or "
                   "peer, an NCCL timeout, a GPU fault, a stall gpuops killed, a kill without OOM); default 0",
    "retry_on": "failure classes to retry, comma-separated, instead of the transient ones ('default' adds them): "
                "triage's class names, e.g. python-exception",
    "checkpoint_dir": "DIR[:GLOB] where the job writes checkpoints (relative to --workdir): each retry resumes from "
                      "the newest complete one",
    "resume_arg": "added to the command of each attempt that resumes: ARGS with {checkpoint}, e.g. "
                  "'--resume {checkpoint}' (without it the job reads $GPUOPS_RESUME_FROM)",
    "stall_after": "no progress line for this long (90, 15s, 10m): capture stacks and state, stop the attempt, "
                   "retry it as a hang",
    "max_runtime": "the whole run's limit, retries included (4h, 1h30m): then TIMEOUT, never retried",
    "keep_checkpoints": "keep the K newest complete checkpoints, delete older ones (never the newest complete), "
                        "and warn when the disk cannot hold the next",
    "notify": "a command run on the box for each event (retrying, stalled, resumed, completed, gave up, disk "
              "low), the event as JSON on its stdin, e.g. 'curl -d @- https://ntfy.sh/TOPIC'",
}


def takes():
    """Decorate a verb whose body ends with `run_flags=None` (after @verb)."""
    return adds("run_flags", HELP, dict.fromkeys(HELP))


def policy(flags):
    """The run policy the flags ask for, or None for a plain job; UsageError for one that cannot work."""
    from ..jobs import runpolicy

    return runpolicy.build(**{k: v for k, v in (flags or {}).items() if v not in (None, "")})
