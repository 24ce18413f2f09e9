"""What tools/list advertises: each tool's output schema (the envelope, its `data` typed per tool)
and the finishing touches on its input schema (profile enums, log_triage's oneOf, no null defaults).

Clients validate a successful result against its output schema (the official client does), so
`data` lists the keys each operation returns with their JSON types, none required (the budget may
drop a key: gpuops.mcp.budget) and others allowed (consumers ignore keys they do not know, the
envelope's own rule; tests/test_mcp_schemas.py holds each tool's answers to its declared keys).
A type is written short: s string, i integer, n number, b boolean, a array, o object, * anything;
a trailing ? admits null.
"""

import dataclasses
import typing

from ..checks.shape import FACTS
from ..findings import SEVERITIES
from . import budget

_JSON = {"s": "string", "i": "integer", "n": "number", "b": "boolean", "a": "array", "o": "object"}
_STARTED = "job:o existing:b meta:o first_error:s?"
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
        tp = hints[f.name]
        origin = typing.get_origin(tp)
        code = ("a" if origin in (tuple, list) else "o" if dataclasses.is_dataclass(tp) or origin is not None
                else {str: "s", int: "i", float: "n", bool: "b"}.get(tp, "*"))
        out.append(f"{f.name}:{code}")
    return " ".join(out)


def data_codes():
    from ..profiles import Profile

    return {
        "host_preflight": _shape_codes(FACTS) + " thresholds:o profile:s? engines:o",
        "fleet_status": "hosts:a totals:o",
        "job_launch": _STARTED,
        "fleet_launch": _STARTED + " placement:o",
        "job_retry": _STARTED + " checkpoint:o",
        "job_queue": "queue:s engine:s entries:a done:o? runner_alive:b? runner_started:b? failed_lines:a dir:s?",
        "job_status": "jobs:a box_now:n? jobs_dir:s? total:i? more:i",
        "job_logs": "job_id:s start_offset:i? next_offset:i? bytes:i log_size:i? reconnects:i end:s? timed_out:b "
                    "interrupted:s? text:s text_exact:b text_starts_at:i? more:b state:s exit:o? ended:b saved_to:s "
                    "name:s? duration_s:n?",
        "job_wait": "job_id:s state:s until:a reached:b timed_out:b reason:s new_text:s text_starts_at:i "
                    "start_offset:i next_offset:i log_size:i waited_s:n job:o match:o interrupted:s events:a",
        "job_stop": "job_id:s targets:a state:s after:o signals:a remaining:a gpu_holders_left:a dry_run:b plan:o? "
                    "refused_plan:s",
        "job_diagnose": "verdict:s confidence:s job:s? pid:i? exit_code:i? signal:s? evidence:a ruled_out:a "
                        "kernel_log:o oom_kills:o disks:a? cores:o? trackers:o triage:o? error_line:s? state:s? "
                        "engine:s slurm_job_id:s? engine_job_id:s? scheduler:o run:o? telemetry:o?",
        "log_triage": "status:s primary:s? also:a stage:s? evidence:a progress:o run:o?",
        "vram_reap": "reap_version:i uid:i applied:b gpu:i? min_age_s:n idle_window_s:n samples:* gpu_source:s? "
                     "gpu_error:s? nested_pid_namespace:b gpus:a holders:a not_selected:i unreadable:i "
                     "nvml_unverified:a jobs_dir:s? actions:a plan_targets:a? plan_refused:b? plan:o",
        "gotcha_lookup": "query:s total:i hits:a",
        "profiles_show": "profiles:a deleted_by_meter_stop:a gotcha_titles:o " + _dataclass_codes(Profile),
        "profile_guess": "guess:s? candidates:a facts:o",
        "teardown_check": "profile:s verb:s meter_stop_verb:s deletes:a still_bills:s? keeps:a",
        "data_verify": "local:s remote:s files:i bytes_verified:n files_verified:i mismatches:a mismatch_count:i "
                       "extras:a extra_count:i hashing:o verified:b",
        "data_push": _SYNC,
        "data_pull": _SYNC + " manifest:s",
        "gang_launch": _GANG_STARTED,
        "gang_retry": _GANG_STARTED,
        "gang_status": "gang_id:s state:s reason:s? first_failed:i? rendezvous:o nodes:a parent_gang_id:s?",
        "gang_wait": "gang_id:s state:s reason:s? first_failed:i? rendezvous:o nodes:a parent_gang_id:s? until:a "
                     "reached:b timed_out:b waited_s:n returned:s",
        "gang_logs": "gang_id:s nodes:a cursors:s text:s",
        "gang_stop": "gang_id:s nodes:a plan:o dry_run:b refused_plan:s changed:a",
        "gang_diagnose": "gang_id:s state:s reason:s? nodes:a first_failed:o? diagnose:o? error_line:s?",
    }


def _typed(code):
    base, nullable = code.rstrip("?"), code.endswith("?")
    if base == "*":
        return {}
    kind = _JSON[base]
    return {"type": [kind, "null"] if nullable else kind}


def data_schema(codes):
    return {"type": "object", "properties": {k: _typed(t) for k, t in (w.split(":") for w in codes.split())}}


_STR, _STRS = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
# One next step, as MCP carries it (gpuops.mcp.nextsteps): a tool call, or a command that is not gpuops.
STEP = {"type": "object", "properties": {"tool": _STR, "args": {"type": "object"}, "argv": _STRS, "why": _STR},
        "additionalProperties": False, "oneOf": [{"required": ["tool", "args"]}, {"required": ["argv"]}]}
# the tools whose answers carry findings; the others' findings list is always empty
WITH_FINDINGS = ("host_preflight", "log_triage", "job_diagnose", "vram_reap", "teardown_check", "data_verify", "data_push",
                 "data_pull", "gang_launch", "gang_retry")
FINDING = {"type": "object", "required": ["id", "severity", "title"],
           "properties": {"id": _STR, "severity": {"enum": list(SEVERITIES)}, "title": _STR,
                          "evidence": {"type": "object"}, "fix": {"type": ["string", "null"]},
                          "gotcha": {"type": ["string", "null"]}}}


def output_schema(tool, codes):
    """The envelope as `tool` returns it."""
    return {"type": "object", "required": ["summary", "ok", "command"], "properties": {
        "summary": _STR, "ok": {"type": "boolean"}, "schema_version": {"type": "integer"}, "command": _STR,
        "host": {"type": ["string", "null"]}, "data": data_schema(codes[tool]),
        "findings": {"type": "array", "items": FINDING} if tool in WITH_FINDINGS else {"type": "array", "maxItems": 0},
        "next": {"type": "array", "items": STEP},
        "advice": _STRS, "error": {"type": "object"}, "truncated": {"type": "object"}}}


def input_schema(tool, schema, profile_names):
    """What a tool's arguments look like to a caller: without pydantic's titles and null defaults
    (an omitted optional is simply absent), profile names as an enum, and log_triage's rule."""
    out = budget.lean_schema(schema)
    for prop in out["properties"].values():
        if prop.get("default", 0) is None:
            del prop["default"]
    if tool in ("host_preflight", "teardown_check", "data_push") and "profile" in out["properties"]:
        out["properties"]["profile"]["enum"] = list(profile_names)
    if tool == "profiles_show":
        out["properties"]["name"]["enum"] = list(profile_names)
    if tool == "log_triage":
        out["oneOf"] = [{"required": ["path"], "not": {"required": ["host"]}}, {"required": ["job"]}]
    out["additionalProperties"] = False
    return out
