"""Which host keys known_hosts trusts for a host, read without paramiko (cheap for a fleet).

After a call succeeded under strict host-key checking, the key the box offered is one of these.
Two boxes trusted under the same key are one machine under two names, or machines cloned from one
image with its host keys: either way a fleet or a gang must not count them as two. Hashed names
(HashKnownHosts) and OpenSSH's pattern rules are honoured; @revoked and @cert-authority lines
trust no key, so they are left out.
"""

import base64
import hashlib
import hmac
import re


def _wildcard(pattern: str, host: str) -> bool:
    """OpenSSH's match_pattern: only * and ? are special, so '[host]:port' is taken literally (fnmatch
    would read the brackets as a character class); case-insensitive, as host names are."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, host, re.IGNORECASE | re.DOTALL) is not None


def matches(patterns: str, host: str) -> bool:
    """OpenSSH host-pattern semantics: comma-separated, * and ? wildcards, !negation, |1| hashes."""
    hit = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        pattern = pattern[1:] if negated else pattern
        if pattern.startswith("|1|"):
            _, _, salt, digest = (pattern.split("|") + ["", ""])[:4]
            try:
                mac = hmac.new(base64.b64decode(salt), host.encode(), hashlib.sha1).digest()
                found = hmac.compare_digest(base64.b64encode(mac).decode(), digest)
            except (ValueError, TypeError):
                found = False
        else:
            found = _wildcard(pattern, host)
        if found and negated:
            return False
        hit = hit or found
    return hit


def fingerprint_of(blob_b64: str):
    """'SHA256:...' of a key as known_hosts writes it (base64), or None when it is not base64."""
    try:
        blob = base64.b64decode(blob_b64, validate=True)
    except ValueError:
        return None
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def trusted(files, name: str) -> set:
    """The fingerprints of every key `files` trust for `name` (a known_hosts name: 'host' or
    '[host]:port')."""
    found = set()
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 3 or fields[0].startswith(("#", "@")) or not matches(fields[0], name):
                continue
            key = fingerprint_of(fields[2])
            if key:
                found.add(key)
    return found


def shared(keys_by_host) -> dict:
    """{host: earlier host} for every host trusted under a key an earlier host (in the order
    given) is trusted under; hosts with no recorded key are left out."""
    owner: dict = {}
    out: dict = {}
    for host, keys in keys_by_host.items():
        earlier = next((owner[k] for k in sorted(keys) if k in owner), None)
        if earlier is not None and earlier != host:
            out[host] = earlier
        for k in keys:
            owner.setdefault(k, host)
    return out


def of_target(target) -> set:
    """The keys known_hosts trusts for a remote target's host (empty for this machine)."""
    spec = getattr(target, "spec", None)
    if spec is None or not hasattr(spec, "known_hosts_name"):
        return set()
    return trusted(spec.known_hosts, spec.known_hosts_name)
