"""Network interfaces and the way out to an address, as this box's kernel sees them (stdlib only).

A gang's NCCL and Gloo sockets must use an interface the other nodes can reach (seed 004: left to
guess, they pick docker0 or lo and hang). The interface that matters is the one the kernel routes
the rendezvous traffic through, so it is read from a socket (`source_for`: the local address a
connection to the rendezvous uses) and mapped to its interface here.
"""

import fcntl
import os
import socket
import struct

_SIOCGIFFLAGS, _SIOCGIFADDR, _SIOCGIFMTU = 0x8913, 0x8915, 0x8921
_IFF_UP, _IFF_LOOPBACK = 0x1, 0x8
MAX_INTERFACES = 64


def _ioctl(sock, request, name: str):
    packed = struct.pack("256s", name.encode("utf-8")[:15])
    return fcntl.ioctl(sock.fileno(), request, packed)


def interfaces():
    """[{name, ipv4, up, loopback, mtu}] of this network namespace; ipv4 is the interface's primary
    address (None without one). A gang's two ends must agree on the MTU: jumbo frames one end sends
    are dropped where the other end's (or a switch's) MTU is smaller."""
    out = []
    try:
        names = [n for _, n in socket.if_nameindex()][:MAX_INTERFACES]
    except OSError:
        names = sorted(os.listdir("/sys/class/net"))[:MAX_INTERFACES] if os.path.isdir("/sys/class/net") else []
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for name in names:
            entry = {"name": name[:15], "ipv4": None, "up": False, "loopback": False, "mtu": None}
            try:
                flags = struct.unpack("H", _ioctl(sock, _SIOCGIFFLAGS, name)[16:18])[0]
                entry["up"], entry["loopback"] = bool(flags & _IFF_UP), bool(flags & _IFF_LOOPBACK)
            except (OSError, IOError):
                pass
            try:
                entry["ipv4"] = socket.inet_ntoa(_ioctl(sock, _SIOCGIFADDR, name)[20:24])
            except (OSError, IOError):
                pass
            try:
                entry["mtu"] = struct.unpack("i", _ioctl(sock, _SIOCGIFMTU, name)[16:20])[0]
            except (OSError, IOError):
                pass
            out.append(entry)
    finally:
        sock.close()
    return out


def owner(address, found=None):
    """The name of the interface holding IPv4 `address` (a 127/8 address belongs to the loopback
    interface, which answers for all of them), or None."""
    found = interfaces() if found is None else found
    for entry in found:
        if entry["ipv4"] == address:
            return entry["name"]
    if address and address.startswith("127."):
        return next((e["name"] for e in found if e["loopback"]), None)
    return None


def source_for(host: str, port: int):
    """The local IPv4 address the kernel would send from to reach host:port (a UDP socket is
    'connected', which only picks the route: no packet leaves), or None when there is no route."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect((host, int(port)))
        return sock.getsockname()[0]
    except (OSError, IOError, ValueError):
        return None
    finally:
        sock.close()


def namespace():
    """This process's network namespace ('net:[4026531992]'), or None; two nodes share loopback
    only when they share the kernel (boot_id) and this."""
    try:
        return os.readlink("/proc/self/ns/net")[:64]
    except OSError:
        return None
