"""The large answers, compact by default: the keys an agent acts on, the findings that need it.

A preflight carries the box's raw facts (listening sockets, cgroup files, every disk) and a
finding per check, passing ones included; a wait, the job's whole status row; a status, every
row in full. A model reads all of it on every turn it stays in context, so each of these tools
answers with a compact default and takes `fields` (the data keys to return; ['*'] for all) and
`failed_only` (drop what is fine). What was left out is said in data.omitted, so the model knows
what to ask for. Pure: an envelope in, an envelope out.
"""

from .. import engines
from ..states import HEALTHY

ALL = "*"
# tool -> the data keys it returns unless asked for others
COMPACT = {
    "host_preflight": ("errors", "gpu", "host", "torch", "profile"),
    "job_wait": ("job_id", "state", "reason", "reached", "timed_out", "new_text", "text_starts_at", "next_offset",
                 "log_size", "waited_s", "match", "interrupted", "job", "events"),
    "job_events": ("job_id", "state", "events", "last_event", "more", "job"),
}
# a job row's keys unless asked for others (the command and the timestamps are for a later look)
ROW = ("job_id", "name", "state", "reason", "exit_code", "signal", "hint", "engine", *engines.job_id_keys(),
       "engine_job_id", "labels", "age_s", "duration_s", "progress", "stall_after_s", "parent_job_id", "run")
FINE = ("ok", "info")                 # finding severities failed_only leaves out
# a launch's meta keys an agent may act on and the row does not say already (its name, labels,
# pid, parent); the others are the box's bookkeeping (pids' start ticks, cgroups, the boot id) or
# the caller's own words said back (the command), and the policy's Xid table is gpuops.xid's, the
# same for every run
META = ("job_id", "kind", "workdir", "log", "engine", "host", "gpus", "key", "policy", "run", "launched_at", "profile",
        "queue")


def _keep(mapping, wanted, default):
    """(kept mapping, keys left out)."""
    names = default if not wanted else (None if ALL in wanted else wanted)
    if names is None:
        return dict(mapping), []
    return {k: v for k, v in mapping.items() if k in names}, sorted(k for k in mapping if k not in names)


def _said(doc, **omitted):
    left = {k: v for k, v in omitted.items() if v}
    if left:
        doc["data"]["omitted"] = dict(doc["data"].get("omitted") or {}, **left)
    return doc


def fields(doc, tool, wanted):
    """`doc` with only the data keys `wanted` (default: the tool's COMPACT set); a job row it keeps
    has its ROW keys, unless all were asked for."""
    if not isinstance(doc.get("data"), dict) or doc.get("error"):
        return doc
    doc = dict(doc)
    doc["data"], gone = _keep(doc["data"], wanted, COMPACT[tool])
    row_gone = []
    if isinstance(doc["data"].get("job"), dict) and not (wanted and ALL in wanted):
        doc["data"]["job"], row_gone = _keep(doc["data"]["job"], None, ROW)
    return _said(doc, keys=gone, row_keys=row_gone)


def preflight(doc, wanted, failed_only):
    """A preflight's compact answer: its COMPACT facts, and with failed_only only the findings
    that warn or fail (how many passed is counted)."""
    doc = fields(doc, "host_preflight", wanted)
    if failed_only and doc.get("findings"):
        shown = [f for f in doc["findings"] if f.get("severity") not in FINE]
        doc = _said(dict(doc, findings=shown), findings=len(doc["findings"]) - len(shown))
    return doc


def status(doc, wanted, failed_only, cap=None):
    """A status answer with each row's ROW keys (or `wanted`), and with failed_only only the jobs
    whose state needs a look (at most `cap` of them)."""
    rows = (doc.get("data") or {}).get("jobs")
    if not isinstance(rows, list) or doc.get("error"):
        return doc
    kept, gone = [], set()
    for row in rows:
        if failed_only and row.get("state") in HEALTHY:
            continue
        if cap is not None and len(kept) >= cap:
            continue
        made, left = _keep(row, wanted, ROW)
        kept.append(made)
        gone.update(left)
    doc = dict(doc, data=dict(doc["data"], jobs=kept))
    return _said(doc, row_keys=sorted(gone), jobs=len(rows) - len(kept))


def _engine_keys(meta: dict) -> tuple:
    """What the job's engine adds to its record (its submission: Slurm's job id, options and signal)."""
    from .. import engines
    from ..errors import BadAnswer

    try:
        return tuple(engines.of_record(meta).meta_fields)
    except BadAnswer:  # an engine this gpuops does not know: its answer was refused before here
        return ()


def launched(doc: dict) -> dict:
    """A launch's answer with the job row's ROW keys and its meta's META keys, the policy as given
    without the Xid table (meta and row were 2,000 of a launch's 2,600 characters)."""
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict) or doc.get("error"):
        return doc
    meta, gone = _keep(data["meta"], None, META + _engine_keys(data["meta"]))
    row_has = data["job"] if isinstance(data.get("job"), dict) else {}
    gone = [k for k in gone if k not in row_has]  # said in the row: not left out
    policy = meta.get("policy")
    if isinstance(policy, dict) and "xid_kinds" in policy:
        meta["policy"] = {k: v for k, v in policy.items() if k != "xid_kinds"}
        gone.append("policy.xid_kinds")
    # its pid too: what a caller checks the job by before any status (a plan's targets, a kill in a test)
    row, row_gone = _keep(data["job"], None, ROW + ("pid",)) if isinstance(data.get("job"), dict) \
        else (data.get("job"), [])
    return _said(dict(doc, data=dict(data, meta=meta, job=row)), meta_keys=gone, row_keys=row_gone)
