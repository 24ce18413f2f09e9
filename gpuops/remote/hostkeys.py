"""Host-key policy: trust on first use, refuse a changed key (OpenSSH's accept-new).

Fabric installs paramiko's AutoAddPolicy, which accepts any key, changed or not, and records
nothing: a man in the middle of a rented box would be invisible. We load known_hosts ourselves,
record an unknown key in the user's known_hosts, and let paramiko raise BadHostKeyException on a
mismatch, which the transport turns into HostKeyChanged.
"""

import os
import threading

import paramiko

_append_lock = threading.Lock()


def fingerprint(key) -> str:
    import base64
    import hashlib

    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Accept an unknown key once and append it to `record_path`."""

    def __init__(self, record_path: str):
        self.record_path = record_path
        self.recorded = None

    def missing_host_key(self, client, hostname, key):
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
    """Load every known_hosts file for checking; record new keys in the first one."""
    files = list(known_hosts_files) or [os.path.expanduser("~/.ssh/known_hosts")]
    for path in files:
        if os.path.exists(path):
            try:
                client.get_host_keys().load(path)
            except (OSError, paramiko.SSHException):
                continue
    policy = TrustOnFirstUse(files[0])
    client.set_missing_host_key_policy(policy)
    return policy
