"""A gang's status, logs, stop and diagnose: each node's ordinary job verb (gpuops.ops.jobs,
joblogs, diagnose), run on every node at once, then put together by the pure gpuops.jobs.gang.

Logs carry one cursor per node (`--cursors 0=OFFSET,1=OFFSET`, node index = offset): a page
shows each node's lines in turn, a follow prints lines as they arrive from any node, each
prefixed with its node. Stop is a dry run first, like every destructive verb: the gang's plan_id
is a digest of every node's live processes, and `--yes --plan ID` signals only when, asked again,
they are still exactly those (each node's own stop then re-checks its part on its box).
"""

import re
import threading
import time

from .. import errors
from ..envelope import CODE_KEY, envelope, step
from ..jobs import gang, gangstore
from .. import states
from ..engines import statusrow
from ..onbox.host import plans
from ..remote.fanout import each_host
from ..remote.targets import target_for
from ..units import duration
from . import diagnose as diagnose_op
from . import joblogs, jobs

# A node that cannot be asked may still be running: retry refuses on these too.
STILL_RUNNING = states.ALIVE + (states.UNREACHABLE,)
PAGE_BYTES = 64 << 10
_CURSOR = re.compile(r"^([0-9]{1,3})=([0-9]{1,19})$")


def _on_node(record, identity, fn):
    """fn(target, node) on every node of the record at once: [(node, value or exception)]."""
    by_host = {n["host"]: n for n in record["nodes"]}

    def one(host: str):
        target = target_for(host, identity)
        try:
            return fn(target, by_host[host])
        finally:
            target.close()

    return [(by_host[h], v) for h, v in each_host(list(by_host), one, max_workers=len(by_host))]


def node_rows(record, identity=None):
    """[{index, host, job_id, row}]: each node's status row (UNREACHABLE when its box could not be
    asked; VANISHED when the launch never started it)."""
    jobs_dir = record["spec"].get("jobs_dir")

    def ask(target, node):
        if not node.get("job_id"):
            return None
        return jobs.status(target, job=node["job_id"], jobs_dir=jobs_dir)

    out = []
    for node, value in _on_node(record, identity, ask):
        if value is None:
            why = (node.get("launch_error") or {}).get("message") or "no job was started"
            row = {"job_id": None, "state": states.VANISHED, "reason": f"never started: {why}"}
        elif isinstance(value, errors.GpuopsError):
            row = statusrow.unreachable(node["job_id"], value.message)
        elif isinstance(value, Exception):
            raise value
        elif value["data"]["jobs"]:
            row = value["data"]["jobs"][0]
        else:
            row = statusrow.unreachable(node["job_id"], value["summary"])
        out.append({"index": node["index"], "host": node["host"], "job_id": node.get("job_id"), "row": row})
    return out


def _shown(nodes):
    keys = ("state", "exit_code", "signal", "reason", "pid", "ended_at", "hint")
    return [dict({"index": n["index"], "host": n["host"], "job_id": n["job_id"]},
                 **{k: n["row"].get(k) for k in keys},
                 last_progress=((n["row"].get("progress") or {}).get("last") or {}).get("text")) for n in nodes]


def status(gang_id, identity=None):
    record = gangstore.load(gang_id)
    nodes = node_rows(record, identity)
    told = gang.aggregate(nodes)
    data = dict(told, gang_id=gang_id, rendezvous=record["rendezvous"], nodes=_shown(nodes),
                parent_gang_id=record.get("parent_gang_id"))
    ok = told["state"] in states.HEALTHY
    nxt = []
    if told["first_failed"] is not None:
        nxt.append(step("gpuops", "diagnose", "--gang", gang_id, why="why the first node failed"))
    if told["state"] == states.DEGRADED:
        nxt.append(step("gpuops", "stop", "--gang", gang_id, why="the rest cannot finish as launched"))
    summary = f"{gang_id}: {told['state']}" + (f": {told['reason']}" if told["reason"] else "")
    run = gang_run(nodes)
    if run:  # a gang with a run policy: its nodes' supervisors retry it as a whole, attempt by attempt
        data["run"] = run
        summary += f" (attempt {run['attempt']}/{run['of']})"
    return envelope("status", ok=ok, summary=summary, data=data, next=nxt)


def gang_run(nodes):
    """{attempt, of, phase, last_event} of a gang run, from its head's row (node 0 decides for the
    gang; another node's when the head could not be asked), or None for a gang without a policy."""
    rows = sorted((n for n in nodes if n["row"].get("run")), key=lambda n: n["index"])
    if not rows:
        return None
    run = rows[0]["row"]["run"]
    return {k: run.get(k) for k in ("attempt", "of", "phase", "ended", "last_event", "resumed_from", "final")}


WAIT_POLL_S = 2.0  # each look asks every node once; a gang's end is seen within this of its last node's


def wait(gang_id, *, until=states.TERMINAL, timeout_s=300.0, identity=None, poll_s=WAIT_POLL_S):
    """The gang's status once its state is one of `until`, or once it can no longer get there
    (it ended otherwise, or a node is gone while others run: DEGRADED), or at the timeout (exit 6)."""
    began = time.monotonic()
    while True:
        doc = status(gang_id, identity)
        now, waited = doc["data"]["state"], time.monotonic() - began
        reached = now in until
        ended = not reached and (now in states.TERMINAL or now == states.DEGRADED)
        timed_out = not reached and not ended and waited + poll_s > timeout_s
        if reached or ended or timed_out:
            break
        time.sleep(poll_s)
    wanted = "an end" if set(until) == set(states.TERMINAL) else "/".join(until)
    data = dict(doc["data"], until=list(until), reached=reached, timed_out=timed_out, waited_s=round(waited, 3),
                returned="state" if reached else ("timeout" if timed_out else "ended"))
    summary, nxt = doc["summary"], doc["next"]
    if timed_out:
        summary += f"; no {wanted} after {duration(waited)} (timed out)"
        said = "terminal" if set(until) == set(states.TERMINAL) else ",".join(until)
        nxt = [step("gpuops", "wait", "--gang", gang_id, "--until", said, why="keep waiting")]
    elif ended:
        summary += f"; {wanted} can no longer be reached"
    out = envelope("wait", ok=reached, summary=summary, data=data, next=nxt)
    if timed_out:
        out[CODE_KEY] = errors.WAIT_TIMED_OUT
    return out


# ------------------------------------------------------------------ logs


def parse_cursors(text: str, record):
    """{node index: offset} from '0=123,1=456'; UsageError for anything else."""
    out = {}
    indices = {n["index"] for n in record["nodes"]}
    for item in (text or "").split(","):
        m = _CURSOR.match(item.strip())
        if not m or int(m.group(1)) not in indices:
            raise errors.UsageError(f"--cursors takes NODE=OFFSET pairs for nodes {sorted(indices)}, e.g. 0=0,1=0; "
                                    f"not {item.strip()!r}")
        out[int(m.group(1))] = int(m.group(2))
    return out


class _Prefixer:
    """Complete lines of one node's log, prefixed with the node, to a shared writer."""

    def __init__(self, label: str, write) -> None:
        self.label, self.write, self.rest = label.encode("utf-8"), write, b""

    def __call__(self, data) -> None:
        self.rest += data
        *lines, self.rest = self.rest.split(b"\n")
        if lines:
            self.write(b"".join(self.label + line + b"\n" for line in lines))

    def flush(self) -> None:
        if self.rest:
            self.write(self.label + self.rest + b"\n")
            self.rest = b""


def logs(gang_id, *, tail=50, cursors=None, follow=False, timeout_s=None, max_bytes=PAGE_BYTES, sink=None,
         identity=None, reconnect_s=120.0):
    """Every node's log at once, each line prefixed with its node: a page (from the tail, or from
    each node's cursor) or followed until every node's job ended or `timeout_s` passed."""
    record = gangstore.load(gang_id)
    started = [n for n in record["nodes"] if n.get("job_id")]
    lock, kept, pages = threading.Lock(), [], {}

    def write(data) -> None:
        with lock:
            if sink is not None:
                sink(data)
            else:
                kept.append(data)

    def read(target, node):
        if not node.get("job_id"):
            return None
        # A follow prints lines as they come from any node; a page keeps each node's lines
        # together, in node order, so the same page reads the same twice.
        out = write if follow else pages.setdefault(node["index"], []).append
        prefix = _Prefixer(f"[{node['index']}:{node['host']}] ", out)
        offset = (cursors or {}).get(node["index"])
        try:
            doc = joblogs.logs(target, job=node["job_id"], tail=tail, follow=follow, from_offset=offset,
                               jobs_dir=record["spec"].get("jobs_dir"), sink=prefix,
                               max_bytes=None if follow else max_bytes, timeout_s=timeout_s, reconnect_s=reconnect_s)
        finally:
            prefix.flush()
        return doc

    per_node = []
    for node, value in _on_node({"nodes": started}, identity, read) if started else []:
        entry = {"index": node["index"], "host": node["host"], "job_id": node["job_id"], "next_offset": None}
        if isinstance(value, errors.GpuopsError):
            entry["error"] = value.as_dict()
        elif isinstance(value, Exception):
            raise value
        else:
            d = value["data"]
            entry.update(next_offset=d["next_offset"], start_offset=d["start_offset"], ended=d.get("state"),
                         timed_out=d.get("timed_out"))
        per_node.append(entry)
    for index in sorted(pages):
        write(b"".join(pages[index]))
    return _logs_envelope(gang_id, per_node, kept, follow)


def _logs_envelope(gang_id, per_node, kept, follow):
    known = [e for e in per_node if e["next_offset"] is not None]
    cursor_text = ",".join(f"{e['index']}={e['next_offset']}" for e in known)
    bad = [e for e in per_node if e.get("error")]
    data = {"gang_id": gang_id, "nodes": per_node, "cursors": cursor_text}
    if not follow or kept:
        data["text"] = b"".join(kept).decode("utf-8", "replace")
    summary = f"{gang_id}: {len(known)} node log(s)" + (f"; cursors {cursor_text}" if cursor_text else "")
    if bad:
        summary += "; not read: " + ", ".join(f"{gang.node_name(e['index'], e['host'])} ({e['error']['message']})"
                                              for e in bad)
    timed_out = any(e.get("timed_out") for e in per_node)
    nxt = [step("gpuops", "logs", "--gang", gang_id, "--cursors", cursor_text, *(["--follow"] if follow else []))] \
        if cursor_text else []
    out = envelope("logs", ok=not bad and not timed_out, summary=summary, data=data, next=nxt)
    if timed_out and not bad:
        out[CODE_KEY] = errors.WAIT_TIMED_OUT
    return out


# ------------------------------------------------------------------ stop


def _gang_plan(gang_id, nodes, expires):
    # as one job's plan: each node's leader and lasting processes (gpuops.onbox.engines.box_stop)
    pairs = [[n["index"], t["pid"], t["start_ticks"]] for n in nodes for t in n["targets"] if t["planned"]]
    return plans.plan_id("gang-stop", gang_id, pairs, expires)


def _look(record, gang_id, grace, identity):
    """Every node's dry run: [{index, host, job_id, targets, plan_id}]; a node that cannot be
    asked is an error here (a plan that leaves out a live node would be a lie)."""
    jobs_dir = record["spec"].get("jobs_dir")

    def dry(target, node):
        if not node.get("job_id"):
            return None
        return jobs.stop(target, job=node["job_id"], grace=grace, yes=False, jobs_dir=jobs_dir)

    out = []
    for node, value in _on_node(record, identity, dry):
        if isinstance(value, Exception):
            raise value if not isinstance(value, errors.GpuopsError) else type(value)(
                f"{gang.node_name(node['index'], node['host'])}: {value.message}; nothing was signalled")
        targets = (value or {}).get("data", {}).get("targets") or []
        plan = ((value or {}).get("data") or {}).get("plan") or {}
        out.append({"index": node["index"], "host": node["host"], "job_id": node.get("job_id"), "targets": targets,
                    "plan_id": plan.get("plan_id")})
    return out


def stop(gang_id, *, grace=10.0, yes=False, plan=None, identity=None):
    """Stop every node of the gang; a dry run (with the gang's plan_id) unless `yes`."""
    if plan is not None and plans.expiry(plan) is None:
        raise errors.UsageError(f"--plan {plan!r} is not a plan id (a dry run of stop --gang shows one)")
    record = gangstore.load(gang_id)
    nodes = _look(record, gang_id, grace, identity)
    live = [n for n in nodes if n["targets"]]
    count = sum(len(n["targets"]) for n in nodes)
    expires = plans.expires_at()
    fresh = _gang_plan(gang_id, nodes, expires)
    data = {"gang_id": gang_id, "nodes": nodes, "plan": {"plan_id": fresh, "expires_at": expires}}
    again = step("gpuops", "stop", "--gang", gang_id, "--grace", f"{float(grace):g}", "--yes", "--plan", fresh)
    if not live:
        return envelope("stop", ok=True, summary=f"nothing to stop: no process of gang {gang_id} is alive",
                        data=data)
    if plan is not None and (plans.expiry(plan) < time.time() or _gang_plan(gang_id, nodes, plans.expiry(plan))
                             != plan):
        message = (f"plan {plan} no longer matches the gang's live processes (or has expired); nothing was "
                   f"signalled; the live set is {count} process(es) on {len(live)} node(s): new plan {fresh}")
        return envelope("stop", ok=False, summary=message, data=dict(data, dry_run=True, refused_plan=plan),
                        error={"kind": errors.Refused.kind, "message": message}, next=[again])
    if not yes:
        out = envelope("stop", ok=False, data=dict(data, dry_run=True), next=[again],
                       summary=f"dry run: would send SIGTERM to {count} process(es) on {len(live)} node(s) of "
                               f"{gang_id}, SIGKILL after {float(grace):g}s; add --yes --plan {fresh}")
        out[CODE_KEY] = errors.REFUSED
        return out
    by_index = {n["index"]: n for n in live}
    jobs_dir = record["spec"].get("jobs_dir")

    def act(target, node):
        mine = by_index.get(node["index"])
        if mine is None:
            return None
        return jobs.stop(target, job=node["job_id"], grace=grace, yes=True, plan=mine["plan_id"], jobs_dir=jobs_dir)

    left, changed = [], []
    for node, value in _on_node(record, identity, act):
        name = gang.node_name(node["index"], node["host"])
        if value is None or (not isinstance(value, Exception) and value["ok"]):
            continue
        if isinstance(value, Exception):
            left.append(f"{name}: {value.message if isinstance(value, errors.GpuopsError) else repr(value)}")
        elif value["data"].get("refused_plan"):
            changed.append(name)  # its processes changed since the look just now: nothing signalled there
        else:
            left.append(f"{name}: {value['summary']}")
    if changed and not left:
        message = (f"the processes of {', '.join(changed)} changed while the gang was being stopped (nothing was "
                   f"signalled there); look again: gpuops stop --gang {gang_id}")
        out = envelope("stop", ok=False, summary=message, data=dict(data, changed=changed),
                       next=[step("gpuops", "stop", "--gang", gang_id)])
        out[CODE_KEY] = errors.REFUSED
        return out
    if left or changed:
        told = "; ".join(left + [f"{c}: its processes changed, nothing signalled" for c in changed])
        return envelope("stop", ok=False, data=dict(data, changed=changed),
                        summary=f"gang {gang_id} not fully stopped: {told}")
    return envelope("stop", ok=True, data=data, next=[step("gpuops", "retry", "--gang", gang_id)],
                    summary=f"stopped gang {gang_id}: {count} process(es) on {len(live)} node(s) gone")


# ------------------------------------------------------------------ diagnose


def diagnose(gang_id, identity=None):
    """Why the gang stopped: the node that failed first, diagnosed like any job."""
    record = gangstore.load(gang_id)
    nodes = node_rows(record, identity)
    told = gang.aggregate(nodes)
    data = {"gang_id": gang_id, "state": told["state"], "reason": told["reason"], "nodes": _shown(nodes),
            "first_failed": None, "diagnose": None}
    if told["first_failed"] is None:
        return envelope("diagnose", ok=told["state"] in states.HEALTHY, data=data,
                        summary=f"{gang_id}: no node has failed; the gang is {told['state']}"
                                + (f": {told['reason']}" if told["reason"] else ""))
    first = next(n for n in nodes if n["index"] == told["first_failed"])
    name = gang.node_name(first["index"], first["host"])
    data["first_failed"] = {"index": first["index"], "host": first["host"], "job_id": first["job_id"]}
    retry = step("gpuops", "retry", "--gang", gang_id)
    if not first["job_id"]:
        return envelope("diagnose", ok=False, data=data, next=[retry],
                        summary=f"{gang_id}: {name} failed first: {first['row']['reason']}")
    target = target_for(first["host"], identity)
    try:
        doc = diagnose_op.diagnose(target, job=first["job_id"], jobs_dir=record["spec"].get("jobs_dir"))
    finally:
        target.close()
    data["diagnose"] = doc["data"]
    # The failing node's own words (a script path it could not open, an OOM) before any advice.
    said = doc["data"].get("error_line")
    data["error_line"] = said
    summary = f"{gang_id}: {name} failed first; {doc['summary']}"
    if said and said not in summary:
        summary += f"; its log: {said}"
    return envelope("diagnose", ok=False, data=data, findings=doc.get("findings") or [],
                    next=list(doc.get("next") or []) + [retry], advice=list(doc.get("advice") or []),
                    summary=summary)
