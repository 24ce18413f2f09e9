"""Run one operation on the hosts a caller named: one envelope, or one per host for several.

Shared by the CLI and the MCP server. A host's expected failure (unreachable, bad key, not found)
becomes that host's error envelope; the other hosts still answer.
"""

from .. import errors
from ..envelope import error_envelope, fleet
from ..remote.fanout import each_host
from ..remote.hostspec import split_hosts
from ..remote.targets import target_for


def on_hosts(command, host_value, op, identity=None):
    """op(target) -> envelope on every host in `host_value`; one doc, or a fleet doc."""
    hosts = split_hosts(host_value)

    def one(spec):
        target = target_for(spec, identity)
        try:
            doc = op(target)
        finally:
            target.close()
        doc["host"] = spec
        return doc

    outcomes = []
    for spec, value in each_host(hosts, one):
        if isinstance(value, errors.GpuopsError):
            value = error_envelope(command, value, host=spec)
        elif isinstance(value, Exception):
            raise value
        outcomes.append(value)
    if len(outcomes) == 1:
        return outcomes[0]
    bad = [d["host"] for d in outcomes if not d["ok"]]
    summary = f"{len(outcomes) - len(bad)}/{len(outcomes)} hosts ok" + (f"; not ok: {', '.join(bad)}" if bad else "")
    return fleet(command, ok=not bad, summary=summary, hosts=outcomes)


def one_host(command, host_value):
    """The single host a verb that works on one host at a time was given; UsageError otherwise."""
    hosts = split_hosts(host_value)
    if len(hosts) != 1:
        raise errors.UsageError(f"{command} takes one host at a time, got {len(hosts)}: {', '.join(hosts)}")
    return hosts[0]
