"""The long-link emulator (tests/rig/longlink.py) in front of a loopback echo server: bytes arrive
intact and in order, no sooner than the delay allows and no faster than the rate, a lost chunk
arrives late, and the relay bounds itself. Only lower bounds on time: a loaded machine can only
make a link slower."""

import os
import socket
import threading
import time

import pytest

from tests.rig.longlink import LongLink


@pytest.fixture
def echo():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve(conn):
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def _round_trip(port, payload):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        started = time.monotonic()
        threading.Thread(target=s.sendall, args=(payload,), daemon=True).start()
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += chunk
        return got, time.monotonic() - started


def _closed(sock) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_round_trip_takes_the_delay_both_ways(echo):
    with LongLink(echo, delay_s=0.05) as link:
        got, secs = _round_trip(link.port, b"ping")
    assert got == b"ping" and secs >= 0.1
    assert link.up == link.down == 4


def test_each_connection_is_held_to_the_rate_and_the_bytes_arrive_intact(echo):
    payload = os.urandom(1 << 20)
    with LongLink(echo, delay_s=0.001, rate_bytes_s=4e6) as link:
        got, secs = _round_trip(link.port, payload)
    assert got == payload
    assert secs >= len(payload) / 4e6 * 0.95


def test_a_lost_chunk_arrives_late_and_in_order(echo):
    payload = os.urandom(1 << 20)
    with LongLink(echo, delay_s=0.001, loss=0.5, stall_s=0.05, seed=7) as link:
        got, secs = _round_trip(link.port, payload)
    assert got == payload
    assert link.stalls > 0 and secs >= 0.05  # a stall on either leg holds everything behind it back


def test_the_link_stops_itself_and_bounds_its_connections(echo):
    link = LongLink(echo, delay_s=0.001, lifetime_s=0.5, max_connections=1)
    first = socket.create_connection(("127.0.0.1", link.port), timeout=5)
    second = socket.create_connection(("127.0.0.1", link.port), timeout=5)
    assert _closed(second)  # over the bound: closed at once
    time.sleep(1.0)
    assert _closed(first)  # the lifetime ended it
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", link.port), timeout=1)
    assert link.connections == 1
