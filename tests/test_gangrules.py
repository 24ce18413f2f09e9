"""The pure rules of a gang run's link (gpuops.onbox.gang.gangrules): when the survivors are stopped,
which node's end decides the gang's retry, and what another box's message may carry."""

import json

from gpuops.onbox.gang import gangrules as rules

T0 = 1000.0
TOKEN = "ab" * 16


def node(seen=T0, **kw):
    return dict({"seen": seen, "closed": False, "down": None, "ended": None}, **kw)


def test_a_node_whose_process_died_stops_the_survivors_at_once():
    nodes = {1: node(down={"attempt": 2, "clean": False, "at": T0})}
    assert "node 1's process ended (attempt 2)" in rules.verdict(T0 + 0.5, 2, nodes, T0)


def test_a_stale_down_of_an_earlier_attempt_stops_nothing():
    nodes = {1: node(seen=T0 + 5, down={"attempt": 1, "clean": False, "at": T0})}
    assert rules.verdict(T0 + 6, 2, nodes, T0) is None


def test_a_silent_node_is_lost_after_lost_s_not_before():
    nodes = {1: node(seen=T0)}
    assert rules.verdict(T0 + rules.LOST_S - 1, 1, nodes, T0) is None
    assert "node 1 has not been heard from" in rules.verdict(T0 + rules.LOST_S + 1, 1, nodes, T0)


def test_a_closed_link_is_a_lost_node_and_a_node_that_never_joined_is_given_join_s():
    assert "closed its link" in rules.verdict(T0 + 1, 1, {1: node(closed=True)}, T0)
    never = {1: node(seen=None)}
    assert rules.verdict(T0 + rules.LOST_S + 5, 1, never, T0) is None
    assert "never joined" in rules.verdict(T0 + rules.JOIN_S + 1, 1, never, T0)


def test_a_node_that_completed_gives_the_others_a_grace_before_they_are_stopped():
    nodes = {1: node(seen=T0 + 30, down={"attempt": 1, "clean": True, "at": T0})}
    assert rules.verdict(T0 + 30, 1, nodes, T0) is None
    assert "completed" in rules.verdict(T0 + rules.CLEAN_GRACE_S + 1, 1, nodes, T0)


def test_the_node_that_failed_first_decides_never_one_the_gang_stopped():
    own = {"ended_by": "peer-lost", "exit_code": None, "signal": "SIGKILL", "at": T0 + 3}
    reports = {1: {"exit_code": 1, "triage_class": "unknown-death", "at": T0 + 1},
               2: {"exit_code": 1, "triage_class": "python-exception", "at": T0 + 2}}
    assert rules.deciding(own, reports, 1) == (1, reports[1])


def test_a_stop_anywhere_decides_and_a_lost_node_is_a_peer_loss():
    own = {"exit_code": 1, "at": T0}
    assert rules.deciding(own, {1: {"ended_by": "stop", "at": T0 + 9}}, 1)[0] == 1
    peer = {"ended_by": "peer-lost", "exit_code": None}
    assert rules.deciding(peer, {1: None}, 1) == (1, {"ended_by": "peer-lost", "exit_code": None})


def test_every_node_exited_0_and_the_head_decides_completed():
    clean = {"exit_code": 0, "signal": None}
    assert rules.deciding(clean, {1: clean, 2: clean}, 3) == (0, clean)


def test_a_message_from_another_box_is_bounded_and_typed():
    hello = rules.encode({"t": "hello", "node": 1, "token": TOKEN})
    assert rules.parse(hello.strip(), TOKEN) == {"t": "hello", "attempt": None, "node": 1}
    assert rules.parse(rules.encode({"t": "hello", "node": 1, "token": "x" * 32}).strip(), TOKEN) is None
    assert rules.parse(b"x" * (rules.LINE_MAX + 1), TOKEN) is None
    assert rules.parse(b"not json", TOKEN) is None
    assert rules.parse(json.dumps({"t": "rm -rf"}).encode(), TOKEN) is None
    assert rules.parse(json.dumps({"t": "beat", "attempt": True}).encode(), TOKEN) is None
    facts = {"exit_code": 1, "signal": "S" * 999, "job_pids": list(range(1000)) + ["x"], "evil": 1,
             "triage_class": ["no"], "at": 5}
    got = rules.parse(json.dumps({"t": "ended", "attempt": 1, "facts": facts}).encode(), TOKEN)["facts"]
    assert got == {"exit_code": 1, "signal": "S" * rules.TEXT_MAX, "job_pids": list(range(rules.LIST_MAX)),
                   "at": 5.0}


def test_a_gang_place_in_the_policy_is_checked_on_the_box():
    import pytest

    from gpuops.onbox.run import boxpolicy

    head = {"node": 0, "nodes": 2, "token": TOKEN, "bind": "10.0.0.1"}
    assert boxpolicy.check_gang(head) == head
    worker = {"node": 1, "nodes": 2, "token": TOKEN, "head": "10.0.0.1", "port": 40000, "extra": "dropped"}
    assert "extra" not in boxpolicy.check_gang(worker)
    for bad in (dict(head, node=2), dict(head, token="x"), dict(worker, port=0), dict(worker, head="a;rm -rf /"),
                dict(head, nodes=True), "gang"):
        with pytest.raises(boxpolicy.JobError):
            boxpolicy.check_gang(bad)


def test_the_gang_token_stays_on_the_boxes():
    """The nodes greet each other with it: a launch's or a status's answer must not carry it."""
    from gpuops.engines import answers

    token = "ab" * 16
    doc = {"job_id": "20261127-110000-abcdef", "meta": {"policy": {"max_retries": 1, "gang": {"node": 1, "nodes": 2,
                                                                                            "token": token}}},
           "run": {"policy": {"gang": {"node": 1, "token": token}}}}
    shown = answers.hide_gang_token(doc)
    assert token not in repr(shown) and shown["meta"]["policy"]["gang"]["node"] == 1


def test_a_hanging_alert_cannot_outlast_a_nodes_silence_limit():
    from gpuops.onbox.gang import gangrules
    from gpuops.onbox.run import runevents

    assert runevents.NOTIFY_TIMEOUT_S + runevents.KILL_WAIT_S <= gangrules.LOST_S / 2
