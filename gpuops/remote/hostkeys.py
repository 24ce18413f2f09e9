"""Host-key policy for the paramiko transport: known_hosts as OpenSSH reads it, trust on first use.

Fabric installs paramiko's AutoAddPolicy, which accepts any key, changed or not, and records
nothing: a man in the middle of a rented box would be invisible. And paramiko's own known_hosts
reader stops at the first line it does not understand (a `@cert-authority` or `@revoked` marker,
a key type it lacks), which broke every connection. So the files are read here, line by line:

    plain lines          keys this user trusts for those hosts (hashed names included)
    @revoked lines       keys never to accept, for any host the line's patterns match
    @cert-authority      hosts trusted through a certificate authority: paramiko cannot check a
                         host certificate, so such a host is refused here (use the OpenSSH client)
    anything else        skipped with one warning on stderr, never a crash

An unknown key is recorded in the first known_hosts file (OpenSSH's accept-new); a changed one
raises paramiko's BadHostKeyException, which the transport turns into HostKeyChanged.
"""

import base64
import os
import sys
import threading

import paramiko

from ..errors import HostKeyRevoked, HostKeyUnverifiable
from .knownkeys import fingerprint_of, matches

_append_lock = threading.Lock()
_warned: set = set()


def fingerprint(key) -> str:
    return fingerprint_of(key.get_base64())


class KnownHosts:
    """What the known_hosts files say, read without trusting them to be well formed. Plain keys go
    into `keys` (a paramiko.HostKeys, the client's own when given)."""

    def __init__(self, files, keys=None):
        self.keys = paramiko.HostKeys() if keys is None else keys
        self.revoked = []       # [(patterns, key)]
        self.authorities = []   # [patterns]
        self.skipped = []       # ["file:line"]
        for path in files:
            self._load(path)

    def _load(self, path):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            marker = None
            if line.startswith("@"):
                marker, _, line = line.partition(" ")
            fields = line.split()
            key = _key(fields[1], fields[2]) if len(fields) >= 3 else None
            if marker == "@cert-authority" and len(fields) >= 3:
                self.authorities.append(fields[0])
            elif key is None or marker not in (None, "@revoked"):
                self.skipped.append(f"{path}:{number}")
            elif marker == "@revoked":
                self.revoked.append((fields[0], key))
            else:
                for name in fields[0].split(","):
                    self.keys.add(name, key.get_name(), key)

    def revoked_for(self, host, key) -> bool:
        return any(k == key and matches(patterns, host) for patterns, k in self.revoked)

    def authority_for(self, host) -> bool:
        return any(matches(patterns, host) for patterns in self.authorities)


def _key(kind, data):
    try:
        return paramiko.PKey.from_type_string(kind, base64.b64decode(data))
    except Exception:  # noqa: BLE001 - an unknown type or bad base64: a line we cannot use
        return None


def revoked_message(host, key, files):
    return (f"{host}: the host key it offered ({fingerprint(key)}) is marked @revoked in "
            f"{', '.join(files)}: refusing it. A revoked key is never to be trusted again; do not remove "
            "the line, ask the box's provider what happened")


class TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Accept an unknown key once and append it to `record_path`, unless known_hosts revokes it
    or trusts the host only through a certificate authority."""

    def __init__(self, record_path: str, known: KnownHosts, files):
        self.record_path = record_path
        self.known = known
        self.files = files
        self.recorded = None

    def missing_host_key(self, client, hostname, key):
        if self.known.revoked_for(hostname, key):
            raise HostKeyRevoked(revoked_message(hostname, key, self.files))
        if self.known.authority_for(hostname):
            raise HostKeyUnverifiable(
                f"{hostname}: known_hosts trusts this host through a certificate authority, which the paramiko "
                "transport cannot check: install the OpenSSH client (or set GPUOPS_TRANSPORT=openssh)")
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        directory = os.path.dirname(self.record_path)
        with _append_lock:
            if directory:
                os.makedirs(directory, mode=0o700, exist_ok=True)
            with open(self.record_path, "a", encoding="ascii") as f:
                f.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.recorded = fingerprint(key)


def install(client: paramiko.SSHClient, known_hosts_files) -> TrustOnFirstUse:
    """Check against every known_hosts file; record new keys in the first one."""
    files = list(known_hosts_files) or [os.path.expanduser("~/.ssh/known_hosts")]
    known = KnownHosts(files, client.get_host_keys())
    fresh = [s for s in known.skipped if s not in _warned]
    if fresh:
        _warned.update(fresh)
        sys.stderr.write(f"gpuops: known_hosts: skipped {len(fresh)} line(s) paramiko cannot use: "
                         f"{', '.join(fresh[:5])}\n")
    policy = TrustOnFirstUse(files[0], known, files)
    client.set_missing_host_key_policy(policy)
    return policy
