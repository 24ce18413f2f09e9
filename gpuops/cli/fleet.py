"""`fleet`: every rented box at once: GPUs, VRAM, utilisation, jobs, disk, uptime, idle money."""

from . import spinner
from .common import run
from .flags import seconds, verb


@verb(help={
    "host": "boxes to ask, comma-separated (an ssh_config alias or user@host:port each); a box the fleet file "
            "lists keeps its price and profile",
    "fleet": "a [fleet.NAME] group of ~/.config/gpuops/fleet.toml, or a fleet file of its own (default: every "
             "[[host]] of that file)",
    "identity": "SSH private key file to use",
    "window": "seconds over which GPU utilisation is sampled; any use means busy (default 2)",
    "watch": "redraw the table in place, with a row per GPU (utilisation and memory bars, its processes), asking "
             "again after each round, until Ctrl-C (then print the last one)",
    "json": "print one JSON envelope instead of the table",
})
def fleet(c, host=None, fleet=None, identity=None, window="2", watch=False, json=False):
    """Show every box at once: GPUs, VRAM, utilisation, jobs, disk headroom, and money spent idle.

    Each box is asked in one round trip, all in parallel; one that does not answer is a row with
    its error. Idle means no GPU utilisation in the window and no gpuops job running, since the
    later of the last job's end and the boot; the money is those hours times the box's usd_per_hour."""
    from .. import errors, fleetfile
    from ..ops import fleet as op
    from ..remote.hostspec import split_hosts
    from ..render import fleet as render

    def produce():
        span = seconds("--window", window, high=60)
        if host and fleet:
            raise errors.UsageError("give --host or --fleet, not both")
        if watch and json:
            raise errors.UsageError("--watch redraws a table for people; --json prints one envelope: pick one")
        boxes = fleetfile.for_hosts(split_hosts(host)) if host else fleetfile.boxes(fleet)
        asking = f"asking {len(boxes)} box{'es' if len(boxes) != 1 else ''}, sampling GPU use for {span:g} s"
        if watch:
            from ..render import console

            return render.watch(lambda: op.inventory(boxes, window_s=span, identity=identity, processes=True),
                                console(), asking)
        with spinner.show(asking):
            return op.inventory(boxes, window_s=span, identity=identity)

    run("fleet", json, produce, render.render, waiting=not watch and None)  # --watch draws its own screen


TASKS = (fleet,)
