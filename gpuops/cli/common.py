"""What every verb's task shares: host fan-out, error-to-envelope mapping, output, exit codes.

A task parses flags and calls an operation that returns an envelope (gpuops.envelope). This
module prints it (JSON for machines, rich for people) and leaves with the shared exit code.
Expected errors become one line on stderr (and an error envelope under --json); anything else
is a bug: exit 70, traceback only with GPUOPS_DEBUG=1.
"""

import os
import sys

from invoke.exceptions import Exit

from .. import errors
from ..envelope import dumps, envelope, fleet

_ORDER = (errors.INTERNAL, errors.HOST, errors.NOT_FOUND, errors.REFUSED, errors.CHECK_FAILED, errors.USAGE, errors.OK)


def error_envelope(command, err, host=None):
    return envelope(command, ok=False, summary=err.message, host=host, error=err.as_dict())


def exit_code_for(doc) -> int:
    if "hosts" in doc:
        codes = {exit_code_for(h) for h in doc["hosts"]}
        return next(c for c in _ORDER if c in codes)
    if doc.get("error"):
        return _KIND_CODES.get(doc["error"].get("kind"), errors.INTERNAL)
    if doc.get("ok"):
        return errors.OK
    return doc.get("exit_code_hint", errors.CHECK_FAILED)


_KIND_CODES = {
    cls.kind: cls.exit_code
    for cls in (
        errors.UsageError,
        errors.NotFound,
        errors.Refused,
        errors.Unreachable,
        errors.AuthFailed,
        errors.HostKeyChanged,
        errors.TimedOut,
        errors.PythonMissing,
    )
}


def on_hosts(command, host_value, op, identity=None):
    """Run op(target) -> envelope on every host in `host_value`; one doc, or a fleet doc."""
    from ..remote import each_host, split_hosts, target_for

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


def run(command, as_json, produce, human):
    """Produce the envelope, print it, exit with its code. `human(doc, console)` renders it."""
    try:
        doc = produce()
    except errors.GpuopsError as e:
        doc = error_envelope(command, e)
    except Exit:
        raise
    except KeyboardInterrupt:
        raise Exit(code=130)
    except Exception as e:
        if os.environ.get("GPUOPS_DEBUG"):
            raise
        doc = envelope(command, ok=False, summary=f"internal error: {type(e).__name__}: {e}",
                       error={"kind": "internal", "message": str(e)})
    code = exit_code_for(doc)
    if as_json:
        sys.stdout.write(dumps(doc) + "\n")
    else:
        from ..render import console, render_errors

        for d in doc.get("hosts") or [doc]:
            if not d.get("error"):
                human(d, console())
        render_errors(doc)
    raise Exit(code=code)
