"""What `status` and `wait` say of a kept run (one the keeper looks after, `launch --vault`): read
from the keeper's record on this machine, no box asked. Where each attempt ran and why it ended,
the boxes lost, what the vault holds, the ledger, the keeper's own state, the newest events."""

import time

from .. import errors
from ..envelope import CODE_KEY, envelope, step
from ..onbox.host import plans
from . import ledger, record, remotevault, vault

EVENTS_SHOWN = 20
WAIT_POLL_S = 1.0


def kept(run_id):
    """The run's keeper record, or None when `run_id` is no kept run (a box's job, then)."""
    if not run_id or not vault.plain(run_id):
        return None
    rec = record.read(run_id)
    if rec is not None and rec.get("keeper_host"):  # its keeper runs on another host: its record there
        from . import remotehost

        return remotehost.follow(rec)
    return rec


def status(rec) -> dict:
    run_id, phase = rec["run_id"], rec["phase"]
    end = rec.get("ended_at") or time.time()
    money = ledger.ledger(rec["marks"], end)
    away = rec.get("keeper_host")
    keeper = rec.get("keeper_seen") if away else record.keeper_alive(run_id)
    attempts = [{"n": i + 1, "box": a["box"], "job": a["job"], "launched_at": a["launched_at"],
                 "ended_at": a.get("ended_at"), "why": a.get("ended_why"), "resumed_from": a.get("resumed_from"),
                 "gang_id": a.get("gang_id"), "boxes": [n["box"] for n in a.get("nodes") or [a]]}
                for i, a in enumerate(rec["attempts"])]
    kept = remotevault.vault_of(rec["spec"], run_id)
    try:
        held = [h["name"] for h in kept.held()]
    except errors.GpuopsError as e:  # a vault host out of reach: status still answers
        held = [f"(not read: {e.message})"]
    data = {"kept": {"run_id": run_id, "phase": phase, "why": rec.get("why"), "attempts": attempts,
                     "lost": rec.get("lost") or {}, "vault": {"root": kept.root, "held": held},
                     "ledger": money, "keeper": keeper, "waiting": rec.get("waiting"),
                     "events": rec["events"][-EVENTS_SHOWN:]}}
    now = rec["attempts"][-1]
    where = f"attempt {len(attempts)} on {now['box']} (job {now['job']})"
    if now.get("gang_id"):  # a gang: its head's job, and every node's box
        where = f"attempt {len(attempts)} on {', '.join(n['box'] for n in now['nodes'])} (gang {now['gang_id']})"
    if phase in record.ENDED:
        summary = f"run {run_id}: {phase.upper()}: {rec.get('why')}; last {where}"
    else:
        summary = f"run {run_id}: {phase.upper()}, {where}"
        if keeper is not None and keeper["alive"] is None:  # the run on its box goes on regardless
            summary += f"; its keeper on {away['host']} is {keeper['why']}; the run goes on on its box"
        elif keeper is not None and not keeper["alive"]:
            summary += "; its keeper is not running (restart it with the next step)"
    if rec.get("lost"):
        summary += "; lost: " + ", ".join(f"{b} ({w})" for b, w in rec["lost"].items())
    summary += f"; {ledger.line(money)}"
    ok = phase not in (record.FAILED, record.STOP_FAILED, record.GAVE_UP, record.OVER_BUDGET) and (
        phase in record.ENDED or bool(keeper and keeper["alive"]))
    nxt = [step("gpuops", "logs", "--host", now["box"], "--job", now["job"], why="the current attempt's log")]
    if phase not in record.ENDED and keeper is not None and keeper["alive"] is False:
        again = ("ssh", away["host"], *away["python"].split()) if away else ("python3",)
        nxt.insert(0, step(*again, "-m", "gpuops.keeper.handover", "restart", run_id,
                           why="starts its keeper again, detached"))
    return envelope("status", ok=ok, summary=summary, data=data, next=nxt)


def wait(rec, timeout_s, sleep=time.sleep, clock=time.monotonic) -> dict:
    """status() once the run has ended (and what was asked after it is done), or at the timeout."""
    run_id, until = rec["run_id"], clock() + timeout_s
    while rec["phase"] not in record.ENDED and clock() < until:
        sleep(WAIT_POLL_S)
        rec = kept(run_id) or rec
    doc = status(rec)
    doc["command"] = "wait"
    if rec["phase"] not in record.ENDED:
        doc["ok"] = False
        doc["summary"] = f"still going after {timeout_s:g}s: " + doc["summary"]
        doc[CODE_KEY] = errors.WAIT_TIMED_OUT
    return doc


def _plan(rec, expires) -> str:
    # what a stop is asked of: the run, its attempt now (a relaunch since makes another plan) and phase
    now = rec["attempts"][-1]
    return plans.plan_id("kept-stop", rec["run_id"], [[len(rec["attempts"]), now["job"], rec["phase"]]], expires)


def stop(rec, yes: bool = False, plan=None) -> dict:
    """`gpuops stop` of a kept run (job_stop without a host), a dry run unless `yes`: asked of its
    keeper (here, or on its keeper host), which stops the run on its boxes at its next look and
    relaunches nothing after. With `plan` (MCP's apply always names one), only while the run is on
    the attempt and in the phase that plan was shown."""
    from . import remotehost

    if plan is not None and plans.expiry(plan) is None:
        raise errors.UsageError(f"--plan {plan!r} is not a plan id (a dry run of stop --job RUN shows one)")
    run_id, away = rec["run_id"], rec.get("keeper_host")
    whose = f"its keeper on {away['host']}" if away else "its keeper"
    expires = plans.expires_at()
    fresh = _plan(rec, expires)
    data = {"run_id": run_id, "phase": rec["phase"], "keeper_host": (away or {}).get("host"), "targets": [],
            "plan": {"plan_id": fresh, "expires_at": expires}}
    if rec["phase"] in record.ENDED:
        return envelope("stop", ok=True, summary=f"nothing to stop: run {run_id} has ended ({rec['phase']})", data=data)
    again = step("gpuops", "stop", "--job", run_id, "--yes", "--plan", fresh, why="asks the keeper to stop it")
    if plan is not None and (plans.expiry(plan) < time.time() or _plan(rec, plans.expiry(plan)) != plan):
        message = (f"plan {plan} no longer matches run {run_id} (relaunched, or its phase changed, or the plan "
                   f"expired); nothing was sent; new plan {fresh}")
        return envelope("stop", ok=False, summary=message, data=dict(data, dry_run=True, refused_plan=plan),
                        error={"kind": errors.Refused.kind, "message": message}, next=[again])
    if not yes:
        return envelope("stop", ok=True, summary=f"dry run: would ask {whose} to stop run {run_id}; nothing was sent",
                        data=dict(data, dry_run=True), next=[again])
    asked = remotehost.ask_stop(rec)
    return envelope("stop", ok=True, summary=f"asked the keeper of run {run_id} ({asked}) to stop it at its next "
                                             "look; nothing is relaunched after", data=dict(data, asked=asked),
                    next=[step("gpuops", "wait", "--job", run_id, why="returns once the keeper has stopped it")])


def show(doc, con) -> None:
    """A person's view: one line per attempt, the vault and the ledger, then the summary."""
    from ..render import inert, summary_line

    k = (doc.get("data") or {}).get("kept")
    if k:
        for a in k["attempts"]:
            last = a["n"] == len(k["attempts"])
            ended = f"ended: {a['why']}" if a.get("why") else (k["phase"] if last else "")
            frm = f", resumed from {a['resumed_from']}" if a.get("resumed_from") else ""
            on = f"{','.join(a['boxes'])} gang {a['gang_id']}" if a.get("gang_id") else f"{a['box']} job {a['job']}"
            con.print(inert.text(f"  attempt {a['n']}: {on}{frm}; {ended}"), markup=False)
        con.print(inert.text(f"  vault {k['vault']['root']}: {', '.join(k['vault']['held']) or 'nothing yet'}"),
                  markup=False)
        for kind, t in k["ledger"]["totals"].items():
            if t["seconds"] > 0:
                con.print(f"  {kind:<10} {t['seconds']:8.0f}s  ${t['usd']:.4f}", markup=False)
    summary_line(doc, con)
