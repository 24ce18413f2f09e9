"""What the keeper does next: pure decisions over what it saw. gpuops.keeper.loop gathers the facts
(the box's answer from gpuops.onbox.facts.keeper_facts, what the vault holds) and carries out the action.
Times are the keeper's monotonic clock, passed in.

A box is lost only on time or on proof (do no harm: a second copy of a run that still runs would
fight the first over its checkpoints and its GPUs):
  * time: every call to it failed for `lost_after_s`, counted from the first failure in a row (a
    network blip shorter than that is waited out; a keeper busy copying never makes a box look
    silent for longer than it failed);
  * proof: it answers with another boot id than the attempt started under (it rebooted: every
    process of the run is gone), or its run record says the run goes on while its supervisor is
    gone and the attempt's process too (nothing on the box will ever finish or retry it).
A run that ended on the box by its own supervisor's judgement (completed, gave up, stopped, timed
out) is never relaunched elsewhere: a bug fails on every box, and a stop always wins.

A gang (torchrun over several boxes) is lost when any node's box is lost; a node that ended because
its peer vanished is no verdict on the run while that peer is only silent, so the gang waits for the
silent node to be judged. Its head (node 0, where rank 0 writes the checkpoints) says the rest.
"""

LOST_AFTER_S = 180.0
KEEP = 3

WAIT, EVACUATE, OUTPUTS, RELAUNCH, FINISH, FAILED = "wait", "evacuate", "outputs", "relaunch", "finish", "failed"
BUDGET = "budget"


def _step_key(item):
    step = item.get("step")
    return (step is not None, step if step is not None else 0)


def wanted(checkpoints, held, keep) -> list:
    """Names of the box's complete checkpoints the vault should hold and does not: the `keep`
    newest (the box lists them newest first), then the best ones."""
    if not checkpoints:
        return []
    complete = [c["name"] for c in checkpoints.get("complete") or []]
    names = complete[:max(1, keep)]
    names += [b for b in checkpoints.get("best") or [] if b in complete and b not in names]
    return [n for n in names if n not in set(held)]


def prunable(held, keep, best=()) -> list:
    """Names of vault checkpoints past the `keep` newest by step (then by order of arrival), never
    a best one: [{name, step}] in arrival order in, names out."""
    ordered = sorted(enumerate(held), key=lambda p: (_step_key(p[1]), p[0]), reverse=True)
    kept = {h["name"] for _, h in ordered[:max(1, keep)]} | set(best or ())
    return [h["name"] for h in held if h["name"] not in kept]


def lost(now, facts, lost_after_s) -> tuple:
    """(why the box is lost, or None; a note on what is being waited out, or None)."""
    answer = facts.get("answer")
    if answer is None:
        silent = now - facts["failing_since"]
        if silent >= lost_after_s:
            return (f"unreachable for {silent:.0f}s (past --lost-after {lost_after_s:g}s): "
                    f"{facts.get('error') or 'no answer'}"), None
        return None, f"not answering for {silent:.0f}s, lost after {lost_after_s:g}s: {facts.get('error') or 'no answer'}"
    if facts.get("boot_id") and answer.get("boot_id") and answer["boot_id"] != facts["boot_id"]:
        return f"rebooted (boot id {answer['boot_id'][:8]}, the attempt started under {facts['boot_id'][:8]})", None
    if answer.get("phase") != "ended" and not answer.get("supervisor_alive"):
        if answer.get("attempt_liveness") == "alive":
            return None, "the run's supervisor is gone but its attempt still runs: waiting, never a second copy"
        return "the run's supervisor is gone and no process of the attempt lives", None
    return None, None


def decide(now, facts, policy) -> dict:
    """The next action: {do, why, names?}. `facts`: answer (the box's, or None), error, failing_since,
    boot_id (the attempt's), held (names the vault holds verified), outputs_done (bool).
    `policy`: lost_after_s, keep, outputs (paths the run must leave in the vault)."""
    why, note = lost(now, facts, policy.get("lost_after_s", LOST_AFTER_S))
    if why:
        return {"do": RELAUNCH, "why": why}
    answer = facts.get("answer")
    if answer is None:
        return {"do": WAIT, "why": note}
    names = wanted(answer.get("checkpoints"), facts.get("held") or [], policy.get("keep", KEEP))
    if names:
        return {"do": EVACUATE, "why": f"{len(names)} new complete checkpoint(s) on the box", "names": names}
    if answer.get("phase") != "ended":
        return {"do": WAIT, "why": note or "the run goes on"}
    final = answer.get("final") or {}
    if final.get("class") is not None:
        return {"do": FAILED, "why": f"the run ended on the box: {final.get('why') or final['class']}"}
    if policy.get("outputs") and not facts.get("outputs_done"):
        return {"do": OUTPUTS, "why": "the run completed: its outputs go to the vault"}
    return {"do": FINISH, "why": "the run completed and its final checkpoint and outputs are in the vault"}


def decide_gang(now, nodes, facts, policy) -> dict:
    """decide() for a gang: `nodes` [{box, answer, error, failing_since, boot_id}] in node order;
    `facts`: held, outputs_done. A RELAUNCH names every lost node in `boxes` {box: why}."""
    gone, notes = {}, []
    for node in nodes:
        why, note = lost(now, node, policy.get("lost_after_s", LOST_AFTER_S))
        if why:
            gone[node["box"]] = why
        elif note:
            notes.append(f"{node['box']}: {note}")
    if gone:
        return {"do": RELAUNCH, "why": "; ".join(f"{b} {w}" for b, w in gone.items()), "boxes": gone}
    head = dict(facts, **{k: nodes[0].get(k) for k in ("answer", "error", "failing_since", "boot_id")})
    action = decide(now, head, policy)
    if action["do"] == EVACUATE:  # what the head wrote is copied while another node is judged
        return action
    if any(n.get("answer") is None for n in nodes):
        return {"do": WAIT, "why": "; ".join(notes)}
    if action["do"] in (OUTPUTS, FINISH) and any(n["answer"].get("phase") != "ended" for n in nodes[1:]):
        return {"do": WAIT, "why": "the head completed; the other nodes have not ended yet"}
    return action


def over_budget(spent, budget):
    """The BUDGET action once the ledger's money `spent` reached --budget (None: no budget), else None."""
    if budget is None or spent < budget:
        return None
    return {"do": BUDGET, "why": f"spent ${spent:.4f}: --budget ${budget:g} reached"}
