"""A long link in user space: a TCP relay on loopback in front of a rig box's sshd.

This machine's kernel has no netem, so a link between continents is emulated here: every byte is
held for `delay_s` in each direction (a round trip of twice that), each connection is held to
`rate_bytes_s` per direction (the link as a whole uncapped: what one TCP stream gets over a long
path), and `loss` is the share of chunks that are lost. The relay carries TCP over TCP, so a
lost chunk cannot vanish: it arrives late, after `stall_s` (about a retransmission timeout, 200
ms plus a round trip), and everything behind it waits, as TCP's in-order delivery makes it wait.

Each direction of a connection is a reader stamping what it receives with its due time and a
writer delivering it in order at that time and at the rate; the queue between them is bounded
(backpressure reaches the sender as a full socket, as from a real link). The relay is bounded
too: at most `max_connections`, and it stops itself after `lifetime_s`, closing every connection,
so a test that forgets it leaves nothing running.

    link = LongLink(box.port, delay_s=0.025, rate_bytes_s=8e6)
    rig.alias("far", port=link.port)      # ssh_config alias through the link
    ...
    link.close()
"""

import queue
import random
import socket
import threading
import time

_CHUNK = 256 * 1024
_MIN_QUEUE = 16          # chunks queued per direction at least (beyond the link's bytes in flight)
_RTO_S = 0.2             # Linux's minimum retransmission timeout
_BURST_S = 0.05


def dial(client, upstream):
    """The upstream end of a relayed connection, both ends without Nagle's delay (a relay must not
    add its own); None, and the client closed, when the upstream does not answer."""
    try:
        server = socket.create_connection(upstream)
    except OSError:
        client.close()
        return None
    for sock in (client, server):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return server


class LongLink:
    def __init__(self, upstream_port: int, delay_s: float = 0.025, rate_bytes_s: float = None, loss: float = 0.0,
                 stall_s: float = None, lifetime_s: float = 900.0, max_connections: int = 256, seed: int = None,
                 host: str = "127.0.0.1"):
        if not 0 <= loss < 1:
            raise ValueError(f"loss is a share of chunks in [0, 1), not {loss!r}")
        self.upstream = (host, upstream_port)
        self.delay_s = delay_s
        self.rate = rate_bytes_s
        self.loss = loss
        self.stall_s = _RTO_S + 2 * delay_s if stall_s is None else stall_s
        self.max_connections = max_connections
        self.up = 0            # bytes client -> server
        self.down = 0          # bytes server -> client
        self.connections = 0   # accepted so far
        self.open = 0          # open now
        self.most_open = 0     # the most open at once
        self.stalls = 0        # chunks "lost" and delivered late
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._socks = set()
        self._closed = threading.Event()
        # bytes one direction holds: the link's own (rate x delay) plus a margin of chunks
        in_flight = int((rate_bytes_s or 0) * delay_s)
        self._depth = max(_MIN_QUEUE, 2 * in_flight // _CHUNK + _MIN_QUEUE)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        self._timer = threading.Timer(lifetime_s, self.close)
        self._timer.daemon = True
        self._timer.start()

    @property
    def rtt_s(self) -> float:
        return 2 * self.delay_s

    def _accept(self):
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                full = self.open >= self.max_connections
            if full:
                client.close()
                continue
            server = dial(client, self.upstream)
            if server is None:
                continue
            with self._lock:
                self.connections += 1
                self.open += 1
                self.most_open = max(self.most_open, self.open)
                self._socks |= {client, server}
            pair = _Pair(self, client, server)
            for src, dst, direction in ((client, server, "up"), (server, client, "down")):
                q = queue.Queue(self._depth)
                threading.Thread(target=self._read, args=(src, q, pair), daemon=True).start()
                threading.Thread(target=self._write, args=(dst, q, direction, pair), daemon=True).start()

    def _read(self, src, q, pair):
        """Stamp each chunk with when it is due at the other end (late when it is "lost")."""
        try:
            while not self._closed.is_set():
                data = src.recv(_CHUNK)
                due = time.monotonic() + self.delay_s
                if data and self.loss and self._random.random() < self.loss:
                    due += self.stall_s
                    with self._lock:
                        self.stalls += 1
                if not pair.put(q, (due, data)) or not data:
                    return
        except OSError:
            pair.put(q, (0, None))

    def _write(self, dst, q, direction, pair):
        """Deliver in order, not before each chunk is due, at most at the rate."""
        free_at = time.monotonic()
        try:
            while True:
                due, data = q.get()
                if data is None:  # the other side broke: break this one too
                    pair.broken()
                    return
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                if not data:  # an orderly end: pass the half-close on
                    dst.shutdown(socket.SHUT_WR)
                    pair.half_closed()
                    return
                if self.rate:
                    # A writer woken late (a loaded machine) may catch up by _BURST_S, no more: the
                    # rate is the link's, not the scheduler's, and an idle link earns no credit.
                    free_at = max(free_at, time.monotonic() - _BURST_S) + len(data) / self.rate
                # counted before it is handed on: the reader at the far end may act on these bytes
                # (a test reads the counters) before this thread runs again
                with self._lock:
                    setattr(self, direction, getattr(self, direction) + len(data))
                dst.sendall(data)
                if self.rate:
                    wait = free_at - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
        except OSError:
            pair.broken()

    def _forget(self, socks):
        with self._lock:
            if not socks & self._socks:
                return
            self._socks -= socks
            self.open -= 1
        for sock in socks:
            _shut(sock)

    def close(self):
        """Stop accepting and end every connection (also called when the lifetime is up)."""
        self._closed.set()
        self._timer.cancel()
        _shut(self._listener)
        with self._lock:
            socks, self._socks = set(self._socks), set()
            self.open = 0
        for sock in socks:
            _shut(sock)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Pair:
    """One relayed connection: closed once both directions ended, or at once when one broke."""

    def __init__(self, link, client, server):
        self._link = link
        self._socks = {client, server}
        self._ended = 0
        self._lock = threading.Lock()
        self.dead = False

    def put(self, q, item) -> bool:
        """Queue `item` unless the connection is gone (its writer no longer takes any)."""
        while not self.dead:
            try:
                q.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def half_closed(self):
        with self._lock:
            self._ended += 1
            done = self._ended == 2
        if done:
            self.dead = True
            self._link._forget(self._socks)

    def broken(self):
        self.dead = True
        self._link._forget(self._socks)


def _shut(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def alias(rig, box, name: str, **link_options) -> LongLink:
    """A LongLink in front of `box` and an ssh_config alias `name` through it."""
    link = LongLink(box.port, **link_options)
    rig.alias(name, port=link.port)
    return link
