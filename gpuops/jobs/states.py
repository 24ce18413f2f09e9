"""Every state a job can be reported in, as one table: the only place a state is defined.

    alive      the job is still in the system: it may yet print, progress or end
    terminal   it has ended and will not change again
    healthy    nothing to look at (`status --job` exits 0 on these)
    style      how a terminal shows it (rich markup style)

Derivation rules live in gpuops.jobs.state; renderers, the CLI help, MCP descriptions and triage
read names and attributes from here, so a new state is one row (plus its rule where one applies).
"""

from typing import NamedTuple, Optional


class State(NamedTuple):
    name: str
    alive: Optional[bool]
    terminal: bool
    healthy: bool
    style: str
    meaning: str


STATES = {s.name: s for s in (
    State("PENDING", True, False, True, "dim", "queued: not started yet"),
    State("STARTING", True, False, True, "cyan", "the job directory exists; the supervisor has not written its "
                                                 "start record yet"),
    State("RUNNING", True, False, True, "green", "the recorded process is alive (same pid, start time and boot)"),
    State("STALLED", True, False, False, "yellow", "running, but no progress line for longer than the stall "
                                                   "threshold"),
    State("COMPLETED", False, True, True, "green", "ended with exit code 0"),
    State("FAILED", False, True, False, "bold red", "ended with a non-zero exit code"),
    State("KILLED", False, True, False, "bold red", "ended by a signal"),
    State("VANISHED", False, True, False, "bold red", "gone without an exit record (reboot, pid reused, supervisor "
                                                      "killed)"),
    State("UNREACHABLE", None, False, False, "yellow", "the host could not be asked; says nothing about the job"),
    State("DEGRADED", True, False, False, "bold yellow", "a gang (one job across boxes) with a node ended or gone "
                                                         "while others still run: it cannot finish as launched"),
)}

PENDING, STARTING, RUNNING, STALLED = "PENDING", "STARTING", "RUNNING", "STALLED"
COMPLETED, FAILED, KILLED, VANISHED, UNREACHABLE = "COMPLETED", "FAILED", "KILLED", "VANISHED", "UNREACHABLE"
DEGRADED = "DEGRADED"

NAMES = tuple(STATES)
ALIVE = tuple(n for n, s in STATES.items() if s.alive)
TERMINAL = tuple(n for n, s in STATES.items() if s.terminal)
HEALTHY = tuple(n for n, s in STATES.items() if s.healthy)


def style(name) -> str:
    s = STATES.get(name)
    return s.style if s else ""


def listing() -> str:
    """'PENDING, STARTING, ...' for help texts and tool descriptions."""
    return ", ".join(NAMES)
