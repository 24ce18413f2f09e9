"""`fleet`: every rented box at once: GPUs, VRAM, utilisation, jobs, disk, uptime, idle money."""

from . import spinner
from .common import run
from .flags import verb


@verb("fleet")
def fleet(c, host, fleet, identity, window, watch, json) -> None:
    """Show every box at once: GPUs, VRAM, utilisation, jobs, disk headroom, and money spent idle.

    Each box is asked in one round trip, all in parallel; one that does not answer is a row with
    its error. Idle means no GPU utilisation in the window and no gpuops job running, since the
    later of the last job's end and the boot; the money is those hours times the box's usd_per_hour."""
    from .. import errors, fleetfile
    from ..ops import fleet as op
    from ..remote.hostspec import split_hosts
    from ..render import fleet as render

    def produce():
        span = window
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
