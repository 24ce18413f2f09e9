"""The grammar of a host spec, user@host:port, pure: the SSH layer resolves a host by it
(gpuops.remote.hostspec) and an error's hint spells the ssh command a person can try by it
(gpuops.render), which does no I/O and so imports nothing of remote."""

import re

from .errors import UsageError

_SPEC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s\[\]]+)(?::(?P<port>\d+))?$")


def parse(spec: str):
    """(user, host, port) from user@host:port; raises UsageError on nonsense."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise UsageError(f"bad host spec {spec!r}: expected an ssh_config alias or user@host:port")
    host = m.group("host").strip("[]")
    if host.startswith("-"):  # ssh would read it as an option (`-oProxyCommand=...`), not a host
        raise UsageError(f"bad host spec {spec!r}: a host name cannot start with '-'")
    port = int(m.group("port")) if m.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"bad port in host spec {spec!r}")
    return m.group("user"), host, port
