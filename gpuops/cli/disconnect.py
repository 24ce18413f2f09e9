"""`disconnect`: close the SSH connections gpuops keeps open between calls."""

from .common import run
from .flags import verb


@verb(help={
    "host": "close only this box's connection (an ssh_config alias or user@host:port; comma-separate several)",
    "identity": "the SSH private key file the connection was opened with",
    "json": "print one JSON envelope instead of text",
})
def disconnect(c, host=None, identity=None, json=False):
    """Close the SSH master connections kept between calls (all of them, or one box's)."""
    from ..ops.disconnect import disconnect as op

    run("disconnect", json, lambda: op(host, identity), lambda doc, out: out.print(doc["summary"], markup=False))


TASKS = (disconnect,)
