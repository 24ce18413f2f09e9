"""A paramiko (Fabric) connection with gpuops' host-key policy, keepalive and error taxonomy: the
paramiko transport's, and the one the SFTP engine uses under either transport."""

import socket

from ..errors import AuthFailed, HostKeyChanged, TimedOut, Unreachable

MAX_HOPS = 8


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
        conn.open()
    except paramiko.BadHostKeyException as e:
        raise HostKeyChanged(
            f"{where}: host key changed: the server offered {hostkeys.fingerprint(e.key)}, known_hosts "
            f"expects {hostkeys.fingerprint(e.expected_key)}. If the box was re-provisioned, remove the old "
            f"entry with: ssh-keygen -R '{spec.known_hosts_name}' -f {policy.record_path}"
        ) from None
    except paramiko.AuthenticationException as e:
        raise AuthFailed(f"{where}: authentication failed for user {spec.user!r}: {e}") from None
    except (socket.timeout, TimeoutError):
        raise TimedOut(f"{where}: no SSH answer within {spec.connect_timeout}s") from None
    except paramiko.SSHException as e:
        if "authentication" in str(e).lower():
            raise AuthFailed(f"{where}: authentication failed for user {spec.user!r}: {e}") from None
        raise Unreachable(f"{where}: SSH handshake failed: {e}") from None
    except (OSError, EOFError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise Unreachable(f"{where}: cannot connect: {reason}") from None
    conn.transport.set_keepalive(spec.keepalive_s)
    return conn
