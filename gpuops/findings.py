"""A finding: one verdict about a host, with the numbers behind it and the fix."""

from collections import namedtuple

SEVERITIES = ("ok", "info", "warn", "fail")
_RANK = {name: i for i, name in enumerate(SEVERITIES)}


class Finding(namedtuple("Finding", ("id", "severity", "title", "evidence", "fix", "gotcha"))):
    """Immutable. A named tuple rather than a dataclass: preflight builds these on every call, and
    importing dataclasses would cost each call 15-30 ms of start-up (see gpuops.remote.hostspec)."""

    __slots__ = ()

    def __new__(cls, id, severity, title, evidence=None, fix=None, gotcha=None):
        if severity not in _RANK:
            raise ValueError(f"unknown severity {severity!r}")
        return super().__new__(cls, id, severity, title, {} if evidence is None else evidence, fix, gotcha)

    def as_dict(self) -> dict:
        """A copy the caller may change: the evidence's dicts and lists are copied too."""
        return _copied(self._asdict())


def _copied(value):
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def rank(severity: str) -> int:
    return _RANK[severity]


def worst_first(findings):
    return sorted(findings, key=lambda f: (-rank(f.severity), f.id))


def any_failed(findings) -> bool:
    return any(f.severity == "fail" for f in findings)
