"""What an MCP caller calls next, where the operation's own steps leave it stuck or going round.

An operation's `next` is written for the CLI and knows nothing of the call it answers; here the
server, which does, adds what only it can say and takes out what leads nowhere:

- an error the operation gave no step for: the candidates of an ambiguous job name, each as the
  same call naming one id; for a job the box does not know, its jobs; for a retryable one (a box
  that did not answer, a busy destination), the same call again;
- a gang launched: gang_wait on it (it returns when the gang ends) before anything else;
- a job that COMPLETED: log_triage (how far it got, what it logged) instead of a read of the log
  from its end, which is empty, and a word on pulling its outputs;
- no loop: log_triage never sends the agent back to job_diagnose, which sent it there.
"""

import re

from ..jobs import states

JOB_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b")
MOST_CANDIDATES = 10
_BACK = {"log_triage": {"job_diagnose"}}  # tool -> the tools its answer never sends the agent back to
_ENDED_HERE = ("job_wait", "job_logs", "job_status")
PULL_ADVICE = ("Pull the outputs you need with data_pull (verified) before the box is stopped; teardown_check "
               "says what its stop would delete.")


def _call(tool, args, why):
    return {"tool": tool, "args": args, "why": why}


def after_error(tool, args, error, listed):
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


def chained(tool, args, doc, listed) -> dict:
    """`doc` (its `next` already tool calls) with the steps above added and removed."""
    steps = [s for s in doc.get("next") or [] if s.get("tool") not in _BACK.get(tool, ())]
    advice = list(doc.get("advice") or [])
    data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
    if doc.get("error"):
        steps = steps or after_error(tool, args, doc["error"], listed)
    elif tool in ("gang_launch", "gang_retry") and data.get("gang_id") and "gang_wait" in listed:
        steps.insert(0, _call("gang_wait", {"gang": data["gang_id"]}, "returns when the gang ends, or at the "
                                                                       "timeout"))
    elif tool in _ENDED_HERE and _completed(tool, args, data):
        jid = _completed(tool, args, data)
        steps = [s for s in steps if s.get("tool") != "job_logs"]  # from its end: nothing left to read
        if "log_triage" in listed:
            steps.insert(0, _call("log_triage", {"host": args.get("host", "local"), "job": jid},
                                  "how far it got and what it logged"))
        if "data_pull" in listed and PULL_ADVICE not in advice:
            advice.append(PULL_ADVICE)
    return dict(doc, next=steps, advice=advice)
