"""The one JSON document every verb prints under --json.

Keys are fixed by SCHEMA_VERSION; agents rely on them, so add keys only with a version bump.
"""

import json

SCHEMA_VERSION = 1


def envelope(command, *, ok, summary, host=None, data=None, findings=(), next=(), error=None):
    doc = {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "ok": bool(ok),
        "summary": summary,
        "host": host,
        "data": data if data is not None else {},
        "findings": [f.as_dict() if hasattr(f, "as_dict") else f for f in findings],
        "next": list(next),
    }
    if error is not None:
        doc["error"] = error
    return doc


def fleet(command, *, ok, summary, hosts):
    """Several hosts in one document: each entry is a per-host envelope without the version."""
    return {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "ok": bool(ok),
        "summary": summary,
        "hosts": [{k: v for k, v in h.items() if k != "schema_version"} for h in hosts],
    }


def dumps(doc) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, default=str, ensure_ascii=False)
