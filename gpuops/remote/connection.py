"""A paramiko (Fabric) connection with gpuops' host-key policy, keepalive and error taxonomy: the
paramiko transport's, and the one the SFTP engine uses under either transport."""

import socket
import threading

from ..errors import AuthFailed, HostKeyChanged, HostKeyRevoked, TimedOut, UnknownHost, Unreachable
from . import hostspec, patience

MAX_HOPS = 8
# paramiko bounds each step of a handshake, not the whole: a server that trickles a byte every
# few seconds keeps every step alive. The whole handshake gets this long past the connect timeout.
CONNECT_GRACE_S = 20


def open_connection(spec, _hops=0):
    """A connected fabric.Connection with our host-key policy, keepalive and error taxonomy."""
    import paramiko
    from fabric import Config, Connection

    from . import hostkeys, hostspec

    if _hops > MAX_HOPS:
        raise Unreachable(f"{spec.spec}: ProxyJump chain is longer than {MAX_HOPS} hops")
    gateway = None
    if spec.proxy_jump:
        first_hop = spec.proxy_jump.split(",")[0]
        gateway = open_connection(hostspec.resolve(first_hop), _hops + 1)
    config = Config(ssh_config=paramiko.SSHConfig(), overrides={"load_ssh_configs": False})
    kwargs = {"allow_agent": not spec.identities_only, "look_for_keys": not spec.identity_files}
    if spec.identity_files:
        kwargs["key_filename"] = list(spec.identity_files)
    conn = Connection(
        spec.hostname,
        user=spec.user,
        port=spec.port,
        config=config,
        gateway=gateway if gateway is not None else False,
        connect_timeout=spec.connect_timeout,
        connect_kwargs=kwargs,
    )
    policy = hostkeys.install(conn.client, spec.known_hosts)
    where = f"{spec.spec} ({spec.hostname}:{spec.port})"
    try:
        _open_within(conn, spec.connect_timeout + CONNECT_GRACE_S, where)
    except paramiko.BadHostKeyException as e:
        if policy.known.revoked_for(spec.known_hosts_name, e.key):
            raise HostKeyRevoked(hostkeys.revoked_message(where, e.key, policy.files)) from None
        raise HostKeyChanged(
            f"{where}: host key changed: the server offered {hostkeys.fingerprint(e.key)}, known_hosts "
            f"expects {hostkeys.fingerprint(e.expected_key)}. If the box was re-provisioned, remove the old "
            f"entry with: ssh-keygen -R '{spec.known_hosts_name}' -f {policy.record_path}"
        ) from None
    except paramiko.AuthenticationException as e:
        raise _checked(AuthFailed(f"{where}: authentication failed for user {spec.user!r}: {e}"), spec) from None
    except (socket.timeout, TimeoutError):
        raise TimedOut(f"{where}: no SSH answer within {spec.connect_timeout}s") from None
    except paramiko.SSHException as e:
        if "authentication" in str(e).lower():
            raise _checked(AuthFailed(f"{where}: authentication failed for user {spec.user!r}: {e}"), spec) from None
        raise Unreachable(f"{where}: SSH handshake failed: {e}") from None
    except socket.gaierror as e:
        if e.errno == socket.EAI_AGAIN:  # the resolver did not answer: a network's failure, worth a retry
            raise Unreachable(f"{where}: cannot resolve the name now: {e.strerror}") from None
        raise _checked(UnknownHost(f"{spec.spec}: no such host: {e.strerror}; check the name, or its Host entry "
                                   "in the ssh config"), spec) from None
    except (OSError, EOFError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise Unreachable(f"{where}: cannot connect: {reason}") from None
    # A revoked key that is also listed as a plain one passed paramiko's own check.
    offered = conn.transport.get_remote_server_key()
    if policy.known.revoked_for(spec.known_hosts_name, offered):
        conn.close()
        raise HostKeyRevoked(hostkeys.revoked_message(where, offered, policy.files))
    conn.transport.set_keepalive(spec.keepalive_s)
    return conn


def _open_within(conn, seconds, where):
    """conn.open(), given up (and the half-open connection closed) after `seconds`."""
    outcome = {}

    def attempt() -> None:
        try:
            conn.open()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            outcome["error"] = e

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    with patience.connecting(where, seconds):
        worker.join(seconds)
    if worker.is_alive():
        conn.client.close()
        worker.join(5)
        raise TimedOut(f"{where}: the SSH handshake did not finish within {seconds:g}s")
    if "error" in outcome:
        raise outcome["error"]


def _checked(error: Exception, spec) -> Exception:
    """`error` with the `ssh -G` step that shows what ssh makes of the host (as openssh's)."""
    setattr(error, "check", tuple(hostspec.check_argv(spec.spec)))
    return error
