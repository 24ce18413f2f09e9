"""Host specs: 'local', an ssh_config alias, or user@host:port, resolved the way OpenSSH does.

paramiko's SSHConfig ignores `Include` and `Match`, so when the ssh client is installed we ask
it (`ssh -G`) for the final settings; otherwise paramiko's parser is the fallback. The ssh_config
file can be pinned with GPUOPS_SSH_CONFIG (tests use it; users with several configs may too).

`ssh -G` takes ~7 ms, and every call with --host needs its answer before anything else can
happen (the answer names the kept master, or starts the handshake). prefetch() starts it while
the program is still importing (gpuops.remote.warmup), and resolve() collects it. It is spawned
with os.posix_spawnp, not subprocess: a call that rides a kept master and the box's resident
helper starts no other process, and importing subprocess (with the shutil it brings) would cost
it ~10 ms.
"""

import os
import re
import select
import time
from collections import namedtuple

from ..errors import UsageError
from ..sshspec import parse

LOCAL_NAMES = ("", "local", "localhost-local")


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


SSH_G_TIMEOUT_S = 10
_prefetched: dict = {}  # (user, host, port, ssh_config) -> an `ssh -G` started by prefetch()


def on_path(name: str):
    """The executable `name` found on PATH, as shutil.which finds it; None when there is none.
    Not shutil.which itself: no other module on a call's kept path imports shutil (~3 ms)."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(directory or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _lookup_key(spec):
    user, host, port = parse(spec)
    return user, host, port, os.environ.get("GPUOPS_SSH_CONFIG") or None


def prefetch(spec) -> None:
    """Start `ssh -G` for `spec` now; resolve() collects its answer. Never raises (a bad spec is
    reported by resolve)."""
    try:
        key = _lookup_key(spec)
    except UsageError:
        return
    if key not in _prefetched:
        _prefetched[key] = _spawn(_ssh_g_argv(*key))


def check_argv(spec: str) -> list:
    """The `ssh -G` command line that shows what ssh makes of `spec` (its HostName, User,
    IdentityFile): the step after a name that does not resolve or a key the box refused."""
    return _ssh_g_argv(*_lookup_key(spec))


def _ssh_g_argv(user, host: str, port, config_path):
    argv = ["ssh", "-G"]
    if config_path:
        argv += ["-F", config_path]
    if user:
        argv += ["-l", user]
    if port:
        argv += ["-p", str(port)]
    return argv + [host]


def _spawn(argv):
    """(pid, stdout's read end, stderr's read end) of `argv` started with no stdin; None when it
    cannot be started (no such program)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        # The pipes are close-on-exec: only the dup2'd copies reach the child.
        pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)])
    except OSError:
        os.close(out_r)
        os.close(err_r)
        return None
    finally:
        os.close(out_w)
        os.close(err_w)
    return pid, out_r, err_r


def _collect(started, timeout_s):
    """(exit status, stdout, stderr) of a process from _spawn; None when it outlived `timeout_s`
    (it is killed then)."""
    pid, out_r, err_r = started
    deadline = time.monotonic() + timeout_s
    output = {out_r: [], err_r: []}
    poller = select.poll()
    for fd in output:
        poller.register(fd, select.POLLIN)
    left = len(output)
    try:
        while left:
            wait_ms = (deadline - time.monotonic()) * 1000
            if wait_ms <= 0:
                os.kill(pid, 9)  # SIGKILL; the signal module (an enum) is not worth importing for it
                os.waitpid(pid, 0)
                return None
            for fd, _ in poller.poll(wait_ms):
                chunk = os.read(fd, 65536)
                if chunk:
                    output[fd].append(chunk)
                else:
                    poller.unregister(fd)
                    left -= 1
    finally:
        os.close(out_r)
        os.close(err_r)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code, b"".join(output[out_r]), b"".join(output[err_r])


def _ssh_g(key):
    """ssh's final settings for `key` ({option: [values]}); None when ssh cannot tell (missing,
    or no answer in time)."""
    started = _prefetched.pop(key, None) or _spawn(_ssh_g_argv(*key))
    done = _collect(started, SSH_G_TIMEOUT_S) if started else None
    if done is None:
        return None
    code, out, err = done
    if code != 0:
        raise UsageError(f"ssh -G {key[1]}: {err.decode('utf-8', 'replace').strip()[:200]}")
    conf = {}
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        option, _, value = line.partition(" ")
        conf.setdefault(option.lower(), []).append(value.strip())
    return conf


def _paramiko_lookup(host: str, config_path):
    import paramiko

    path = config_path or os.path.expanduser("~/.ssh/config")
    if not os.path.exists(path):
        return {"hostname": [host]}
    found = paramiko.SSHConfig.from_path(path).lookup(host)
    return {k.lower(): v if isinstance(v, list) else [str(v)] for k, v in found.items()}


def _first(conf, key, default=None):
    values = conf.get(key)
    return values[0] if values else default


def _expand(p, host: str, user, port: int):
    p = p.replace("%h", host).replace("%r", user or "").replace("%p", str(port)).replace("%%", "%")
    return os.path.expanduser(p)


def resolve(spec: str, identity=None) -> HostSpec:
    """Resolve a remote spec to concrete connection settings."""
    key = _lookup_key(spec)
    user, host, port, config_path = key
    conf = _ssh_g(key)
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
