"""What each on-box entry answers, and the shape it must have before anything reads it: one table.

Every answer comes through one door (gpuops.remote.base.Target.run_onbox, which calls `checked`;
the destination lock's lines, read as they stream, are checked by gpuops.sync.lock), so a field a
verb reads that is missing or of another type is BadAnswer (exit 3) naming the field, never a
KeyError or TypeError (exit 70) in whichever verb happens to read it first. Nullable fields the
answer left out are filled in as None. What lies inside (a manifest's entries, a job record, a
gang node's interfaces, ranges and sizes) is checked where it is read, against the tables there
(gpuops.sync.plan, gpuops.engines.answers, gpuops.jobs.gangcheck, gpuops.ops.fleet, gpuops.ops.reap),
which start from this one. An error document ({"error": ...}, what a refused request gets) is
checked to be one and handed to the caller, which reports it.
"""

from .boundary import expect, shaped
from .errors import BadAnswer

NUMBER, NONE = (int, float), type(None)
_OPT_NUMBER = NUMBER + (NONE,)
_JOB = {"job": dict, "log_head": (str, NONE)}
_AFTER = {"job_id": str, "engine": str, "after": dict}
_HASHING_MAX = 1 << 62

# {entry: {field: type}}; an entry that serves several actions (argv[0]): {entry: {action: fields}}.
ANSWERS: dict[str, dict] = {
    "manifest": {"root": str, "now_ns": int, "exists": bool, "is_dir": bool, "entries": list, "errors": list,
                 "rules": list, "space": (dict, NONE), "rsync": (str, NONE), "hashing": dict},
    "landing": {"root": str, "hashing": dict, "left": int},
    "destlock": {"holding": (str, NONE), "held_by": (dict, str, NONE)},
    "resident": {"ok": bool, "socket": (str, NONE), "pid": (int, NONE), "why": (str, NONE)},
    "probe": {"probe_version": int},
    "diagnose": {"now": NUMBER, "job_id": (str, NONE), "pid": (int, NONE), "exit": (dict, NONE), "job": (dict, NONE),
                 "alive": bool, "boot_changed": bool, "since": NUMBER, "kernel_readable": bool,
                 "log_tail": (str, NONE), "disks": list, "xid_after_launch": list,
                 "kernel_oom_named": list, "kernel_oom_other": list, "oom_kills_now": (int, NONE),
                 "oom_kills_at_launch": (int, NONE), "uptime_s": _OPT_NUMBER, "meta": (dict, NONE),
                 "accounting": (list, NONE), "accounting_source": (str, NONE), "node": (str, NONE),
                 "node_is_here": (bool, NONE), "cores": (dict, NONE), "log_head": (str, NONE)},
    "reap": {"holders": list, "actions": list, "gpus": list, "applied": bool, "nested_pid_namespace": bool,
             "plan_targets": (list, NONE), "plan_refused": (bool, NONE), "gpu": (int, NONE), "gpu_error": (str, NONE),
             "unreadable": int, "nvml_unverified": list},
    "fleet_facts": {"now": NUMBER, "hostname": str, "uptime_s": _OPT_NUMBER, "gpu": dict, "jobs": dict, "disk": dict},
    "gang_facts": {"node": int, "hostname": str, "boot_id": (str, NONE), "netns": (str, NONE), "python": str,
                   "interfaces": list, "route": dict, "rendezvous": dict, "dataplane": dict, "code": (dict, NONE),
                   "gpu": dict, "torch": dict, "now": NUMBER},
    "job_launch": {"launch": _JOB, "retry": _JOB},
    "job_facts": {"status": {"jobs": list, "now": NUMBER, "more": (int, NONE)},
                  "excerpt": {"job": dict, "size": int, "lines": int, "pieces": list, "now": NUMBER}},
    "job_stop": {"stop": {"job_id": str, "targets": list, "after": dict}},
    "job_queue": {"queue": {"entries": list}},
    "job_wait": {"wait": {"job": dict}},
    "job_pause": {"pause": _AFTER, "resume": _AFTER},
    "logclass": {"answers": list, "now": NUMBER},
    "engine_facts": {"facts": {"engine": str, "facts": (dict, NONE)}},
    "qualify": {"seconds": NUMBER, "torch": dict, "gpus": list, "peers": list, "allreduce": (dict, NONE),
                "disks": list, "not_measured": list},
    "keeper_facts": {"where": {"workdir": str, "checkpoint_dir": (str, NONE), "boot_id": (str, NONE), "now": NUMBER},
                     "run": {"now": NUMBER, "boot_id": (str, NONE), "run_id": str, "current": str,
                             "phase": (str, NONE), "ended": bool, "ended_at": (NUMBER, NONE), "supervisor_alive": bool,
                             "attempt_liveness": str, "checkpoints": (dict, NONE)}},
}


# What a message calls an answer (an entry that serves several actions: the action's).
_CALLED = {"fleet_facts": "fleet answer", "gang_facts": "gang answer", "diagnose": "diagnose evidence",
           "destlock": "destination lock's answer"}
BY_ACTION = frozenset(e for e, table in ANSWERS.items() if all(isinstance(v, dict) for v in table.values()))


def fields(entry, action=None):
    """The top-level fields of `entry`'s answer (to `action`, for an entry that serves several)."""
    return ANSWERS[entry][action] if entry in BY_ACTION else ANSWERS[entry]


def checked(entry, doc, host, action=None):
    """`doc`, the answer of on-box `entry` (already one JSON object) to `action` (its argv[0], for
    an entry that serves several), once its shape is gpuops's; BadAnswer naming the first field
    that is not."""
    what = f"{action} answer" if entry in BY_ACTION else _CALLED.get(entry, f"{entry} answer")
    if "error" in doc:
        return expect(doc, {"error": (dict, str)}, host, what)
    if entry == "destlock":  # which key it sent is its answer: none is filled in
        expect(doc, fields(entry), host, what)
        if "holding" not in doc and "held_by" not in doc:
            raise BadAnswer(f"{host}: the box's {what} is not gpuops's: 'holding' is missing")
        return doc
    shaped(doc, fields(entry, action), host, what)  # KeyError: gpuops asked what no entry answers
    if isinstance(doc.get("hashing"), dict):
        _counters(doc["hashing"], host, what)
    if entry == "manifest":
        _manifest(doc, host)
    elif entry == "probe":
        from .checks import shape

        _declared(doc, shape.FACTS, host, "probe answer", "")
    gpus = doc.get("gpus") if entry == "reap" else (doc.get("gpu") or {}).get("devices")
    if isinstance(gpus, list):
        _each_gpu_once(gpus, host, what)
    return doc


def _each_gpu_once(devices, host, what):
    """A box's GPU list names each GPU once: a repeated index or UUID is no real box's list, and
    pinning a job to it would put it on "GPUs 0,0,0,0"."""
    for key in ("index", "uuid"):
        seen = [d.get(key) for d in devices if isinstance(d, dict) and d.get(key) is not None]
        twice = sorted({str(v) for v in seen if seen.count(v) > 1})
        if twice:
            raise BadAnswer(f"{host}: the box's {what} is not gpuops's: it lists GPU {key} {', '.join(twice)} more "
                            "than once")


def _counters(counters, host, what):
    for key, value in counters.items():
        if type(value) not in (int, bool) or not 0 <= value < _HASHING_MAX:
            raise BadAnswer(f"{host}: the box's {what} is not gpuops's: 'hashing.{key}' is {value!r}")


def _manifest(doc, host):
    if not all(isinstance(line, str) for line in doc["rules"]):
        raise BadAnswer(f"{host}: the box's manifest answer is not gpuops's: 'rules' holds a line that is not text")
    if doc["space"] is not None:
        expect(doc["space"], {"free_bytes": (int, NONE), "free_inodes": (int, NONE), "total_inodes": (int, NONE)},
               host, "manifest answer's space")


# A leaf of the probe's declared shape (gpuops.checks.shape) that names a type; any other leaf is
# a description, and its value any plain value.
_LEAVES = {"int": int, "str": str, "bool": bool, "path": str, "float": NUMBER, "seconds": NUMBER, "epoch": NUMBER,
           "bytes": int, "MiB": NUMBER, "%": NUMBER, "C": NUMBER, "MHz": NUMBER, "W": NUMBER}
_PLAIN = (str, int, float, bool, NONE)


def _declared(value, declared, host, what, at):
    """`value` against the probe's declared shape: containers as declared (a nested one may be null:
    a sub-document nothing filled, such as a TensorBoard logdir no profile names), typed leaves of
    their type (or null), any other leaf a plain value."""
    if value is None and at:
        return
    if isinstance(declared, dict):
        if not isinstance(value, dict):
            _wrong(host, what, at, value)
        for key, item in value.items():
            inner = declared.get(key, declared.get("*"))
            if inner is not None:
                _declared(item, inner, host, what, f"{at}.{key}" if at else key)
    elif isinstance(declared, list):
        if not isinstance(value, list):
            _wrong(host, what, at, value)
        for item in value:
            _declared(item, declared[0], host, what, f"{at}[]")
    elif value is not None:
        kind = _LEAVES.get(declared, _PLAIN)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind not in (bool, _PLAIN)):
            _wrong(host, what, at, value)


def _wrong(host, what, at, value):
    raise BadAnswer(f"{host}: the box's {what} is not gpuops's: {at!r} is a {type(value).__name__}")
