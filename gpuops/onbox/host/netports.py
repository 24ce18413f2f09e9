"""TCP listeners from /proc/net/tcp and /proc/net/tcp6 (this network namespace, as the job sees it).

A leftover torchrun from a crashed run keeps the rendezvous port (29500) and the next launch dies
with "Address already in use"; the socket inode found here is matched to its owner through
/proc/*/fd (see probe.py), so the finding can name the process.
"""

from . import sysroot

LISTEN = "0A"
MAX_LISTENERS = 200


def _addr(hex_addr):
    """('127.0.0.1', 29500) from '0100007F:733C'; IPv6 shown only as any/loopback/other."""
    host, _, port = hex_addr.partition(":")
    if len(host) == 8:  # IPv4, bytes in host (little-endian) order
        text = ".".join(str(x) for x in reversed(bytearray.fromhex(host)))
    elif set(host) == {"0"}:
        text = "::"
    elif host == "0" * 24 + "01000000":
        text = "::1"
    else:
        text = "ipv6"
    return text, int(port, 16)


def listeners():
    """[{port, address, family, inode}] for listening TCP sockets, lowest port first."""
    found = []
    for name, family in (("/proc/net/tcp", "ipv4"), ("/proc/net/tcp6", "ipv6")):
        text = sysroot.read(name) or ""
        for line in text.splitlines()[1:]:
            parts = line.split()
            if len(parts) < 10 or parts[3] != LISTEN:
                continue
            try:
                address, port = _addr(parts[1])
                inode = int(parts[9])
            except ValueError:
                continue
            found.append({"port": port, "address": address, "family": family, "inode": inode})
    found.sort(key=lambda e: (e["port"], e["family"]))
    return found[:MAX_LISTENERS]
