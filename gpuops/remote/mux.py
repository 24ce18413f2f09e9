"""Where OpenSSH master connections live between gpuops calls, and for how long.

An agent or a person rarely runs one verb: launch, status, logs, wait, triage. Each call paid a
full handshake; now the first call's master stays up GPUOPS_SSH_PERSIST seconds after its last
use (default 60; 0 turns reuse across calls off) and later calls ride it, as Ansible does.

The sockets live in one directory per user, mode 0700 and owned by us, or reuse is off. A socket
is named by a digest of everything that decides whom it talks to and as whom (the resolved host,
port, user, identities, proxy, known_hosts files and the ssh_config in force), so a different
user, port, identity or ssh_config result never shares a master. A reused master skips the host
key check, which is sound only while its TCP connection lives: a re-provisioned box drops it,
and the next call shakes hands again and meets the changed key.

Beside each socket, `<socket>.python` remembers the box's interpreter (see gpuops.remote.wrap).
It records the master it was learned on (the socket file's device, inode and ctime) and the host
keys known_hosts trusted for the box then. It is offered on that master, and on a later master to
the same name while known_hosts still trusts exactly those keys: a re-provisioned box has a new
host key, which the user must accept first, so a path learned from one machine is never offered
to another. Without recorded keys only the same master counts. The file outlives its master (a
first call of the day then skips the shim too); a path the box no longer has falls back to
`python3` on PATH within the call and is forgotten.
"""

import contextlib
import hashlib
import json
import os
import stat

from ..errors import UsageError
from .wrap import valid_python

# A unix socket path holds at most 107 bytes, and ssh binds a 17-byte longer temp name first.
MAX_SOCKET_PATH = 107 - 17
PERSIST_ENV = "GPUOPS_SSH_PERSIST"
DEFAULT_PERSIST_S = 60
MAX_PERSIST_S = 86400
PYTHON_SUFFIX = ".python"
# Beside a master's socket: which stream-local forward to the box's resident helper it holds
# (gpuops.remote.resident), that forward's local sockets (`<socket>.r<token>`), and a marker
# while one is being armed.
RESIDENT_SUFFIX = ".resident"
FORWARD_INFIX = ".r"
ARMING_SUFFIX = ".arming"  # a helper being armed (gpuops.remote.arming)
# The round trip measured over the master (gpuops.sync.lanes): a near link's, for that master only.
LINK_SUFFIX = ".link"
MAX_BESIDE = 4096  # a document kept beside a master's socket


def persist_s(environ=None) -> int:
    """Seconds an idle master is kept (0: not across calls)."""
    text = (os.environ if environ is None else environ).get(PERSIST_ENV, "").strip()
    if not text:
        return DEFAULT_PERSIST_S
    if not text.isdigit() or int(text) > MAX_PERSIST_S:
        raise UsageError(f"{PERSIST_ENV} takes whole seconds from 0 to {MAX_PERSIST_S}, not {text[:40]!r}")
    return int(text)


def shared_dir(environ=None):
    """This user's socket directory, made 0700 if missing; None when it is not provably ours."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_RUNTIME_DIR")
    if not base:
        import tempfile  # not at the top: a call that finds XDG_RUNTIME_DIR set is spared its ~3 ms

        base = tempfile.gettempdir()
    path = os.path.join(base, f"gpuops-ssh-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    # Someone else's directory (or a link to one) in a shared /tmp would let them sit between us
    # and every box we log into.
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return path


def socket_path(directory, spec, identity=None):
    """Where this host's master listens; None when the path would be too long to bind."""
    path = os.path.join(directory, socket_name(spec, identity))
    return path if len(path.encode()) <= MAX_SOCKET_PATH else None


def socket_name(spec, identity=None, environ=None) -> str:
    """The digest that names a master for this resolved host spec (see the module docstring)."""
    environ = os.environ if environ is None else environ
    key = [spec.hostname, spec.port, spec.user, list(spec.identity_files), spec.identities_only,
           spec.proxy_jump, list(spec.known_hosts), identity, environ.get("GPUOPS_SSH_CONFIG"), spec.spec]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]


def sockets(directory):
    """Every master's socket in `directory`, live or stale (not the forwards beside them)."""
    out = []
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in sorted(names):
        if "." in name:
            continue
        path = os.path.join(directory, name)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                out.append(path)
        except OSError:
            continue
    return out


def identity(path):
    """The socket file's (device, inode, ctime_ns): which master listens there; None without one."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_ctime_ns] if stat.S_ISSOCK(st.st_mode) else None


def read_python(path, keys=None):
    """(the interpreter remembered for the master on socket `path`, or None; that master's
    identity). `keys()`, when given, returns the host keys known_hosts trusts for the box now: a
    path learned on an earlier master is offered when they are the ones it was learned under."""
    master = identity(path)
    if master is None:
        return None, None
    doc = read_beside(path, PYTHON_SUFFIX)
    if not isinstance(doc, dict) or not valid_python(doc.get("python")):
        return None, master
    if doc.get("master") == master:
        return doc["python"], master
    learned_under = doc.get("keys")
    if keys is not None and isinstance(learned_under, list) and learned_under and learned_under == sorted(keys()):
        return doc["python"], master
    return None, master


def write_python(path, python, master, keys=()) -> None:
    """Remember `python` (None: forget) for the master that had identity `master` when the call
    began, with the host `keys` trusted for the box, provided that master still listens there
    now: a call that ended on another master proves nothing."""
    if master is None or identity(path) != master:
        return
    if python is None:
        with contextlib.suppress(OSError):
            os.unlink(path + PYTHON_SUFFIX)
        return
    write_beside(path, PYTHON_SUFFIX, {"master": master, "python": python, "keys": sorted(keys)})


def read_link(path):
    """The round trip kept for the master listening on socket `path` now (write_link), or None:
    one master is one TCP connection, so one path to the box."""
    doc, master = read_beside(path, LINK_SUFFIX), identity(path)
    if master is None or not isinstance(doc, dict) or doc.get("master") != master:
        return None
    rtt = doc.get("rtt_s")
    return rtt if isinstance(rtt, (int, float)) and not isinstance(rtt, bool) and 0 <= rtt < 60 else None


def write_link(path, rtt_s) -> None:
    master = identity(path)
    if master is not None:
        write_beside(path, LINK_SUFFIX, {"master": master, "rtt_s": rtt_s})


def read_beside(path, suffix: str):
    """The JSON document kept beside the master socket `path` under `suffix` (read up to
    MAX_BESIDE bytes); None when there is none or it is not JSON."""
    try:
        with open(path + suffix, "rb") as f:
            return json.loads(f.read(MAX_BESIDE).decode("utf-8"))
    except (OSError, ValueError):
        return None


def write_beside(path, suffix: str, doc) -> bool:
    """Replace the document beside the master socket `path` under `suffix` at once (a private
    temporary file renamed over it); False when it could not be written."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + suffix.lstrip(".") + "-")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path + suffix)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


def close(path, timeout_s=10) -> bool:
    """Ask the master on socket `path` to exit (its sessions end with it); True when one did."""
    import subprocess

    try:
        out = subprocess.run(["ssh", "-o", f"ControlPath={path}", "-O", "exit", "gpuops-master"],
                             capture_output=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if out.returncode != 0 and os.path.exists(path):
        os.unlink(path)  # a stale socket (its master died): nothing listens, so nothing is cut
    forget_beside(path)
    return out.returncode == 0


def forget_beside(path) -> None:
    """Remove what is kept beside the master socket `path`: it ended, and so did its forwards.
    The remembered interpreter stays: it belongs to the box (see the module docstring)."""
    directory, name = os.path.split(path)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    beside = (name + RESIDENT_SUFFIX, name + ARMING_SUFFIX, name + LINK_SUFFIX)
    for other in names:
        if other in beside or other.startswith(name + FORWARD_INFIX):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, other))
