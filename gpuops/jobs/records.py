"""A job's records as the box answers them, typed once: each is the check at the door and the
typed reading after it.

Each record is a named tuple whose fields are the keys gpuops reads, typed as gpuops' own on-box
code writes them (gpuops.onbox.job_facts, jobrecord, runrecord, runevents). `shape(Record)` is the
table gpuops.boundary.expect checks a box's answer against (gpuops.jobs.answers: one check where
the answer enters, BadAnswer naming the first field that is not gpuops's); `read(Record, doc)` is
that checked answer as a typed record, every key it left out None, so a rule reads `exit.signal`
and mypy checks the name and its type. The answer itself stays the box's checked JSON object: it
is what envelopes carry on, unchanged.

A field typed without None is one every answer must carry. Named tuples, not dataclasses:
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

    name: str | None = None
    labels: dict | None = None
    pid: int | None = None
    key: str | None = None
    parent_job_id: str | None = None
    command: str | None = None
    launched_at: Number | None = None
    spawn_error: str | None = None
    supervisor_lost: str | None = None
    engine: str | None = None
    engine_job_id: str | None = None
    resources: dict | None = None


class ExitRecord(NamedTuple):
    """exit.json: how the job ended, as its supervisor (or its engine's box half) recorded it."""

    exit_code: int | None = None
    signal: str | None = None
    ended_at: Number | None = None
    error: str | None = None
    survivors: list | None = None
    engine_state: str | None = None
    scheduler: dict | None = None
    ended_by: str | None = None
    stall_evidence: str | None = None


class RunRecord(NamedTuple):
    """A run's attempt (gpuops.onbox.runrecord.facts) and its last event (gpuops.onbox.runevents)."""

    id: str = ""
    attempt: int | None = None
    current: str | None = None
    attempts: int | None = None
    max_attempts: int | None = None
    phase: str | None = None
    ended: bool | None = None
    next_at: Number | None = None
    started_at: Number | None = None
    resumed_from: str | None = None
    final: dict | None = None
    last_event: dict | None = None
    failed: list | None = None
    activity: dict | None = None
    ended_at: Number | None = None
    unsupervised: bool | None = None
    attempt_ids: list | None = None


class Activity(NamedTuple):
    """What the run's supervisor sees the attempt doing (a phase of gpuops.onbox.progress.PHASES)."""

    phase: str | None = None
    since: Number | None = None
    step: int | None = None


class FailedAttempt(NamedTuple):
    """One of a run's attempts that ended, as its supervisor judged it."""

    attempt: int | None = None
    job: str | None = None
    class_: str | None = None  # the record's "class" (a keyword here)
    why: str | None = None
    retry: bool | None = None
    step: int | None = None


class RunEvent(NamedTuple):
    """One of a run's events (the rest of the event is its own, bounded on the box, shown as data)."""

    seq: int = 0
    kind: str = ""
    at: Number | None = None
    attempt: int | None = None
    job: str | None = None
    why: str | None = None
    class_: str | None = None
    checkpoint: str | None = None
    backoff_s: Number | None = None


class RunEnd(NamedTuple):
    """How a run ended."""

    class_: str | None = None
    why: str | None = None
    job: str | None = None
    attempt: int | None = None


class PauseRecord(NamedTuple):
    requested_at: Number | None = None
    held_at: Number | None = None
    stopped_at: Number | None = None
    resumed_at: Number | None = None
    signal: str | None = None
    marker: dict | None = None
    failed: str | None = None
    resumed_as: str | None = None


class TelemetryRow(NamedTuple):
    """A telemetry row (gpuops.onbox.telemetry): numbers, and per GPU a table of numbers."""

    t: Number | None = None
    cpu: Number | None = None
    cpu_top: Number | None = None
    cores: Number | None = None
    rss: int | None = None
    nproc: int | None = None
    gpus: list | None = None
    src: str | None = None
    gpu_error: str | None = None


class SchedulerSaid(NamedTuple):
    """What a scheduler said (its engine's box half): its own words, each a bounded string."""

    known: bool | None = None
    source: str | None = None
    job: dict | None = None
    held: bool | None = None
    paused: bool | None = None
    pending: dict | None = None
    error: str | None = None


class Pending(NamedTuple):
    """Where a job waits in its scheduler's queue."""

    position: int | None = None
    pending_in_partition: int | None = None
    start_estimate: str | None = None
    partition: dict | None = None
    nodes: list | None = None


class StopRecord(NamedTuple):
    """stop.json: what `gpuops stop` did (gpuops.onbox.box_stop)."""

    requested_at: Number | None = None
    signals: list | None = None
    all_gone: bool | None = None


class StopRound(NamedTuple):
    """One signal a stop sent, to which processes."""

    signal: str = ""
    pids: list = []
    at: Number | None = None


class Progress(NamedTuple):
    """The progress lines the box found in the job's log (gpuops.onbox.steps)."""

    events: list | None = None
    first_step: int | None = None
    regex_error: str | None = None


class ProgressEvent(NamedTuple):
    """One progress line: where it ends in the log, its step, and when it was written."""

    end: int = 0
    step: int | None = None
    seconds: Number | None = None
    at: Number | None = None
    text: str | None = None


class JobFacts(NamedTuple):
    """What the box saw of one job just now (gpuops.onbox.job_facts): its records and its liveness."""

    job_id: str = ""
    now: Number | None = None
    meta: dict | None = None
    exit: dict | None = None
    progress: dict | None = None
    liveness: str | None = None
    stop: dict | None = None
    log_size: int | None = None
    log_mtime: Number | None = None
    dir_age_s: Number | None = None
    survivors_alive: list | None = None
    pid_reused: bool | None = None
    wrapper_alive: bool | None = None
    scheduler: dict | None = None
    pause: dict | None = None
    run: dict | None = None
    telemetry: dict | None = None
    trackers: dict | None = None
    live_pids: list | None = None


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
