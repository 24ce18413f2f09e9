"""The one JSON document every verb prints under --json.

Keys are fixed by SCHEMA_VERSION; agents rely on them, so add keys only with a version bump.
Version 2: `next` holds runnable steps ({"argv": [...], "why"?}, see step()), prose went to `advice`.
Version 3 (the keys of issues 26-30, under one bump): an `error` says whether the same call may
succeed later, `retryable`, and when waiting helps how long, `retry_after_s` (a box that did not
answer, a destination another transfer writes: kind `busy`); an error whose fix is a command has it
in `next` (the ssh-keygen -R of a changed host key), and a retryable one the same command again.
"""

import json
import re

from . import errors

SCHEMA_VERSION = 3
# the errors the same call may get past by waiting, and about how long to wait
RETRY_AFTER_S = {errors.Unreachable.kind: 15.0, errors.TimedOut.kind: 15.0, errors.Busy.kind: 30.0}
_KEYGEN = re.compile(r"ssh-keygen -R '([^']+)' -f (\S+)")


def step(*argv, why=None) -> dict:
    """One runnable next step: the exact argv of a command (gpuops or a tool on the box), with no
    placeholder and no comment in it; a step whose arguments are not known is left out, and what
    a person should consider goes to the envelope's `advice` instead."""
    item = {"argv": [str(a) for a in argv]}
    if why:
        item["why"] = why
    return item


def envelope(command, *, ok, summary, host=None, data=None, findings=(), next=(), advice=(), error=None):
    steps = list(next)
    for item in steps:
        if not (isinstance(item, dict) and isinstance(item.get("argv"), list) and item["argv"]):
            # a string would be prose or a placeholder an agent cannot run: it belongs in advice
            raise TypeError(f"{command}: a next step is envelope.step(*argv), not {item!r}")
    doc = {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "ok": bool(ok),
        "summary": summary,
        "host": host,
        "data": data if data is not None else {},
        "findings": [f.as_dict() if hasattr(f, "as_dict") else f for f in findings],
        "next": steps,
        "advice": list(advice),
    }
    if error is not None:
        doc["error"] = retry_said(error)
    return doc


def retry_said(error) -> dict:
    """An error document with `retryable` and, when waiting helps, `retry_after_s` (by its kind)."""
    kind = error.get("kind")
    out = dict(error, retryable=error.get("retryable", kind in RETRY_AFTER_S))
    if kind in RETRY_AFTER_S:
        out.setdefault("retry_after_s", RETRY_AFTER_S[kind])
    return out


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


# An operation sets this key when ok=false alone would give the wrong exit code (a dry run is 5, a
# wait that ran out of time 6); it decides the exit code and never leaves the process.
CODE_KEY = "exit_code_hint"


def public(doc) -> dict:
    """The document as callers see it: without CODE_KEY, at the top and in each host's entry."""
    out = {k: v for k, v in doc.items() if k != CODE_KEY}
    if isinstance(out.get("hosts"), list):
        out["hosts"] = [public(h) if isinstance(h, dict) else h for h in out["hosts"]]
    return out


def dumps(doc) -> str:
    """The public document as JSON text; a surrogate is written as its \\uXXXX escape, which reads
    back as the same string, and everything else as it is."""
    text = json.dumps(public(doc), indent=2, sort_keys=False, default=str, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group()), text)


def error_envelope(command, err, host=None):
    """The envelope of an expected failure (a GpuopsError): ok false, its kind and message, whether
    to retry (and when), and the fix when it is a command."""
    return envelope(command, ok=False, summary=err.message, host=host, error=err.as_dict(), next=fixes(err))


def fixes(err: "errors.GpuopsError") -> list:
    """The commands that are a failure's way on: the `ssh-keygen -R` that forgets a changed host
    key (only once the box is known to be re-provisioned), the `ssh -G` that shows what ssh makes
    of a host whose name does not resolve or whose key was refused."""
    fix = []
    keygen = _KEYGEN.search(err.message) if err.kind == errors.HostKeyChanged.kind else None
    if keygen:
        fix.append(step("ssh-keygen", "-R", keygen.group(1), "-f", keygen.group(2),
                        why="only if you know the box was re-provisioned: it forgets the key it had"))
    check = getattr(err, "check", ())
    if check:
        fix.append(step(*check, why="what ssh makes of this host (HostName, User, IdentityFile): fix its entry "
                                        "in the ssh config"))
    listing = getattr(err, "listing", ())
    if listing:
        fix.append(step(*listing, why="the jobs this box has records of"))
    return fix


def again(doc, argv, said="the same"):
    """`doc` with the same command (`argv`) as its next step when its error is retryable and no
    other step was given: what a busy destination or a box that did not answer asks for."""
    err = doc.get("error") or {}
    if not err.get("retryable") or doc.get("next"):
        return doc
    wait = err.get("retry_after_s")
    when = f", once the other transfer has ended (in about {wait:g}s)" if err.get("kind") == errors.Busy.kind \
        else f", in about {wait:g}s" if wait else ""
    return dict(doc, next=[step(*argv, why=said + when)])


# When several hosts answer differently, the worst outcome decides the one exit code.
_WORST_FIRST = (errors.INTERNAL,) + tuple(errors.INTERRUPTED.values()) + (
    errors.HOST, errors.NOT_FOUND, errors.REFUSED, errors.CHECK_FAILED, errors.WAIT_TIMED_OUT, errors.USAGE, errors.OK)


def exit_code(doc) -> int:
    """The process exit code for an envelope (or a several-host document)."""
    if "hosts" in doc:
        codes = {exit_code(h) for h in doc["hosts"]}
        return next(c for c in _WORST_FIRST if c in codes)
    if doc.get("error"):
        return errors.code_for_kind(doc["error"].get("kind"))
    if doc.get("ok"):
        return errors.OK
    return doc.get(CODE_KEY, errors.CHECK_FAILED)
