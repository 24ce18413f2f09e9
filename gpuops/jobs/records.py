"""A job's records as the box answers them, typed once: each is the check at the door and the
typed reading after it.

Each record is a named tuple whose fields are the keys gpuops reads, typed as gpuops' own on-box
code writes them (gpuops.onbox.jobs.job_facts, jobrecord, runrecord, runevents). `shape(Record)` is the
table gpuops.boundary.expect checks a box's answer against (gpuops.engines.answers: one check where
the answer enters, BadAnswer naming the first field that is not gpuops's); `read(Record, doc)` is
that checked answer as a typed record, every key it left out None, so a rule reads `exit.signal`
and mypy checks the name and its type. The answer itself stays the box's checked JSON object: it
is what envelopes carry on, unchanged.

A field typed without None is one every answer must carry. No field has a default: `read` gives
each key an answer left out None, and nothing else makes a record. Named tuples, not dataclasses:
importing dataclasses costs every `status` its start-up time; typing is loaded already.
"""

import types
import typing
from typing import NamedTuple, TypeVar

Number = int | float
NONE = type(None)
R = TypeVar("R", bound=tuple)


class Meta(NamedTuple):
    """meta.json: what the launch recorded (an engine adds its own fields: Engine.meta_fields)."""

    name: str | None
    labels: dict | None
    pid: int | None
    key: str | None
    parent_job_id: str | None
    command: str | None
    launched_at: Number | None
    spawn_error: str | None
    supervisor_lost: str | None
    engine: str | None
    engine_job_id: str | None
    resources: dict | None


class ExitRecord(NamedTuple):
    """exit.json: how the job ended, as its supervisor (or its engine's box half) recorded it."""

    exit_code: int | None
    signal: str | None
    ended_at: Number | None
    error: str | None
    survivors: list | None
    engine_state: str | None
    scheduler: dict | None
    ended_by: str | None
    stall_evidence: str | None


class RunRecord(NamedTuple):
    """A run's attempt (gpuops.onbox.run.runrecord.facts) and its last event (gpuops.onbox.run.runevents)."""

    id: str
    attempt: int | None
    current: str | None
    attempts: int | None
    max_attempts: int | None
    phase: str | None
    ended: bool | None
    next_at: Number | None
    started_at: Number | None
    resumed_from: str | None
    final: dict | None
    last_event: dict | None
    failed: list | None
    activity: dict | None
    ended_at: Number | None
    unsupervised: bool | None
    attempt_ids: list | None


class Activity(NamedTuple):
    """What the run's supervisor sees the attempt doing (a phase of gpuops.onbox.run.progress.PHASES)."""

    phase: str | None
    since: Number | None
    step: int | None


class FailedAttempt(NamedTuple):
    """One of a run's attempts that ended, as its supervisor judged it."""

    attempt: int | None
    job: str | None
    class_: str | None  # the record's "class" (a keyword here)
    why: str | None
    retry: bool | None
    step: int | None


class RunEvent(NamedTuple):
    """One of a run's events (the rest of the event is its own, bounded on the box, shown as data)."""

    seq: int
    kind: str
    at: Number | None
    attempt: int | None
    job: str | None
    why: str | None
    class_: str | None
    checkpoint: str | None
    backoff_s: Number | None


class RunEnd(NamedTuple):
    """How a run ended."""

    class_: str | None
    why: str | None
    job: str | None
    attempt: int | None


class PauseRecord(NamedTuple):
    requested_at: Number | None
    held_at: Number | None
    stopped_at: Number | None
    resumed_at: Number | None
    signal: str | None
    marker: dict | None
    failed: str | None
    resumed_as: str | None


class TelemetryRow(NamedTuple):
    """A telemetry row (gpuops.onbox.host.telemetry): numbers, and per GPU a table of numbers."""

    t: Number | None
    cpu: Number | None
    cpu_top: Number | None
    cores: Number | None
    rss: int | None
    nproc: int | None
    gpus: list | None
    src: str | None
    gpu_error: str | None


class SchedulerSaid(NamedTuple):
    """What a scheduler said (its engine's box half): its own words, each a bounded string."""

    known: bool | None
    source: str | None
    job: dict | None
    held: bool | None
    paused: bool | None
    pending: dict | None
    error: str | None


class Pending(NamedTuple):
    """Where a job waits in its scheduler's queue."""

    position: int | None
    pending_in_partition: int | None
    start_estimate: str | None
    partition: dict | None
    nodes: list | None


class StopRecord(NamedTuple):
    """stop.json: what `gpuops stop` did (gpuops.onbox.engines.box_stop)."""

    requested_at: Number | None
    signals: list | None
    all_gone: bool | None


class StopRound(NamedTuple):
    """One signal a stop sent, to which processes."""

    signal: str
    pids: list
    at: Number | None


class Progress(NamedTuple):
    """The progress lines the box found in the job's log (gpuops.onbox.triage.steps)."""

    events: list | None
    first_step: int | None
    regex_error: str | None


class ProgressEvent(NamedTuple):
    """One progress line: where it ends in the log, its step, and when it was written."""

    end: int
    step: int | None
    seconds: Number | None
    at: Number | None
    text: str | None


class JobFacts(NamedTuple):
    """What the box saw of one job just now (gpuops.onbox.jobs.job_facts): its records and its liveness."""

    job_id: str
    now: Number | None
    meta: dict | None
    exit: dict | None
    progress: dict | None
    liveness: str | None
    stop: dict | None
    log_size: int | None
    log_mtime: Number | None
    dir_age_s: Number | None
    survivors_alive: list | None
    pid_reused: bool | None
    wrapper_alive: bool | None
    scheduler: dict | None
    pause: dict | None
    run: dict | None
    telemetry: dict | None
    trackers: dict | None
    live_pids: list | None


def key(field: str) -> str:
    """The answer's key of a field: `class_` is "class"."""
    return field[:-1] if field.endswith("_") else field


def shape(record: type) -> dict:
    """{key: type or tuple of types} of `record`'s fields, as gpuops.boundary.expect takes them."""
    out = {}
    for field, kind in typing.get_type_hints(record).items():
        union = typing.get_origin(kind) in (typing.Union, types.UnionType)
        out[key(field)] = typing.get_args(kind) if union else kind
    return out


def read(record: type[R], doc: dict | None) -> R:
    """A checked answer (None: an empty one) as `record`, every key it left out None."""
    doc = doc or {}
    fields, make = getattr(record, "_fields"), getattr(record, "_make")  # a named tuple's, which mypy's tuple lacks
    return make(doc.get(key(f)) for f in fields)
