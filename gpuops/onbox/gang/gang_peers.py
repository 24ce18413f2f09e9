"""The gang's data plane, tested the way NCCL and Gloo will use it (stdlib only).

After the rendezvous, NCCL's bootstrap and Gloo's pairs do not use the rendezvous port: each
process binds a listener on an ephemeral port (port 0) of its gang interface, publishes it through
the store, and every other process connects to it. A firewall that lets the rendezvous port
through but not the ephemeral range passes a rendezvous check and hangs at the first collective
(seed 004: "firewall blocking communication"). So each node binds a listener the same way on the
address its rendezvous connection used, the head hands every node the table of listeners, and
every node connects to every other node's listener, trading the preflight's nonce so a connection
that reached something else is told apart.
"""

import socket
import threading
import time

from ..host import sysroot
from typing import Sequence

PEER = "gpuops-peer"
TABLE_MAX = 4096  # 64 nodes x "63=255.255.255.255:65535 "
RETRY_S = 0.2


class Lines(object):
    """Lines from one connection, each at most `limit` bytes; what arrived after a newline is kept
    for the next line (the head's answer and its table can come in one segment)."""

    def __init__(self, conn) -> None:
        self.conn, self.buffer = conn, b""

    def read(self, deadline, limit: int = 200):
        while b"\n" not in self.buffer and len(self.buffer) < limit:
            left = deadline - time.time()
            if left <= 0:
                return None
            self.conn.settimeout(left)
            try:
                chunk = self.conn.recv(limit)
            except (OSError, socket.timeout):
                return None
            if not chunk:
                break
            self.buffer += chunk
        if b"\n" not in self.buffer:
            line, self.buffer = self.buffer[:limit], b""
            return line.decode("utf-8", "replace") if line else None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line[:limit].decode("utf-8", "replace")


def port_range():
    """[low, high] of this box's ephemeral ports (where NCCL's and Gloo's listeners land), or None."""
    words = (sysroot.read("/proc/sys/net/ipv4/ip_local_port_range") or "").split()
    if len(words) == 2 and all(w.isdigit() for w in words):
        return [int(words[0]), int(words[1])]
    return None


def bind(address):
    """(listening socket or None, {address, port, error}): a listener on an ephemeral port of
    `address`, bound as NCCL binds its own."""
    out = {"address": address, "port": None, "error": None}
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        server.bind((address, 0))
        server.listen(64)
    except (OSError, IOError) as e:
        server.close()
        out["error"] = (e.strerror or str(e))[:200]
        return None, out
    out["port"] = server.getsockname()[1]
    return server, out


def encode(table):
    """'0=10.0.0.5:40123 1=10.0.0.6:38211' from {node: (address, port)}."""
    return " ".join("%d=%s:%d" % (n, a, p) for n, (a, p) in sorted(table.items()))


def decode(words: Sequence[str]):
    """{node: (address, port)} from the words encode wrote; words that are not one are skipped."""
    table = {}
    for word in words[:64]:
        node, _, where = word.partition("=")
        address, _, port = where.rpartition(":")
        if node.isdigit() and port.isdigit() and address:
            table[int(node)] = (address[:64], int(port))
    return table


def _answer(server, nonce, me, expect, deadline, heard) -> None:
    """Serve the listener until every other node said hello or the deadline passed."""
    while len(heard) < expect and time.time() < deadline:
        server.settimeout(max(0.01, deadline - time.time()))
        try:
            conn, _ = server.accept()
        except (OSError, socket.timeout):
            continue
        try:
            words = (Lines(conn).read(min(deadline, time.time() + 2)) or "").split()
            if len(words) == 3 and words[:2] == [PEER, nonce] and words[2].isdigit():
                heard.add(int(words[2]))
                conn.sendall(("%s %s %d\n" % (PEER, nonce, me)).encode("ascii"))
        except (OSError, IOError):
            pass
        finally:
            conn.close()


def _probe(node, address, port: int, nonce, me, deadline):
    """Connect from this node to `node`'s listener until it answers or the deadline passes."""
    out = {"node": node, "address": address, "port": port, "connected": False, "answered": False, "error": None,
           "seconds": None, "attempts": 0}
    began = time.time()
    while time.time() < deadline:
        out["attempts"] += 1
        try:
            conn = socket.create_connection((address, port), timeout=max(0.05, min(3.0, deadline - time.time())))
        except (OSError, IOError) as e:
            out["error"] = ((getattr(e, "strerror", None) or str(e)) or type(e).__name__)[:200]
            time.sleep(min(RETRY_S, max(0.0, deadline - time.time())))
            continue
        try:
            out.update(connected=True, error=None, seconds=round(time.time() - began, 3))
            conn.sendall(("%s %s %d\n" % (PEER, nonce, me)).encode("ascii"))
            reply = Lines(conn).read(min(deadline + 2, time.time() + 3))
            out["answered"] = reply == "%s %s %d" % (PEER, nonce, node)
            if not out["answered"]:
                out["error"] = "something answered at %s:%d, but not node %d of this preflight" % (address, port, node)
        except (OSError, IOError) as e:
            out["error"] = str(e)[:200]
        finally:
            conn.close()
        break
    return out


def exchange(server, listening, table, nonce, me, window):
    """The data-plane facts of node `me`: its listener (`listening`: bind's answer), the table the
    head sent (None when none came), every other node it connected to, and who connected to it."""
    out = dict(listening, peers=None, probes=[], heard=[], port_range=port_range())
    if table is None:
        if server is not None:
            server.close()
        return out
    out["peers"] = len(table)
    deadline = time.time() + window
    heard, probes = set(), []
    threads = []
    if server is not None:
        others = len([n for n in table if n != me])
        # A little longer than this node's own probes: a peer that got the table later still finds it.
        threads.append(threading.Thread(target=_answer, args=(server, nonce, me, others, deadline + 1.0, heard)))
    for node, (address, port) in sorted(table.items()):
        if node != me:
            threads.append(threading.Thread(target=lambda n=node, a=address, p=port: probes.append(
                _probe(n, a, p, nonce, me, deadline))))
    for t in threads:
        t.daemon = True
        t.start()
    for t in threads:
        t.join(window + 5.0)
    if server is not None:
        server.close()
    out["probes"] = sorted(probes, key=lambda p: p["node"])
    out["heard"] = sorted(heard)
    return out
