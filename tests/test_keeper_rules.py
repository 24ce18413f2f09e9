"""The keeper's pure rules (gpuops.keeper.rules) and ledger (gpuops.keeper.ledger): when a box is
lost and when it is not, what is copied, what the vault keeps, and where each second went."""

import pytest

from gpuops.keeper import ledger, rules

POLICY = {"lost_after_s": 60.0, "keep": 2}
BOOT = "b" * 32


def answer(phase="running", sup=True, live="alive", boot=BOOT, complete=(), best=(), final=None):
    return {"boot_id": boot, "phase": phase, "supervisor_alive": sup, "attempt_liveness": live, "final": final,
            "checkpoints": {"dir": "/c", "complete": [{"name": n, "step": int(n.split("-")[1])} for n in complete],
                            "best": list(best)}}


def facts(ans, failing_since=100.0, held=(), error=None, **more):
    return dict({"answer": ans, "error": error, "failing_since": failing_since, "boot_id": BOOT, "held": list(held)}, **more)


def test_a_silence_shorter_than_lost_after_is_waited_out_and_a_longer_one_is_a_loss():
    quiet = rules.decide(159.0, facts(None, error="connection refused"), POLICY)
    assert quiet["do"] == rules.WAIT and "lost after 60s" in quiet["why"]
    gone = rules.decide(160.0, facts(None, error="connection refused"), POLICY)
    assert gone["do"] == rules.RELAUNCH and gone["why"].startswith("unreachable for 60s")


def test_a_new_boot_id_is_proof_of_loss_at_once():
    out = rules.decide(101.0, facts(answer(boot="c" * 32, sup=False, live="rebooted")), POLICY)
    assert out["do"] == rules.RELAUNCH and out["why"].startswith("rebooted")


def test_a_gone_supervisor_is_a_loss_only_when_no_process_of_the_attempt_lives():
    assert rules.decide(101.0, facts(answer(sup=False, live="gone")), POLICY)["do"] == rules.RELAUNCH
    alive = rules.decide(101.0, facts(answer(sup=False, live="alive")), POLICY)
    assert alive["do"] == rules.WAIT and "never a second copy" in alive["why"]


def test_new_complete_checkpoints_are_copied_newest_first_keeping_k_and_the_best():
    out = rules.decide(101.0, facts(answer(complete=("ckpt-30", "ckpt-20", "ckpt-10"), best=["ckpt-10"]),
                                    held=("ckpt-20",)), POLICY)
    assert out == {"do": rules.EVACUATE, "why": "2 new complete checkpoint(s) on the box",
                   "names": ["ckpt-30", "ckpt-10"]}


def test_a_run_that_ended_on_its_box_by_its_own_judgement_is_never_moved():
    out = rules.decide(101.0, facts(answer(phase="ended", sup=False, live="gone",
                                           final={"class": "python-exception", "why": "ValueError"})), POLICY)
    assert out["do"] == rules.FAILED and "ValueError" in out["why"]


def test_a_completed_run_finishes_only_once_its_final_checkpoint_and_outputs_are_held():
    done = answer(phase="ended", sup=False, live="gone", complete=("ckpt-40",), final={"class": None})
    assert rules.decide(101.0, facts(done), POLICY)["do"] == rules.EVACUATE
    outputs = dict(POLICY, outputs=["out"])
    assert rules.decide(101.0, facts(done, held=("ckpt-40",)), outputs)["do"] == rules.OUTPUTS
    assert rules.decide(101.0, facts(done, held=("ckpt-40",), outputs_done=True), outputs)["do"] == rules.FINISH


def test_the_vault_prunes_past_the_k_newest_by_step_never_the_best():
    held = [{"name": f"c-{s}", "step": s} for s in (10, 20, 5, 30)]
    assert rules.prunable(held, 2, best=["c-5"]) == ["c-10"]
    assert rules.prunable(held, 2) == ["c-10", "c-5"]


def test_the_ledger_splits_the_wall_time_and_adds_up():
    marks = [{"kind": "launch", "at": 0.0, "box": "a", "usd_per_hour": 3.6},
             {"kind": "running", "at": 10.0, "box": "a", "usd_per_hour": 3.6, "redone_after": 70.0},
             {"kind": "detection", "at": 100.0, "box": "a", "usd_per_hour": 3.6},
             {"kind": "launch", "at": 130.0, "box": "b", "usd_per_hour": 7.2},
             {"kind": "running", "at": 150.0, "box": "b", "usd_per_hour": 7.2},
             {"kind": "idle", "at": 250.0, "box": "b", "usd_per_hour": 7.2}]
    doc = ledger.ledger(marks, 260.0)
    seconds = {k: v["seconds"] for k, v in doc["totals"].items()}
    assert seconds == {"useful": 60.0 + 100.0, "redone": 30.0, "detection": 30.0, "launch": 10.0, "relaunch": 20.0,
                       "idle": 10.0}
    assert sum(seconds.values()) == doc["wall_s"] == 260.0
    assert doc["usd"] == pytest.approx(3.6 * 130 / 3600 + 7.2 * 130 / 3600)
    assert doc["totals"]["redone"]["usd"] == pytest.approx(0.03)
    assert ledger.line(doc).startswith("$0.3900 over 260s: useful 160s")


def node(box, ans, failing_since=None, error=None):
    return {"box": box, "answer": ans, "error": error, "failing_since": failing_since, "boot_id": BOOT}


def test_a_gang_waits_while_a_node_is_silent_even_when_its_peer_ended_and_relaunches_once_it_is_lost():
    # the head gave up because its peer vanished: no verdict on the run while the peer is only silent
    head = answer(phase="ended", sup=False, live="gone", final={"class": "node-lost", "why": "peer gone"})
    silent = node("b", None, failing_since=100.0, error="connection refused")
    waiting = rules.decide_gang(159.0, [node("a", head), silent], {"held": []}, POLICY)
    assert waiting["do"] == rules.WAIT and waiting["why"].startswith("b: not answering for 59s")
    gone = rules.decide_gang(160.0, [node("a", head), silent], {"held": []}, POLICY)
    assert gone["do"] == rules.RELAUNCH and list(gone["boxes"]) == ["b"] and gone["boxes"]["b"].startswith("unreachable")
    # with every node answering, the head's own end is the run's: a bug fails on every box
    ended = node("b", answer(phase="ended", sup=False, live="gone", final={"class": "node-lost"}))
    assert rules.decide_gang(101.0, [node("a", head), ended], {"held": []}, POLICY)["do"] == rules.FAILED


def test_a_gang_copies_the_heads_checkpoints_while_a_node_is_judged_and_finishes_when_every_node_ended():
    head = answer(complete=("ckpt-10",))
    silent = node("b", None, failing_since=100.0, error="refused")
    assert rules.decide_gang(101.0, [node("a", head), silent], {"held": []}, POLICY)["names"] == ["ckpt-10"]
    done = answer(phase="ended", sup=False, live="gone", complete=("ckpt-10",), final={"class": None})
    going = node("b", answer())
    assert rules.decide_gang(101.0, [node("a", done), going], {"held": ["ckpt-10"]}, POLICY)["do"] == rules.WAIT
    over = node("b", answer(phase="ended", sup=False, live="gone", final={"class": None}))
    assert rules.decide_gang(101.0, [node("a", done), over], {"held": ["ckpt-10"]}, POLICY)["do"] == rules.FINISH


def test_a_budget_is_reached_at_its_figure_and_never_without_one():
    assert rules.over_budget(0.99, 1.0) is None and rules.over_budget(5.0, None) is None
    assert rules.over_budget(1.0, 1.0) == {"do": rules.BUDGET, "why": "spent $1.0000: --budget $1 reached"}
