"""`disconnect`: close the SSH connections gpuops keeps open between calls."""

from .common import run
from .flags import verb


@verb("disconnect")
def disconnect(c, host, identity, json) -> None:
    """Close the SSH master connections kept between calls (all of them, or one box's)."""
    from ..ops.disconnect import disconnect as op

    run("disconnect", json, lambda: op(host, identity), lambda doc, out: out.print(doc["summary"], markup=False))


TASKS = (disconnect,)
