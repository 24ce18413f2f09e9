"""Every state a job can be reported in, as one table: the only place a state is defined.

    alive      the job is still in the system: it may yet print, progress or end
    terminal   it has ended and will not change again
    healthy    nothing to look at (`status --job` exits 0 on these)
    style      how a terminal shows it (rich markup style)
    slurm      Slurm's JobState names a Slurm job in that state is reported as (an engine maps its
               own states onto rows here, so no other module spells a state)

Derivation rules live in gpuops.jobs.state (box) and gpuops.jobs.slurmstate (Slurm); renderers,
the CLI help, MCP descriptions and triage read names and attributes from here, so a new state is
one row (plus its rule where one applies).
"""

from collections import namedtuple

# collections' named tuple, not typing's: importing typing costs every `status` ~5 ms of start-up.
# Its default is set the Python 3.6 way (namedtuple's defaults= is 3.7): the table is shipped to the
# box with triage's classifier (gpuops.onbox.BEYOND), where python3 may be 3.6.
State = namedtuple("State", ("name", "alive", "terminal", "healthy", "style", "meaning", "slurm"))
State.__new__.__defaults__ = ((),)


STATES = {s.name: s for s in (
    State("PENDING", True, False, True, "dim", "queued: not started yet (the scheduler's reason says why)",
          ("PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD")),
    State("STARTING", True, False, True, "cyan", "the job directory exists; the supervisor has not written its "
                                                 "start record yet (Slurm: its nodes are being configured)",
          ("CONFIGURING",)),
    State("RUNNING", True, False, True, "green", "the recorded process is alive (same pid, start time and boot); "
                                                 "under Slurm, the scheduler runs it (or is ending it)",
          ("RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING")),
    State("STALLED", True, False, False, "yellow", "running, but no progress line for longer than the stall "
                                                   "threshold"),
    State("PAUSED", False, False, True, "blue", "checkpointed and stopped by `gpuops pause`, its resources "
                                               "released; `gpuops resume` continues it (Slurm: also suspended)",
          ("SUSPENDED", "STOPPED")),
    State("COMPLETED", False, True, True, "green", "ended with exit code 0", ("COMPLETED",)),
    State("FAILED", False, True, False, "bold red", "ended with a non-zero exit code (Slurm: also a failed node, "
                                                    "boot or memory limit)",
          ("FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "SPECIAL_EXIT")),
    State("KILLED", False, True, False, "bold red", "ended by a signal"),
    State("CANCELLED", False, True, False, "magenta", "cancelled through the scheduler (scancel, gpuops stop)",
          ("CANCELLED", "REVOKED")),
    State("TIMEOUT", False, True, False, "bold red", "ended by the scheduler at its time limit (or deadline)",
          ("TIMEOUT", "DEADLINE")),
    State("PREEMPTED", False, True, False, "bold red", "the scheduler took its resources for other work; "
                                                       "retry it", ("PREEMPTED",)),
    State("VANISHED", False, True, False, "bold red", "gone without an exit record (reboot, pid reused, supervisor "
                                                      "killed; Slurm: forgotten by the scheduler)"),
    State("UNREACHABLE", None, False, False, "yellow", "the host could not be asked; says nothing about the job"),
    State("DEGRADED", True, False, False, "bold yellow", "a gang (one job across boxes) with a node ended or gone "
                                                         "while others still run: it cannot finish as launched"),
)}

PENDING, STARTING, RUNNING, STALLED, PAUSED = "PENDING", "STARTING", "RUNNING", "STALLED", "PAUSED"
COMPLETED, FAILED, KILLED, VANISHED, UNREACHABLE = "COMPLETED", "FAILED", "KILLED", "VANISHED", "UNREACHABLE"
DEGRADED = "DEGRADED"
CANCELLED, TIMEOUT, PREEMPTED = "CANCELLED", "TIMEOUT", "PREEMPTED"

NAMES = tuple(STATES)
ALIVE = tuple(n for n, s in STATES.items() if s.alive)
TERMINAL = tuple(n for n, s in STATES.items() if s.terminal)
HEALTHY = tuple(n for n, s in STATES.items() if s.healthy)
_SLURM = {word: n for n, s in STATES.items() for word in s.slurm}


# What the box can tell of a job without deriving its state (gpuops.onbox.job_wait waits on these).
PHASES = {PENDING: "starting", STARTING: "starting", RUNNING: "alive", STALLED: "alive", PAUSED: "paused"}
PHASES.update({n: "ended" for n in TERMINAL})


def from_slurm(word):
    """The state a Slurm JobState (as scontrol, squeue or sacct print it: 'CANCELLED by 0',
    'PENDING') is reported as, or None for a word Slurm does not use."""
    word = str(word or "").strip().split(" ")[0].rstrip("+").upper()
    return _SLURM.get(word)


def slurm_phases():
    """{Slurm JobState: phase} for the on-box code, which may not spell states itself."""
    return {word: PHASES[name] for word, name in _SLURM.items()}


def style(name) -> str:
    s = STATES.get(name)
    return s.style if s else ""


def listing() -> str:
    """'PENDING, STARTING, ...' for help texts and tool descriptions."""
    return ", ".join(NAMES)
