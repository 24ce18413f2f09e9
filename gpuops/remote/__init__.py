"""Transport: host specs, host-key policy, sh wrapping with remote timeouts, targets, fan-out."""

from .fanout import each_host
from .hostspec import split_hosts
from .target import LocalTarget, SSHTarget, target_for

__all__ = ["each_host", "split_hosts", "LocalTarget", "SSHTarget", "target_for"]
