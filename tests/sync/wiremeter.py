"""A TCP relay in front of a test sshd that counts the bytes on the wire and can throttle them.

The sync engines report their own byte counts, but a test of "how much was sent twice after a
cut" must not trust the code under test: this relay measures what actually crossed the (loopback)
wire, in each direction, independently of rsync's or paramiko's bookkeeping. A rate limit makes
a transfer slow enough to be cut at a chosen point without any test hook in the product.
"""

import socket
import threading
import time

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
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self):
        with self._lock:
            self.up = self.down = 0

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, server, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down"), daemon=True).start()

    def _pump(self, src, dst, direction):
        # When this direction of the link is next free. A link idle for a while has no credit to
        # burst with later (beyond _BURST_S): a kept SSH master lives for minutes between transfers.
        free_at = time.monotonic()
        try:
            while True:
                data = src.recv(_BUF)
                if not data:
                    break
                dst.sendall(data)
                with self._lock:
                    setattr(self, direction, getattr(self, direction) + len(data))
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
        self._listener.close()
