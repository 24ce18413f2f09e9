"""The Ray head on this box, asked through its Jobs REST API over the box's own loopback.

Why the REST API, called here, and not `ray job submit --no-wait` on the box or the API behind an
SSH forward: every `ray` CLI call imports Ray (seconds of CPU and hundreds of MB on the head, per
status poll); a forward needs a local port and its lifecycle for every call, and would put the
dashboard's address on the workstation. The on-box entries already run beside the records, so a
submission, its record and its rollback happen in one place, under the jobs-dir lock, with the
standard library only (urllib). The dashboard (no authentication) is never opened to the network.

Where: $RAY_ADDRESS when it is the dashboard's http(s) address (Ray's own convention for its Jobs
CLI), else http://127.0.0.1:8265. When nothing answers there, the answer says why, each its own
kind: ray not installed (no `ray` on PATH and no head), no head on this box (a worker node, or
ray installed but not started), or a head whose dashboard does not answer (its GCS answers at the
address in <temp dir>/ray_current_cluster; the temp dir is $RAY_TMPDIR or /tmp/ray, as for Ray).
"""

import json
import os
import shutil
import socket

from ..host.jobrecord import JobError

DEFAULT = "http://127.0.0.1:8265"
CALL_S = 10.0
ANSWER_MAX = 4 << 20
VALUE_MAX = 512


def address():
    said = os.environ.get("RAY_ADDRESS") or ""
    return said.rstrip("/") if said.startswith(("http://", "https://")) else DEFAULT


def request(method, path, body=None, timeout=CALL_S, raw=None):
    """(HTTP status, text) of one call to the dashboard (a JSON `body`, or `raw` bytes); JobError
    when nothing answers there."""
    try:
        from urllib import error, request as http
    except ImportError:  # a python3 without urllib is not one Ray runs on
        raise JobError("not-found", "this box's python3 has no urllib")
    data = json.dumps(body).encode("utf-8") if body is not None else raw
    req = http.Request(address() + path, data=data, method=method,
                       headers={"Content-Type": "application/json"} if body is not None else {})
    try:
        with http.urlopen(req, timeout=timeout) as answer:
            return answer.status, answer.read(ANSWER_MAX).decode("utf-8", "replace")
    except error.HTTPError as e:
        return e.code, e.read(ANSWER_MAX).decode("utf-8", "replace")
    except (error.URLError, socket.timeout, OSError) as e:
        raise _no_dashboard(getattr(e, "reason", e))


def _no_dashboard(reason: str):
    where = address()
    if _gcs_answers():
        return JobError("unreachable", "the Ray head's dashboard does not answer at %s (%s): the Jobs API needs it "
                                       "(ray start --head with its dashboard; another port: set RAY_ADDRESS=http://"
                                       "127.0.0.1:PORT in the box's environment)" % (where, reason))
    if not shutil.which("ray"):
        return JobError("not-found", "ray is not installed on this box (no `ray` on PATH, no Ray head running): "
                                     "install it and `ray start --head` on the head node, then name that node")
    return JobError("usage", "no Ray head on this box (nothing answers at %s and no GCS here): a worker node, or "
                             "ray installed but not started; name the head node with --host, or `ray start "
                             "--head` there" % where)


def _gcs_answers() -> bool:
    """Whether a head's GCS answers at the address this box's latest `ray start --head` wrote."""
    temp = os.environ.get("RAY_TMPDIR") or "/tmp/ray"
    try:
        with open(os.path.join(temp, "ray_current_cluster")) as f:
            host, _, port = f.read(200).strip().rpartition(":")
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=2.0):
            return True
    except (OSError, IOError, ValueError):
        return False


def asked(method, path, body=None, wanted=(200,), missing=None):
    """The JSON answer of one call; `missing` (a status) answers None; a refusal is "rejected"
    with Ray's own last line (its traceback's error), anything else not Ray's is "bad-answer"."""
    status, text = request(method, path, body)
    if missing is not None and status == missing:
        return None
    if status in wanted:
        try:
            return json.loads(text)
        except ValueError:
            raise JobError("usage", "no Ray dashboard at %s: something else answers there (%s)" % (address(),
                                                                                                 last_line(text)))
    if status in (400, 500) and path.startswith("/api/jobs"):
        raise JobError("rejected", "Ray refused it: %s" % last_line(text))
    raise JobError("usage", "no Ray Jobs API at %s: it answered %d (%s)" % (address(), status, last_line(text)))


def last_line(text: str):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip() and line.strip() != "."]
    return lines[-1][:VALUE_MAX] if lines else ""


def version():
    """Ray's /api/version, once it is Ray that answers."""
    doc = asked("GET", "/api/version")
    if not isinstance(doc, dict) or "ray_version" not in doc:
        raise JobError("usage", "no Ray dashboard at %s: its /api/version is not Ray's" % address())
    return doc


def job(submission_id):
    """Ray's record of a job ({status, message, driver_exit_code, ...}), or None when it has none."""
    return asked("GET", "/api/jobs/%s" % submission_id, missing=404)


def submit(body):
    return asked("POST", "/api/jobs/", body)


def stop(submission_id):
    return asked("POST", "/api/jobs/%s/stop" % submission_id, missing=404)
