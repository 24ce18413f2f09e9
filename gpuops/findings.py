"""A finding: one verdict about a host, with the numbers behind it and the fix."""

from dataclasses import asdict, dataclass, field
from typing import Optional

SEVERITIES = ("ok", "info", "warn", "fail")
_RANK = {name: i for i, name in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str
    title: str
    evidence: dict = field(default_factory=dict)
    fix: Optional[str] = None
    gotcha: Optional[str] = None

    def __post_init__(self):
        if self.severity not in _RANK:
            raise ValueError(f"unknown severity {self.severity!r}")

    def as_dict(self) -> dict:
        return asdict(self)


def rank(severity: str) -> int:
    return _RANK[severity]


def worst_first(findings):
    return sorted(findings, key=lambda f: (-rank(f.severity), f.id))


def any_failed(findings) -> bool:
    return any(f.severity == "fail" for f in findings)
