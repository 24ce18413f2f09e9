"""A plan's identity: a digest of exactly what an action would touch (each process as pid + start
time, each file as its path) and until when the plan holds, so `--yes --plan ID` acts on the set that was shown, never on
one that changed since. The local side mints the id it shows with a dry run; the on-box action
recomputes it from the live set before it signals anything, in the same call.
"""

import hashlib
import json
import re
import time

_ID = re.compile(r"^([0-9a-f]{16})-([0-9]{1,12})$")
TTL_S = 600  # a plan shown longer ago than this is stale: apply a fresh one


def expires_at():
    """The expiry epoch of a plan minted now."""
    return int(time.time()) + TTL_S


def plan_id(action, subject: str, targets, expires) -> str:
    """'<digest>-<expiry epoch>' of `action` on `subject` touching `targets`: (pid, start_ticks)
    pairs for processes, relative paths for files; their order does not matter."""
    listed = sorted(json.dumps(t, separators=(",", ":")) for t in targets)
    body = json.dumps([action, subject, listed, int(expires)], separators=(",", ":"))
    return "%s-%d" % (hashlib.sha256(body.encode("utf-8")).hexdigest()[:16], int(expires))


def expiry(value):
    """The expiry epoch of a plan id, or None when `value` is not one."""
    m = _ID.match(value or "")
    return int(m.group(2)) if m else None
