"""A TCP relay in front of a test sshd that counts the bytes on the wire and can throttle them.

The sync engines report their own byte counts, but a test of "how much was sent twice after a
cut" must not trust the code under test: this relay measures what actually crossed the (loopback)
wire, in each direction, independently of rsync's or paramiko's bookkeeping. A rate limit makes
a transfer slow enough to be cut at a chosen point without any test hook in the product.
A freeze (freeze_after) stalls the link itself: the connections stay open and nothing moves, at
an exact byte count decided in the relay, so no test races a polling thread against the transfer.
"""

import socket
import threading
import time

from tests.rig.longlink import dial

_BUF = 256 * 1024
_BURST_S = 0.05


class WireMeter:
    def __init__(self, upstream_port, rate_bytes_s=None, host="127.0.0.1"):
        self.upstream = (host, upstream_port)
        self.rate = rate_bytes_s
        self.up = 0      # client -> server
        self.down = 0    # server -> client
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._closed = False
        self._accepted = 0
        self._freeze = None          # (direction, byte count) that freezes the link, when armed
        self._frozen_below = None    # connections accepted before the freeze stay frozen
        self.frozen = threading.Event()
        self._released = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self):
        with self._lock:
            self.up = self.down = 0

    def freeze_after(self, nbytes, direction="up"):
        """Once `nbytes` more have crossed in `direction`, stop moving data, both ways, on every
        connection open at that moment: they stay open and silent until close(), as behind a
        stalled router. Connections made later flow normally. `frozen` is set at the freeze."""
        with self._lock:
            self._freeze = (direction, getattr(self, direction) + nbytes)

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = dial(client, self.upstream)
            if server is None:
                continue
            with self._lock:
                self._accepted += 1
                number = self._accepted
            threading.Thread(target=self._pump, args=(client, server, "up", number), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down", number), daemon=True).start()

    def _count(self, direction, n):
        with self._lock:
            total = getattr(self, direction) + n
            setattr(self, direction, total)
            if self._freeze and self._freeze[0] == direction and total >= self._freeze[1]:
                self._freeze = None
                self._frozen_below = self._accepted + 1
                self.frozen.set()

    def _stalled(self, number):
        if self._frozen_below is not None and number < self._frozen_below:
            self._released.wait()
            return True
        return False

    def _pump(self, src, dst, direction, number):
        # When this direction of the link is next free. A link idle for a while has no credit to
        # burst with later (beyond _BURST_S): a kept SSH master lives for minutes between transfers.
        free_at = time.monotonic()
        try:
            while True:
                data = src.recv(_BUF)
                if not data or self._stalled(number):
                    break
                dst.sendall(data)
                self._count(direction, len(data))
                if self.rate:
                    now = time.monotonic()
                    free_at = max(free_at, now - _BURST_S) + len(data) / self.rate
                    if free_at > now:
                        time.sleep(free_at - now)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self):
        self._closed = True
        self._released.set()
        self._listener.close()
