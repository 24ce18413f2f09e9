"""What the box says about its jobs, checked before anything is derived from it or shown.

A box is untrusted input: a job record it answers with must have the shape gpuops' own on-box
code writes (gpuops.onbox.job_facts), or the call fails with BadAnswer (exit 3) naming the field,
never with a crash here. Job ids are also checked, since they become names in messages, next
steps and (with `logs --save`) local paths.
"""

import re

from ..boundary import expect
from ..errors import BadAnswer

NUMBER = (int, float)
NONE = type(None)
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

_FACTS = {"job_id": str, "now": (NUMBER + (NONE,)), "meta": (dict, NONE), "exit": (dict, NONE),
          "progress": (dict, NONE), "liveness": (str, NONE), "stop": (dict, NONE), "log_size": (int, NONE),
          "log_mtime": NUMBER + (NONE,), "dir_age_s": NUMBER + (NONE,), "survivors_alive": (list, NONE),
          "pid_reused": (bool, NONE), "wrapper_alive": (bool, NONE)}
_META = {"name": (str, NONE), "labels": (dict, NONE), "pid": (int, NONE), "key": (str, NONE),
         "parent_job_id": (str, NONE), "command": (str, NONE), "launched_at": NUMBER + (NONE,),
         "spawn_error": (str, NONE)}
_EXIT = {"exit_code": (int, NONE), "signal": (str, NONE), "ended_at": NUMBER + (NONE,), "error": (str, NONE),
         "survivors": (list, NONE)}
_STOP = {"requested_at": NUMBER + (NONE,), "signals": (list, NONE), "all_gone": (bool, NONE)}
_STOP_ROUND = {"signal": str, "pids": list, "at": NUMBER + (NONE,)}
_PROGRESS = {"events": (list, NONE), "first_step": (int, NONE), "regex_error": (str, NONE)}
_EVENT = {"end": int, "step": (int, NONE), "seconds": NUMBER + (NONE,), "at": NUMBER + (NONE,), "text": (str, NONE)}


def job_id(value, host):
    if not isinstance(value, str) or not JOB_ID.match(value):
        raise BadAnswer(f"{host}: the box's answer is not gpuops's: job id {value!r}")
    return value


def facts(doc, host):
    """A job's facts as the box reported them, once their shape is gpuops's."""
    if not isinstance(doc, dict):
        raise BadAnswer(f"{host}: the box's answer is not gpuops's: a job record is a {type(doc).__name__}")
    expect(doc, _FACTS, host, "job record")
    job_id(doc["job_id"], host)
    for key, fields in (("meta", _META), ("exit", _EXIT), ("progress", _PROGRESS), ("stop", _STOP)):
        if doc.get(key) is not None:
            expect(doc[key], fields, host, f"job record's {key}")
    for step in (doc.get("stop") or {}).get("signals") or []:
        expect(step if isinstance(step, dict) else {}, _STOP_ROUND, host, "stop record's signal")
        if not all(isinstance(p, int) and not isinstance(p, bool) for p in step["pids"]):
            raise BadAnswer(f"{host}: the box's stop record is not gpuops's: a pid is not a number")
    for event in (doc.get("progress") or {}).get("events") or []:
        if not isinstance(event, dict):
            raise BadAnswer(f"{host}: the box's answer is not gpuops's: a progress event is a {type(event).__name__}")
        expect(event, _EVENT, host, "progress event")
    return doc
