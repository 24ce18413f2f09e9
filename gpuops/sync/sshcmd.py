"""The `ssh` command rsync runs, built from the transport's resolved settings.

rsync's file transfer must reach the same box as gpuops' own connection, with the same key, port,
jump host and host-key policy (known_hosts files, trust-on-first-use via accept-new, never a
prompt), plus keepalives so a dead link is noticed in seconds. When GPUOPS_SSH_CONFIG pins an
ssh_config file, it is passed with -F as well, so anything else it says (ProxyCommand, ciphers)
applies to rsync too.
"""

import os

from ..errors import UsageError

ALIVE_COUNT = 3


def ssh_argv(spec) -> list:
    argv = ["ssh"]
    config = os.environ.get("GPUOPS_SSH_CONFIG")
    if config:
        argv += ["-F", config]
    argv += ["-p", str(spec.port)]
    if spec.user:
        argv += ["-l", spec.user]
    for key in spec.identity_files:
        argv += ["-i", key]
    opts = {
        "BatchMode": "yes",
        "StrictHostKeyChecking": "accept-new",
        "ServerAliveInterval": str(spec.keepalive_s),
        "ServerAliveCountMax": str(ALIVE_COUNT),
        "ConnectTimeout": str(spec.connect_timeout),
    }
    if spec.identities_only:
        opts["IdentitiesOnly"] = "yes"
    if spec.known_hosts:
        opts["UserKnownHostsFile"] = " ".join(spec.known_hosts)
    if spec.proxy_jump:
        opts["ProxyJump"] = spec.proxy_jump
    for k, v in opts.items():
        argv += ["-o", f"{k}={v}"]
    return argv


def rsh_quote(arg: str) -> str:
    """Quote one word for rsync's -e parser (spaces split words; '' and "" group; no backslashes)."""
    if arg and not any(c in arg for c in " '\"\t"):
        return arg
    if "'" not in arg:
        return f"'{arg}'"
    if '"' not in arg:
        return f'"{arg}"'
    raise UsageError(f"cannot pass {arg!r} to rsync's ssh command: it holds both quote characters")


def rsh(spec) -> str:
    """The value for rsync -e."""
    return " ".join(rsh_quote(a) for a in ssh_argv(spec))


def remote(spec, path: str) -> str:
    """rsync's HOST:PATH for this box (an IPv6 address in brackets)."""
    host = f"[{spec.hostname}]" if ":" in spec.hostname else spec.hostname
    return f"{host}:{path}"
