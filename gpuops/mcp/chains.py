"""What an MCP caller calls next, where the operation's own steps leave it stuck or going round.

An operation's `next` is written for the CLI and knows nothing of the call it answers; here the
server, which does, adds what only it can say and takes out what leads nowhere:

- an error the operation gave no step for: the candidates of an ambiguous job name, each as the
  same call naming one id; for a job the box does not know, its jobs; for a retryable one (a box
  that did not answer, a busy destination), the same call again;
- a gang launched: gang_wait on it (it returns when the gang ends) before anything else;
- a job that COMPLETED: log_triage (how far it got, what it logged) instead of a read of the log
  from its end, which is empty, and a word on pulling its outputs;
- no loop: log_triage never sends the agent back to job_diagnose, which sent it there; and no
  step is the call just made with the same arguments unless something will have changed by then
  (the box may answer after retry_after_s, a live job or copy moves on); at the end of an ended
  job's log the step is log_triage instead;
- an error with no step says so, and why, in its advice (NO_WAY_ON), so an agent stops there;
- a wait that timed out, or returned on a run's event before the run ended, is waited on again
  from where it stopped: its text from next_offset (not the newest bytes again), its events after
  the last one it returned (a retried run is followed, not only read).
"""

import re

from .. import states

JOB_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b")
MOST_CANDIDATES = 10
_BACK = {"log_triage": {"job_diagnose"}}  # tool -> the tools its answer never sends the agent back to
_ENDED_HERE = ("job_wait", "job_logs", "job_status")
PULL_ADVICE = ("Pull the outputs you need with data_pull (verified) before the box is stopped; teardown_check "
               "says what its stop would delete.")


NONE = "No next step: "
# error kind -> why no call leads on from it (when the operation and after_error gave no step)
NO_WAY_ON = {
    "usage": "the same call fails the same way; change what the message names",
    "ambiguous": "the same call fails the same way; name the job by its id",
    "rejected": "the scheduler refuses the request as given; change what the message names",
    "not-found": "nothing by that name is there; check the name",
    "refused": "this server's owner decides what it allows (its level, toolsets, roots); no call changes that",
    "busy": "another transfer holds the destination; call again once it has ended",
    "unreachable": "the box did not answer; a person must look at it",
    "timed-out": "the box did not answer in time; a person must look at it",
    "auth-failed": "the box refused the key; a person must fix the key or the ssh config",
    "host-key-changed": "the box's key changed; only a person who knows it was re-provisioned may forget the old one",
    "host-key-revoked": "the box offered a revoked key, never to be trusted again; ask the box's provider",
    "host-key-unverifiable": "known_hosts trusts the box through a certificate authority gpuops cannot check",
    "host-key-shared": "two boxes answer under one host key; a person must look at them",
    "python3-missing": "the box has no python3; install it there",
    "bad-answer": "the box answered with something that is not gpuops's; a person must look at it",
    "internal": "a bug in gpuops; the MCP server's stderr has its traceback",
}


def _call(tool, args, why) -> dict:
    return {"tool": tool, "args": args, "why": why}


def after_error(tool, args, error, listed) -> list:
    kind = error.get("kind")
    if kind == "ambiguous" and "job" in args:
        ids = list(dict.fromkeys(JOB_ID.findall(error.get("message") or "")))[:MOST_CANDIDATES]
        return [_call(tool, dict(args, job=jid), "this one of the jobs the name fits") for jid in ids]
    if kind == "not-found" and "job" in args and args.get("host") and "job_status" in listed:
        return [_call("job_status", {"host": args["host"]}, "the jobs this box has records of")]
    if error.get("retryable"):
        wait = error.get("retry_after_s")
        return [_call(tool, dict(args), "the same call again" + (f", in about {wait:g}s" if wait else ""))]
    return []


def _completed(tool, args, data):
    """The job id of a job this answer says COMPLETED, or None."""
    if tool == "job_status" and args.get("job"):
        rows = data.get("jobs") or []
        return rows[0].get("job_id") if len(rows) == 1 and rows[0].get("state") == states.COMPLETED else None
    if tool in ("job_wait", "job_logs") and data.get("state") == states.COMPLETED:
        return data.get("job_id")
    return None


def _moves_on(doc: dict, data: dict) -> bool:
    """Whether the same call may answer differently later: a box that may answer after a while, a
    wait that ran out of time, a job or a copy that is still going."""
    err = doc.get("error") or {}
    if err:
        return bool(err.get("retry_after_s"))
    state = data.get("state")
    return (bool(data.get("timed_out")) or data.get("ended") is False or state == "running"
            or (state in states.NAMES and state not in states.TERMINAL))


def _not_again(tool: str, args: dict, steps: list, doc: dict, data: dict) -> list:
    """`steps` without the call just made, unless it may answer differently later (_moves_on)."""
    if _moves_on(doc, data):
        return steps
    return [s for s in steps if not (s.get("tool") == tool and s.get("args") == args)]


def _rearmed(args: dict, data: dict) -> dict:
    """The job_wait `args` again, from where this answer stopped."""
    out = dict(args)
    if data.get("next_offset") is not None:
        out["from_offset"] = data["next_offset"]
    events = data.get("events") or []
    if events and isinstance(events[-1], dict) and isinstance(events[-1].get("seq"), int):
        out["after_event"] = events[-1]["seq"]
    return out


def chained(tool, args, doc, listed) -> dict:
    """`doc` (its `next` already tool calls) with the steps above added and removed."""
    steps = [s for s in doc.get("next") or [] if s.get("tool") not in _BACK.get(tool, ())]
    advice = list(doc.get("advice") or [])
    data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
    steps = _not_again(tool, args, steps, doc, data)
    if doc.get("error"):
        steps = steps or after_error(tool, args, doc["error"], listed)
        kind = doc["error"].get("kind")
        if not steps and not any(a.startswith(NONE) for a in advice):
            advice.append(NONE + NO_WAY_ON.get(kind, f"{kind} has no way on from here"))
    elif tool in ("gang_launch", "gang_retry") and data.get("gang_id") and "gang_wait" in listed:
        steps.insert(0, _call("gang_wait", {"gang": data["gang_id"]}, "returns when the gang ends, or at the "
                                                                       "timeout"))
    elif tool in _ENDED_HERE and _completed(tool, args, data):
        jid = _completed(tool, args, data)
        steps = [s for s in steps if s.get("tool") != "job_logs"]  # from its end: nothing left to read
        if "log_triage" in listed and not any(s.get("tool") == "log_triage" for s in steps):
            steps.insert(0, _call("log_triage", {"host": args.get("host", "local"), "job": jid},
                                  "how far it got and what it logged"))
        if "data_pull" in listed and PULL_ADVICE not in advice:
            advice.append(PULL_ADVICE)
    elif tool == "job_wait" and (data.get("timed_out") or (data.get("reason") == "event" and
                                                           data.get("state") not in states.TERMINAL)):
        steps = [s for s in steps if s.get("tool") != "job_wait"]
        if "job_wait" in listed:
            steps.insert(0, _call("job_wait", _rearmed(args, data), "keep waiting, from where this wait stopped"))
    elif tool == "job_logs" and data.get("ended") and not data.get("more"):
        steps = [s for s in steps if s.get("tool") != "job_logs"]  # the job ended and its log was read to its end
        if not steps and "log_triage" in listed:  # job_diagnose sends here: triage is the way on, not back
            steps = [_call("log_triage", {"host": args.get("host", "local"), "job": data.get("job_id") or
                                          args["job"]}, "what its log says: the job ended and its log has no more")]
    return dict(doc, next=steps, advice=advice)
