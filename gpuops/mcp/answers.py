"""What each tool's answer holds: every key its `data` may carry (known(), for tests and docs), and
the keys an agent acts on, typed with the closed vocabularies (advertised(): the output schema).

A key is written short: s string, i integer, n number, b boolean, a array, o object, * anything;
a trailing ? admits null; a word with no type names a dataclass whose fields the data carries.
A tool whose verb names its operation (gpuops.mcp.made) says all this in its description
(Tool.data, Tool.typed), in plain types; a written tool's is here, with its vocabularies.
"""

import dataclasses
import importlib
import typing

from .. import engines, surface
from ..checks.shape import FACTS
from . import vocab

_JSON = {"s": "string", "i": "integer", "n": "number", "b": "boolean", "a": "array", "o": "object"}
_STARTED = "job:o existing:b meta:o first_error:s?"
_TRIMMED = " omitted:o"  # what a compact answer left out (gpuops.mcp.trim)
_ASKED = " request_id:s state:s elapsed_s:n cancel:s"  # a copy as a request (gpuops.mcp.requests)
_GANG_STARTED = "gang:o gang_id:s? refused:s preflight:o"
_SYNC = ("direction:s engine:s local:s remote:s files:i dirs:i symlinks:i payload_bytes:i sent_paths:i "
         "already_equal:i bytes_sent:n bytes_reused:n wire_bytes:n? bytes_verified:i files_verified:i retries:i "
         "attempts:a mismatches:a mismatch_count:i extras:a extra_count:i deleted:a vanished:a skipped_special:a "
         "budget:* hashing:o link:o? verified:b file_errors:a")


def _shape_codes(shape):
    """The probe's top-level facts (gpuops.checks.shape) as type codes; an area may be missing."""
    return " ".join(f"{k}:{'o' if isinstance(v, dict) else 'a' if isinstance(v, list) else 'i'}?"
                    for k, v in shape.items())


def _dataclass_codes(cls):
    """A dataclass's fields as type codes (a profile in full: gpuops.profiles.Profile)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "tables" in f.metadata:  # its named tables stand in the answer itself (gpuops.tomlschema.plain)
            out += [f"{name}:o" for name in f.metadata["tables"]()]
            continue
        tp = hints[f.name]
        origin = typing.get_origin(tp)
        code = ("a" if origin in (tuple, list) else "o" if dataclasses.is_dataclass(tp) or origin is not None
                else {str: "s", int: "i", float: "n", bool: "b"}.get(tp, "*"))
        out.append(f"{f.name}:{code}")
    return " ".join(out)


def _codes(text: str) -> str:
    """A description's short code, each dataclass it names ("gpuops.profiles.Profile") as its fields."""
    def word(w: str) -> str:
        if ":" in w:
            return w
        module, _, name = w.rpartition(".")
        return _dataclass_codes(getattr(importlib.import_module(module), name))

    return " ".join(word(w) for w in text.split())


def _written() -> dict:
    """Every key a written tool's data may carry."""
    return {
        "host_preflight": _shape_codes(FACTS) + " thresholds:o profile:s? engines:o" + _TRIMMED,
        "fleet_status": "hosts:a totals:o",
        "job_launch": _STARTED + _TRIMMED,
        "fleet_launch": _STARTED + " placement:o keeper:o",
        "job_retry": _STARTED + _TRIMMED,
        "job_queue": "queue:s engine:s entries:a done:o? runner_alive:b? runner_started:b? failed_lines:a dir:s?",
        "job_status": "jobs:a box_now:n? jobs_dir:s? total:i? more:i kept:o" + _TRIMMED,
        "job_logs": "job_id:s start_offset:i? next_offset:i? bytes:i log_size:i? reconnects:i end:s? timed_out:b "
                    "interrupted:s? text:s bytes_b64:s text_exact:b text_starts_at:i? more:b state:s exit:o? ended:b "
                    "saved_to:s name:s? duration_s:n?",
        "job_wait": "job_id:s state:s until:a reached:b timed_out:b reason:s new_text:s text_starts_at:i "
                    "start_offset:i next_offset:i log_size:i waited_s:n job:o match:o interrupted:s events:a "
                    "kept:o" + _TRIMMED,
        "job_events": "job_id:s state:s job:o events:a last_event:i more:b" + _TRIMMED,
        "job_pause": "job_id:s engine:s state:s paused:b marker:o? job:o",
        "job_resume": "job_id:s engine:s state:s job:o child:o",
        "job_stop": "job_id:s targets:a state:s after:o signals:a remaining:a gpu_holders_left:a dry_run:b plan:o? "
                    "refused_plan:s run_id:s phase:s keeper_host:s? asked:s",
        "job_diagnose": "verdict:s confidence:s job:s? pid:i? exit_code:i? signal:s? evidence:a ruled_out:a "
                        "kernel_log:o oom_kills:o disks:a? cores:o? trackers:o triage:o? error_line:s? state:s? "
                        "engine:s " + "".join(f"{k}:s? " for k in engines.job_id_keys()) +
                        "engine_job_id:s? scheduler:o telemetry:o? run:o? gotcha:s?",
        "log_triage": "status:s primary:s? also:a stage:s? evidence:a progress:o",
        "vram_reap": "reap_version:i uid:i applied:b gpu:i? min_age_s:n idle_window_s:n samples:* gpu_source:s? "
                     "gpu_error:s? nested_pid_namespace:b gpus:a holders:a not_selected:i unreadable:i "
                     "nvml_unverified:a jobs_dir:s? actions:a plan_targets:a? plan_refused:b? plan:o",
        "data_verify": "local:s remote:s files:i bytes_verified:n files_verified:i mismatches:a mismatch_count:i "
                       "extras:a extra_count:i hashing:o verified:b" + _ASKED,
        "data_push": _SYNC + _ASKED,
        "data_pull": _SYNC + " manifest:s" + _ASKED,
        "gang_launch": _GANG_STARTED + " job:o keeper:o",
        "gang_retry": _GANG_STARTED,
        "gang_status": "gang_id:s state:s reason:s? first_failed:i? rendezvous:o nodes:a parent_gang_id:s?",
        "gang_wait": "gang_id:s state:s reason:s? first_failed:i? rendezvous:o nodes:a parent_gang_id:s? until:a "
                     "reached:b timed_out:b waited_s:n returned:s",
        "gang_logs": "gang_id:s nodes:a cursors:s text:s",
        "gang_stop": "gang_id:s nodes:a plan:o dry_run:b refused_plan:s changed:a",
        "gang_diagnose": "gang_id:s state:s reason:s? nodes:a first_failed:o? diagnose:o? error_line:s?",
        # a request answers with its copy's own envelope once it ended: any copy's keys
        "request_wait": _SYNC + " manifest:s" + _ASKED,
        "request_cancel": _SYNC + " manifest:s" + _ASKED,
    }


def known() -> dict:
    """{tool: every key its data may carry}, in the short code."""
    return dict(_written(), **{name: _codes(t.data) for name, t in surface.tools().items() if t.data})


def advertised(tool: str) -> dict:
    """The data keys the output schema of `tool` types: a made tool's `typed` keys, typed by its
    `data`; a written one's ADVERTISED."""
    spec = surface.tool(tool)
    if not spec.data:
        return ADVERTISED[tool]
    codes = dict(w.split(":") for w in spec.data.split() if ":" in w)
    return {key: {"type": [_JSON[codes[key][:-1]], "null"] if codes[key].endswith("?") else _JSON[codes[key]]}
            for key in spec.typed}


_S, _I, _N, _B = ({"type": t} for t in ("string", "integer", "number", "boolean"))
_S0, _I0 = {"type": ["string", "null"]}, {"type": ["integer", "null"]}
_STRS = {"type": "array", "items": _S}
STATE = vocab.enum(vocab.STATES)


def _obj(**props) -> dict:
    return {"type": "object", "properties": props}


def _rows(**props) -> dict:
    return {"type": "array", "items": _obj(**props)}


_BEGUN = {"job": _obj(job_id=_S), "existing": _B}
_PLAN = _obj(plan_id=_S)
_GANG = {"gang_id": _S, "state": STATE, "first_failed": _I0}
_COPIED = {"verified": _B, "mismatch_count": _I, "extra_count": _I, "request_id": _S,
           "state": vocab.enum(vocab.REQUEST_STATES)}

# tool -> the data keys its output schema types (the others pass: consumers ignore keys they do not
# know), chosen for what an agent branches on: states and verdicts, ids and offsets, flags.
ADVERTISED: dict = {
    "host_preflight": {},
    "job_launch": _BEGUN,
    "job_status": {"jobs": _rows(job_id=_S, state=STATE, reason=_S0), "more": _I},
    "job_logs": {"text": _S, "bytes_b64": _S, "next_offset": _I0, "more": _B, "text_exact": _B},
    "job_wait": {"state": STATE, "timed_out": _B, "new_text": _S, "next_offset": _I},
    "job_events": {"last_event": _I, "more": _B},
    "job_stop": {"dry_run": _B, "plan": _PLAN},
    "job_pause": {"paused": _B},
    "job_resume": {"child": _obj(job_id=_S)},
    "job_retry": _BEGUN,
    "job_queue": {"entries": {"type": "array"}},
    "vram_reap": {"applied": _B, "plan": _PLAN},
    "job_diagnose": {"verdict": vocab.enum(vocab.VERDICTS), "confidence": vocab.enum(vocab.CONFIDENCE),
                     "evidence": _STRS},
    "log_triage": {"status": vocab.enum(vocab.TRIAGE_STATUSES), "primary": vocab.enum(vocab.CLASSES, True),
                   "also": _STRS},
    "data_verify": _COPIED,
    "data_push": _COPIED,
    "data_pull": _COPIED,
    "fleet_status": {"hosts": {"type": "array"}},
    "fleet_launch": _BEGUN,
    "gang_launch": {"gang_id": _S0},
    "gang_retry": {"gang_id": _S0},
    "gang_status": _GANG,
    "gang_wait": dict(_GANG, timed_out=_B),
    "gang_logs": {"cursors": _S},
    "gang_stop": {"dry_run": _B, "plan": _PLAN},
    "gang_diagnose": _GANG,
    "request_wait": {"request_id": _S, "state": vocab.enum(vocab.REQUEST_STATES)},
    "request_cancel": {"request_id": _S, "state": vocab.enum(vocab.REQUEST_STATES)},
}
