"""The on-box data-plane probe's parts, on loopback: the table's words, a line reader that keeps
what came after a newline, and two real listeners that reach each other."""

import socket
import threading
import time

from gpuops.onbox.gang import gang_peers as P


def test_the_table_round_trips_and_words_that_are_not_one_are_skipped():
    table = {0: ("10.0.0.5", 40123), 2: ("10.0.0.7", 38211)}
    assert P.decode(P.encode(table).split()) == table
    assert P.decode(["1=10.0.0.6", "x=1.2.3.4:5", "3=:80", "4=10.0.0.9:http", "5=10.0.0.8:9"]) == {5: ("10.0.0.8", 9)}


def test_the_heads_answer_and_its_table_in_one_segment_are_two_lines():
    a, b = socket.socketpair()
    try:
        a.sendall(b"gpuops-gang n head\ngpuops-gang n peers 0=127.0.0.1:5\n")
        lines = P.Lines(b)
        deadline = time.time() + 2
        assert lines.read(deadline) == "gpuops-gang n head"
        assert lines.read(deadline, P.TABLE_MAX) == "gpuops-gang n peers 0=127.0.0.1:5"
    finally:
        a.close()
        b.close()


def test_two_nodes_reach_each_others_ephemeral_listener_and_a_closed_port_is_refused():
    servers = [P.bind("127.0.0.1") for _ in range(2)]
    table = {i: ("127.0.0.1", listening["port"]) for i, (_, listening) in enumerate(servers)}
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: refused, like a REJECT rule
    table[2] = ("127.0.0.1", closed.getsockname()[1])
    answers = {}
    threads = [threading.Thread(target=lambda i=i: answers.__setitem__(
        i, P.exchange(servers[i][0], servers[i][1], table, "n0nce", i, 1.0))) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    closed.close()
    for me, other in ((0, 1), (1, 0)):
        probes = {p["node"]: p for p in answers[me]["probes"]}
        assert probes[other]["connected"] and probes[other]["answered"] and answers[me]["heard"] == [other]
        assert not probes[2]["connected"] and probes[2]["error"] == "Connection refused" and probes[2]["attempts"] > 1
        assert answers[me]["peers"] == 3 and answers[me]["port"] == table[me][1]


def test_a_node_that_got_no_table_tries_nobody():
    server, listening = P.bind("127.0.0.1")
    out = P.exchange(server, listening, None, "n", 1, 1.0)
    assert out["peers"] is None and out["probes"] == [] and server.fileno() == -1
