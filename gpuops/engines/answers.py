"""What the box says about its jobs, checked before anything is derived from it or shown.

A box is untrusted input: a job record it answers with must have the shape gpuops' own on-box
code writes (gpuops.onbox.jobs.job_facts), or the call fails with BadAnswer (exit 3) naming the field,
never with a crash here. Job ids are also checked, since they become names in messages, next
steps and (with `logs --save`) local paths.
"""

import json
import re

from .. import engines
from ..onbox.run import progress
from ..boundary import expect
from ..errors import BadAnswer
from ..jobs import curves, records
from ..jobs.records import shape

NONE = type(None)
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

# The records' shapes: gpuops.jobs.records types each once, for this check and for the rules after it.
_FACTS = shape(records.JobFacts)
LIVE_MAX = 20  # gpuops.onbox.engines.box_engine.LIVE_SHOWN
_META = shape(records.Meta)
_EXIT = shape(records.ExitRecord)
_RUN = shape(records.RunRecord)
_ACTIVITY = shape(records.Activity)
ATTEMPTS_MAX = 101  # a run's attempts: at most retrypolicy.MAX_RETRIES + 1
_FAILED = shape(records.FailedAttempt)
_RUN_EVENT = shape(records.RunEvent)
_FINAL = shape(records.RunEnd)
_TELEMETRY = shape(records.TelemetryRow)
_PAUSE = shape(records.PauseRecord)
_SCHEDULER = shape(records.SchedulerSaid)
_PENDING = shape(records.Pending)
WORD_MAX = 1024
_STOP = shape(records.StopRecord)
_STOP_ROUND = shape(records.StopRound)
_PROGRESS = shape(records.Progress)
_EVENT = shape(records.ProgressEvent)


def job_id(value, host: str):
    if not isinstance(value, str) or not JOB_ID.match(value):
        raise BadAnswer(f"{host}: the box's answer is not gpuops's: job id {value!r}")
    return value


def words(table, host: str, what):
    """A {name: value} table of the scheduler's words: strings only, each bounded."""
    if not all(isinstance(k, str) and isinstance(v, str) and len(k) + len(v) <= WORD_MAX for k, v in table.items()):
        raise BadAnswer(f"{host}: the box's {what} is not gpuops's: not a table of short words")


def _scheduler_words(doc, host: str) -> None:
    sched = doc.get("scheduler") or {}
    for table, what in ((sched.get("job"), "scheduler job"), ((doc.get("exit") or {}).get("scheduler"), "exit record"),
                        ((sched.get("pending") or {}).get("partition"), "partition")):
        if table is not None:
            words(table, host, what)
    if sched.get("pending") is not None:
        expect(sched["pending"], _PENDING, host, "pending job")
        for node in sched["pending"].get("nodes") or []:
            words(node if isinstance(node, dict) else {0: 0}, host, "partition node")


def run_event(event, host: str):
    """One of a run's events once the fields gpuops reads have gpuops' types (the rest is the
    event's own, bounded on the box and shown as data)."""
    expect(event if isinstance(event, dict) else {"seq": "?"}, _RUN_EVENT, host, "run event")
    if event.get("job") is not None:
        job_id(event["job"], host)
    return event


def _run_facts(doc, host: str):
    run = doc.get("run")
    if run is not None:
        expect(run, _RUN, host, "run record")
        job_id(run["id"], host)
        if run.get("current") is not None:
            job_id(run["current"], host)
        if len(run.get("attempt_ids") or []) > ATTEMPTS_MAX:
            raise BadAnswer(f"{host}: the box's run record is not gpuops's: more than {ATTEMPTS_MAX} attempts")
        for attempt in run.get("attempt_ids") or []:
            job_id(attempt, host)
        if run.get("last_event") is not None:
            run_event(run["last_event"], host)
        if run.get("activity") is not None:
            expect(run["activity"], _ACTIVITY, host, "run's activity")
            if run["activity"].get("phase") not in progress.PHASES:
                raise BadAnswer(f"{host}: the box's run's activity is not gpuops's: phase "
                                f"{str(run['activity'].get('phase'))[:40]!r}")
        for entry in run.get("failed") or []:
            expect(entry if isinstance(entry, dict) else {}, _FAILED, host, "run record's failed attempt")
        if run.get("final") is not None:
            expect(run["final"], _FINAL, host, "run's end")
    row = doc.get("telemetry")
    if row is not None:
        expect(row, _TELEMETRY, host, "telemetry row")
        for g in row.get("gpus") or []:
            if not isinstance(g, dict) or not all(isinstance(v, (int, float, str, NONE)) and not isinstance(v, bool)
                                                  for v in g.values()):
                raise BadAnswer(f"{host}: the box's telemetry row is not gpuops's: a GPU reading is not numbers")


def exit_record(rec, host: str):
    """An exit record on its own (a log stream's end carries one), once its shape is gpuops's."""
    if rec is not None:
        expect(rec if isinstance(rec, dict) else {"exit_code": "?"}, _EXIT, host, "exit record")
        if rec.get("scheduler") is not None:
            words(rec["scheduler"], host, "exit record")
    return rec


def facts(doc, host: str):
    """A job's facts as the box reported them, once their shape is gpuops's."""
    if not isinstance(doc, dict):
        raise BadAnswer(f"{host}: the box's answer is not gpuops's: a job record is a {type(doc).__name__}")
    expect(doc, _FACTS, host, "job record")
    job_id(doc["job_id"], host)
    meta = dict(_META, **engines.of_record(doc.get("meta"), host).meta_fields) if doc.get("meta") is not None else _META
    for key, fields in (("meta", meta), ("exit", _EXIT), ("progress", _PROGRESS), ("stop", _STOP),
                        ("pause", _PAUSE), ("scheduler", _SCHEDULER)):
        if doc.get(key) is not None:
            expect(doc[key], fields, host, f"job record's {key}")
    _scheduler_words(doc, host)
    for step in (doc.get("stop") or {}).get("signals") or []:
        expect(step if isinstance(step, dict) else {}, _STOP_ROUND, host, "stop record's signal")
        if not all(isinstance(p, int) and not isinstance(p, bool) for p in step["pids"]):
            raise BadAnswer(f"{host}: the box's stop record is not gpuops's: a pid is not a number")
    live = doc.get("live_pids") or []
    if len(live) > LIVE_MAX or not all(isinstance(p, int) and not isinstance(p, bool) for p in live):
        raise BadAnswer(f"{host}: the box's answer is not gpuops's: its live pids are not a short list of numbers")
    _run_facts(doc, host)
    curves.checked(doc.get("trackers"), host)
    for event in (doc.get("progress") or {}).get("events") or []:
        if not isinstance(event, dict):
            raise BadAnswer(f"{host}: the box's answer is not gpuops's: a progress event is a {type(event).__name__}")
        expect(event, _EVENT, host, "progress event")
    hide_gang_token(doc)
    return doc


HIDDEN = "(hidden)"


def hide_gang_token(doc):
    """The token a gang's nodes greet each other with (gpuops.onbox.gang.ganglink) stays in their records on
    the boxes: no answer, envelope or screen shows it."""
    for holder in ((doc.get("meta") or {}).get("policy"), (doc.get("run") or {}).get("policy")):
        gang = (holder or {}).get("gang") if isinstance(holder, dict) else None
        if isinstance(gang, dict) and "token" in gang:
            gang["token"] = HIDDEN
    return doc


_GPU_CHECK = {"gpus": list, "findings": list}
_GPU_FINDING = {"id": str, "severity": str, "title": str, "evidence": dict, "fix": (str, NONE), "gotcha": (str, NONE)}
MAX_GPU_FINDINGS = 256  # a warning or two per GPU asked (at most 64) and per job running beside it


def gpu_findings(meta, host: str):
    """The warnings the box's check of --gpus left in a job's record (gpuops.onbox.host.gpu_pins), as
    findings: [] when it recorded none."""
    check = (meta or {}).get("gpu_check")
    if check is None:
        return []
    expect(check if isinstance(check, dict) else {}, _GPU_CHECK, host, "job record's gpu_check")
    found = check["findings"]
    if len(found) > MAX_GPU_FINDINGS or not all(isinstance(f, dict) for f in found):
        raise BadAnswer(f"{host}: the box's gpu_check is not gpuops's: {len(found)} findings")
    for f in found:
        expect(f, _GPU_FINDING, host, "gpu_check finding")
        if f["severity"] not in ("info", "warn") or len(json.dumps(f)) > 4 * WORD_MAX:
            raise BadAnswer(f"{host}: the box's gpu_check is not gpuops's: finding {f['id'][:40]!r}")
    return [dict(f) for f in found]

