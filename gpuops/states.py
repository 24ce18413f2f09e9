"""Every state a job can be reported in, as one table: the only place a state is defined.

    alive      the job is still in the system: it may yet print, progress or end
    terminal   it has ended and will not change again
    healthy    nothing to look at (`status --job` exits 0 on these)
    style      how a terminal shows it (rich markup style)

Each engine maps its own state words onto these rows in its own module (gpuops.engines), and its
rule picks a row (gpuops.engines.statusrow calls it); renderers, the CLI help, MCP descriptions and
triage read names and attributes from here, so a new state is one row (plus its rule where one
applies).
"""

from collections import namedtuple

# collections' named tuple, not typing's: importing typing costs every `status` ~5 ms of start-up.
State = namedtuple("State", ("name", "alive", "terminal", "healthy", "style", "meaning"))


STATES = {s.name: s for s in (
    State("PENDING", True, False, True, "dim", "queued: not started yet (the scheduler's reason says why)"),
    State("STARTING", True, False, True, "cyan", "the job directory exists; its engine has not started it yet "
                                                 "(no start record, or its scheduler configures its nodes)"),
    State("RUNNING", True, False, True, "green", "the recorded process is alive (same pid, start time and boot), "
                                                 "or the job's scheduler runs it (or is ending it)"),
    State("STALLED", True, False, False, "yellow", "running, but no progress line for longer than the stall "
                                                   "threshold"),
    State("RETRYING", True, False, True, "yellow", "an attempt of a run ended and its supervisor on the box starts "
                                                   "the next one (launch --max-retries), after a backoff"),
    State("PAUSED", False, False, True, "blue", "checkpointed and stopped by `gpuops pause`, its resources "
                                               "released; `gpuops resume` continues it (or suspended by its scheduler)"),
    State("COMPLETED", False, True, True, "green", "ended with exit code 0"),
    State("FAILED", False, True, False, "bold red", "ended with a non-zero exit code (or, as its scheduler says, "
                                                    "a failed node, boot or memory limit)"),
    State("KILLED", False, True, False, "bold red", "ended by a signal"),
    State("CANCELLED", False, True, False, "magenta", "cancelled through its scheduler (gpuops stop, or the scheduler's own tools)"),
    State("TIMEOUT", False, True, False, "bold red", "ended by the scheduler at its time limit (or deadline)"),
    State("PREEMPTED", False, True, False, "bold red", "the scheduler took its resources for other work; "
                                                       "retry it"),
    State("VANISHED", False, True, False, "bold red", "gone without an exit record (reboot, pid reused, supervisor "
                                                      "killed, or forgotten by its scheduler)"),
    State("UNREACHABLE", None, False, False, "yellow", "the host could not be asked; says nothing about the job"),
    State("DEGRADED", True, False, False, "bold yellow", "a gang (one job across boxes) with a node ended or gone "
                                                         "while others still run: it cannot finish as launched"),
)}

PENDING, STARTING, RUNNING, STALLED, PAUSED = "PENDING", "STARTING", "RUNNING", "STALLED", "PAUSED"
RETRYING = "RETRYING"
COMPLETED, FAILED, KILLED, VANISHED, UNREACHABLE = "COMPLETED", "FAILED", "KILLED", "VANISHED", "UNREACHABLE"
DEGRADED = "DEGRADED"
CANCELLED, TIMEOUT, PREEMPTED = "CANCELLED", "TIMEOUT", "PREEMPTED"

NAMES = tuple(STATES)
ALIVE = tuple(n for n, s in STATES.items() if s.alive)
TERMINAL = tuple(n for n, s in STATES.items() if s.terminal)
HEALTHY = tuple(n for n, s in STATES.items() if s.healthy)


# What the box can tell of a job without deriving its state (gpuops.onbox.jobs.job_wait waits on these).
PHASES = {PENDING: "starting", STARTING: "starting", RUNNING: "alive", STALLED: "alive", PAUSED: "paused",
          RETRYING: "starting"}
PHASES.update({n: "ended" for n in TERMINAL})


def style(name: str) -> str:
    s = STATES.get(name)
    return s.style if s else ""


def listing() -> str:
    """'PENDING, STARTING, ...' for help texts and tool descriptions."""
    return ", ".join(NAMES)
