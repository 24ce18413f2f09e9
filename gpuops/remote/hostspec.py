"""Host specs: 'local', an ssh_config alias, or user@host:port, resolved the way OpenSSH does.

paramiko's SSHConfig ignores `Include` and `Match`, so when the ssh client is installed we ask
it (`ssh -G`) for the final settings; otherwise paramiko's parser is the fallback. The ssh_config
file can be pinned with GPUOPS_SSH_CONFIG (tests use it; users with several configs may too).
"""

import os
import re
import shutil
import subprocess
from collections import namedtuple

from ..errors import UsageError

LOCAL_NAMES = ("", "local", "localhost-local")
_SPEC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s\[\]]+)(?::(?P<port>\d+))?$")


class HostSpec(namedtuple("HostSpec", ("spec", "hostname", "user", "port", "identity_files", "identities_only",
                                        "proxy_jump", "known_hosts", "connect_timeout", "keepalive_s"),
                           defaults=(None, 22, (), False, None, (), 10, 15))):
    """A host's resolved settings: immutable and hashable. A named tuple, not a dataclass, because
    every call with --host builds one before its handshake may start (gpuops.remote.warmup), and
    importing dataclasses (inspect, ast, dis, tokenize) and typing costs 15-30 ms of that start."""

    __slots__ = ()

    @property
    def known_hosts_name(self) -> str:
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def split_hosts(value) -> list:
    """'a,b , c' -> ['a', 'b', 'c']; empty means this machine."""
    if value is None:
        return ["local"]
    names = [h.strip() for h in str(value).split(",")]
    names = [h for h in names if h]
    return names or ["local"]


def is_local(spec: str) -> bool:
    return spec.strip().lower() in LOCAL_NAMES


def parse(spec: str):
    """(user, host, port) from user@host:port; raises UsageError on nonsense."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise UsageError(f"bad host spec {spec!r}: expected an ssh_config alias or user@host:port")
    host = m.group("host").strip("[]")
    port = int(m.group("port")) if m.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"bad port in host spec {spec!r}")
    return m.group("user"), host, port


def _ssh_g(host, user, port, config_path):
    argv = ["ssh", "-G"]
    if config_path:
        argv += ["-F", config_path]
    if user:
        argv += ["-l", user]
    if port:
        argv += ["-p", str(port)]
    argv.append(host)
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        raise UsageError(f"ssh -G {host}: {out.stderr.strip()[:200]}")
    conf = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        conf.setdefault(key.lower(), []).append(value.strip())
    return conf


def _paramiko_lookup(host, config_path):
    import paramiko

    path = config_path or os.path.expanduser("~/.ssh/config")
    if not os.path.exists(path):
        return {"hostname": [host]}
    found = paramiko.SSHConfig.from_path(path).lookup(host)
    return {k.lower(): v if isinstance(v, list) else [str(v)] for k, v in found.items()}


def _first(conf, key, default=None):
    values = conf.get(key)
    return values[0] if values else default


def _expand(p, host, user, port):
    p = p.replace("%h", host).replace("%r", user or "").replace("%p", str(port)).replace("%%", "%")
    return os.path.expanduser(p)


def resolve(spec: str, identity=None) -> HostSpec:
    """Resolve a remote spec to concrete connection settings."""
    user, host, port = parse(spec)
    config_path = os.environ.get("GPUOPS_SSH_CONFIG") or None
    conf = _ssh_g(host, user, port, config_path) if shutil.which("ssh") else None
    if conf is None:
        conf = _paramiko_lookup(host, config_path)
    hostname = _first(conf, "hostname", host)
    user = user or _first(conf, "user") or os.environ.get("USER") or None
    port = port or int(_first(conf, "port", "22"))
    # Like `ssh -i`: an explicit identity is offered first, the config's keys after it.
    identities = tuple(
        p for p in (_expand(v, hostname, user, port) for v in conf.get("identityfile", [])) if os.path.exists(p)
    )
    if identity:
        if not os.path.exists(os.path.expanduser(identity)):
            raise UsageError(f"identity file {identity!r} does not exist")
        identities = tuple(dict.fromkeys((os.path.expanduser(identity),) + identities))
    known = []
    for value in conf.get("userknownhostsfile", []) + conf.get("globalknownhostsfile", []):
        known += [_expand(v, hostname, user, port) for v in value.split()]
    if not known:
        known = [os.path.expanduser("~/.ssh/known_hosts")]
    jump = _first(conf, "proxyjump")
    timeout = _first(conf, "connecttimeout", "none")
    alive = _first(conf, "serveraliveinterval", "0")
    return HostSpec(
        spec=spec,
        hostname=hostname,
        user=user,
        port=port,
        identity_files=identities,
        identities_only=_first(conf, "identitiesonly", "no") == "yes",
        proxy_jump=None if jump in (None, "none") else jump,
        known_hosts=tuple(dict.fromkeys(known)),
        connect_timeout=int(timeout) if timeout and timeout.isdigit() else 10,
        keepalive_s=int(alive) if alive.isdigit() and int(alive) > 0 else 15,
    )
