"""The link between the supervisors of a gang run's nodes (stdlib only): TCP, one line of JSON a
message (gpuops.onbox.gang.gangrules says what the lines mean and when a node is lost).

Why a link of their own and not the workstation: the gang must be stopped and retried while the
workstation sleeps, and the boxes of a gang can reach each other (the gang preflight proved the
rendezvous port and the ephemeral range between them) but not, in general, log in to each other.
The head's supervisor listens on an ephemeral port of the address the others reach it at, bound
before the launcher hears of the job, so the workstation reads the port from the head's launch
answer and hands it to the other nodes. Each message after the hello is trusted only from a
connection that said the gang's token, which only the gang's own job records hold.

No threads: the supervisor forks each attempt, and a fork while another thread holds a lock can
leave the child stuck. Everything here is non-blocking and pumped from the supervisor's own loop
(each round of its watch, about a second, and while it waits between attempts).
"""

import socket
import time

from . import gangrules as rules

CONNECT_TIMEOUT_S = 5.0
SEND_TIMEOUT_S = 2.0
POLL_S = 0.25
STOP_WAIT_S = 60.0  # after a stop, the longest the head waits for a node's facts before it counts it lost


class _Conn(object):
    def __init__(self, sock) -> None:
        sock.setblocking(False)
        self.sock, self.buf, self.closed = sock, b"", False

    def lines(self):
        out = []
        while not self.closed:
            try:
                chunk = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                break
            except (OSError, socket.error):
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            self.buf += chunk
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                out.append(line)
            if len(self.buf) > rules.LINE_MAX:  # a line that never ends is not ours
                self.closed = True
        return out

    def send(self, msg) -> bool:
        if self.closed:
            return False
        try:
            self.sock.settimeout(SEND_TIMEOUT_S)
            self.sock.sendall(rules.encode(msg))
            return True
        except (OSError, socket.error):
            self.closed = True
            return False
        finally:
            if not self.closed:
                self.sock.setblocking(False)

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def open_link(gang):
    """The link a gang run's supervisor keeps: Head for node 0, Worker for the others; None for a
    run that is not a gang's."""
    if not gang:
        return None
    return Head(gang) if gang["node"] == 0 else Worker(gang)


class Head(object):
    """Node 0's side: it hears every other node, stops them all when one goes, decides for the gang."""

    def __init__(self, gang) -> None:
        self.token, self.count = gang["token"], gang["nodes"]
        host = gang.get("bind") or ""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.pending, self.conns = [], {}
        self.nodes = dict((i, {"seen": None, "closed": False, "down": None, "ended": None}) for i in range(1, self.count))
        self.started_at, self.beat_at, self.stopped, self.own_clean_at = time.time(), 0.0, set(), None

    def pump(self) -> None:
        now = time.time()
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError, OSError):
                break
            self.pending.append((_Conn(sock), now))
        for conn, since in list(self.pending):
            for line in conn.lines():
                msg = rules.parse(line, self.token)
                if msg and msg["t"] == "hello" and msg["node"] in self.nodes:
                    old = self.conns.get(msg["node"])
                    if old is not None:
                        old.close()
                    self.conns[msg["node"]] = conn
                    self.nodes[msg["node"]].update(seen=now, closed=False)
                    break
            if conn.closed or conn in self.conns.values() or now - since > rules.LOST_S:
                self.pending.remove((conn, since))
                if conn not in self.conns.values():
                    conn.close()
        for index, conn in list(self.conns.items()):
            node = self.nodes[index]
            for line in conn.lines():
                msg = rules.parse(line, self.token)
                if msg is None:
                    continue
                node["seen"] = now
                if msg["t"] == "down":
                    node["down"] = {"attempt": msg["attempt"], "clean": msg["clean"], "at": msg["at"] or now}
                elif msg["t"] == "ended":
                    node["ended"] = {"attempt": msg["attempt"], "facts": msg["facts"]}
            if conn.closed:
                node["closed"] = True
        if now - self.beat_at >= rules.BEAT_S:
            self.beat_at = now
            self.broadcast({"t": "beat"})

    def broadcast(self, msg) -> None:
        for conn in list(self.conns.values()):
            conn.send(msg)

    def stop_all(self, attempt, why) -> None:
        if attempt not in self.stopped:
            self.stopped.add(attempt)
            self.broadcast({"t": "stop", "attempt": attempt, "why": why})

    def tick(self, attempt):
        """Why this attempt must stop (the others are told at once), or None."""
        self.pump()
        why = rules.verdict(time.time(), attempt, self.nodes, self.started_at)
        if why:
            self.stop_all(attempt, why)
        return why

    def down(self, attempt, record) -> None:
        clean = record.get("exit_code") == 0 and not record.get("signal")
        if not clean:
            self.stop_all(attempt, "node 0's process ended (attempt %d): its peers' collectives can never complete"
                          % attempt)
        self.own_clean_at = time.time() if clean else None

    def settle(self, attempt, facts):
        """(deciding node, its facts) once every node has reported its end of `attempt` or is lost."""
        ended_at = time.time()
        while True:
            self.pump()
            now = time.time()
            if self.own_clean_at is None or now - self.own_clean_at > rules.CLEAN_GRACE_S:
                self.stop_all(attempt, "node 0 ended; the gang's attempt %d is over" % attempt)
            why = rules.verdict(now, attempt, self.nodes, self.started_at, own_clean_at=self.own_clean_at)
            if why:
                self.stop_all(attempt, why)
            reports, waiting = {}, False
            for index, node in self.nodes.items():
                if (node["ended"] or {}).get("attempt") == attempt:
                    reports[index] = node["ended"]["facts"]
                elif self._lost(node, now) or (attempt in self.stopped and now - ended_at > STOP_WAIT_S):
                    reports[index] = None
                else:
                    waiting = True
            if not waiting:
                return rules.deciding(facts, reports, attempt)
            time.sleep(POLL_S)

    def _lost(self, node, now):
        if node["closed"]:
            return True
        if node["seen"] is None:
            return now - self.started_at > rules.JOIN_S
        return now - node["seen"] > rules.LOST_S

    def announce(self, attempt, checkpoint, decision):
        """Every node starts `attempt` from `checkpoint` (the head's pick)."""
        for node in self.nodes.values():
            node.update(down=None, ended=None)
        self.broadcast({"t": "next", "attempt": attempt, "checkpoint": checkpoint, "retry": True,
                        "class": decision.get("class"), "why": decision.get("why")})
        return checkpoint

    def finish(self, decision) -> None:
        self.broadcast({"t": "end", "retry": False, "class": decision.get("class"), "why": decision.get("why")})
        for conn in list(self.conns.values()):
            conn.close()
        self.listener.close()


class Worker(object):
    """Another node's side: it says it is alive, reports its ends, and does as the head says."""

    def __init__(self, gang) -> None:
        self.token, self.index = gang["token"], gang["node"]
        self.address = (gang["head"], gang["port"])
        self.conn, self.connect_at = None, 0.0
        self.started_at = self.seen = time.time()
        self.beat_at, self.orders, self.checkpoint = 0.0, [], None
        self.connect()

    def connect(self) -> None:
        self.connect_at = time.time()
        try:
            sock = socket.create_connection(self.address, timeout=CONNECT_TIMEOUT_S)
        except (OSError, socket.error):
            return
        self.conn = _Conn(sock)
        self.conn.send({"t": "hello", "node": self.index, "token": self.token})
        self.seen = time.time()

    def pump(self, attempt=None) -> None:
        now = time.time()
        if self.conn is None and now - self.connect_at >= 1.0:
            self.connect()
        if self.conn is None:
            return
        for line in self.conn.lines():
            msg = rules.parse(line, self.token)
            if msg is not None:
                self.seen = now
                if msg["t"] in ("stop", "next", "end"):
                    self.orders.append(msg)
        if now - self.beat_at >= rules.BEAT_S:
            self.beat_at = now
            self.conn.send({"t": "beat", "attempt": attempt})

    def _head_lost(self, now):
        if self.conn is not None and self.conn.closed:
            return "the gang's head (node 0) closed its link: its supervisor or its box is gone"
        if now - self.seen > rules.LOST_S:
            return "the gang's head (node 0) has not been heard from for %.0fs: it is lost" % (now - self.seen)
        return None

    def tick(self, attempt):
        self.pump(attempt)
        stop = next((m for m in self.orders if m["t"] == "stop" and m["attempt"] == attempt), None)
        if stop is not None:
            return stop["why"] or "the gang's head stopped attempt %d" % attempt
        return self._head_lost(time.time())

    def down(self, attempt, record) -> None:
        if self.conn is not None:
            self.conn.send({"t": "down", "attempt": attempt, "at": record.get("ended_at") or time.time(),
                            "clean": record.get("exit_code") == 0 and not record.get("signal")})

    def settle(self, attempt, facts) -> dict:
        """The head's decision for the gang after `attempt`, as retrypolicy.decide shapes one."""
        if self.conn is not None:
            self.conn.send({"t": "ended", "attempt": attempt, "facts": facts})
        while True:
            self.pump(attempt)
            told = next((m for m in self.orders if m["t"] in ("next", "end")), None)
            if told is not None:
                self.orders = [m for m in self.orders if m is not told and m["t"] != "stop"]
                self.checkpoint = told["checkpoint"] if told["t"] == "next" else None
                return {"retry": told["t"] == "next", "class": told["class"], "backoff_s": 0.0,
                        "why": "the gang's head decided: %s" % (told["why"] or "")}
            lost = self._head_lost(time.time())
            if lost:
                self.checkpoint = None
                return {"retry": False, "class": "node-fail", "backoff_s": None,
                        "why": "%s; the gang cannot go on without its rendezvous host" % lost}
            time.sleep(POLL_S)

    def announce(self, attempt, checkpoint, decision):
        return self.checkpoint

    def finish(self, decision) -> None:
        if self.conn is not None:
            self.conn.close()
