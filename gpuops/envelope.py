"""The one JSON document every verb prints under --json.

Keys are fixed by SCHEMA_VERSION; agents rely on them, so add keys only with a version bump.
"""

import json
import re

from . import errors

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


# A file name that is not UTF-8 reaches a document as lone surrogates (surrogateescape), which no
# UTF-8 stream can print.
_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(doc) -> str:
    """The document as JSON text; a surrogate is written as its \\uXXXX escape, which reads back as
    the same string, and everything else as it is."""
    text = json.dumps(doc, indent=2, sort_keys=False, default=str, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group()), text)


def error_envelope(command, err, host=None):
    """The envelope of an expected failure (a GpuopsError): ok false, its kind and message."""
    return envelope(command, ok=False, summary=err.message, host=host, error=err.as_dict())


# When several hosts answer differently, the worst outcome decides the one exit code.
_WORST_FIRST = (errors.INTERNAL, errors.HOST, errors.NOT_FOUND, errors.REFUSED, errors.CHECK_FAILED, errors.USAGE,
                errors.OK)


def exit_code(doc) -> int:
    """The process exit code for an envelope (or a several-host document)."""
    if "hosts" in doc:
        codes = {exit_code(h) for h in doc["hosts"]}
        return next(c for c in _WORST_FIRST if c in codes)
    if doc.get("error"):
        return errors.code_for_kind(doc["error"].get("kind"))
    if doc.get("ok"):
        return errors.OK
    return doc.get("exit_code_hint", errors.CHECK_FAILED)
