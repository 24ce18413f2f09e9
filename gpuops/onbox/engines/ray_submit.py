"""Submitting gpuops jobs to the Ray cluster whose head this box is (Jobs REST API: gpuops.onbox.
ray_api). Not an entry: gpuops.onbox.engines.ray_engine hands a job here when it asks for engine "ray".

A job gets the same record directory as a supervised one, on the head: its immutable `cmd`, the
driver Ray runs (gpuops.onbox.engines.ray_driver, as `driver.py`, with `driver.json`: the argv and the
working directory), `secrets.json` (0600) while the driver has not taken it, meta.json with Ray's
submission id (gpuops-<job id>, so a submission is recorded under the id gpuops chose), and the
`log` the driver writes. The driver runs on the head (the head's own `node:__internal_head__`
resource pins it, whatever else is asked for it), where the record is. A job with a run policy
(checked here, against the head's disk) is a run whose driver supervises its attempts
(gpuops.onbox.engines.ray_run); its record says so (policy, run) before Ray starts the driver.

Ray keeps a job's entrypoint, runtime_env and metadata in its job record, which anyone reaching
the dashboard can read: the entrypoint names only the driver, the runtime_env holds only the
--env values (they reach every worker of the job, as Ray's own env_vars do), and secrets never
leave the 0600 file. A submission Ray refuses removes the directory again and is reported with
Ray's own words (kind "rejected"); nothing is recorded.
"""

import base64
import hashlib
import io
import os
import shutil
import socket
import sys
import time
import zipfile

from ..run import command, boxpolicy
from ..host import jobrecord
from . import ray_api
from ..host.jobrecord import CMD, LOG, META, JobError

NAME = "ray"
DRIVER, DRIVER_SPEC, SECRETS = "driver.py", "driver.json", "secrets.json"
HEAD = {"node:__internal_head__": 0.001}
# What a retry takes from its parent besides what every retry takes (job_launch).
INHERITED = ("resources",)
PACKAGE_MAX = 100 << 20  # a shipped --workdir, zipped, in the head's memory and Ray's GCS


def submission_id(job_id):
    return "gpuops-" + job_id


def submit(spec, body):
    """Write the record and submit it; the job id. The caller holds the jobs-dir lock."""
    head = ray_api.version()
    workdir = command.workdir(spec.get("workdir"), "the Ray head")
    spec = dict(spec, policy=boxpolicy.check(spec.get("policy"), workdir))  # judged on the head, where it runs
    if body.startswith(b"#!"):
        command.check_shebang(body)
    try:
        driver = base64.b64decode(spec.get("driver_b64") or "")
    except (TypeError, ValueError):
        driver = b""
    if not driver:
        raise JobError("usage", "a Ray job needs its driver (gpuops sends it with the launch)")
    job_id = jobrecord.new_id()
    jdir = jobrecord.job_dir(job_id)
    os.mkdir(jdir, 0o700)
    submitted = []
    try:
        return _submit(spec, body, job_id, jdir, workdir, driver, head, submitted)
    except BaseException:
        if submitted:
            try:
                ray_api.stop(submitted[0])  # the record could not be written: take the job back
            except JobError:
                pass
        shutil.rmtree(jdir, ignore_errors=True)
        raise


def _submit(spec, body, job_id, jdir, workdir, driver, head, submitted):
    cmd_path = os.path.join(jdir, CMD)
    jobrecord.atomic_write(cmd_path, body, 0o500)
    jobrecord.atomic_write(os.path.join(jdir, DRIVER), driver, 0o500)
    argv, line_buffered = command.interpreter_argv(cmd_path, body, spec.get("args"), spec.get("pre"))
    jobrecord.write_json(os.path.join(jdir, DRIVER_SPEC), {"job_id": job_id, "argv": argv, "workdir": workdir})
    if spec.get("secrets"):
        jobrecord.write_json(os.path.join(jdir, SECRETS), spec["secrets"])
    sid = submission_id(job_id)
    asked = dict(spec.get("resources") or {})
    body_sent = {"entrypoint": " ".join(_quoted(w) for w in (sys.executable, "-S", os.path.join(jdir, DRIVER), jdir)),
                 "submission_id": sid, "metadata": {"gpuops_job_id": job_id, "gpuops_name": spec.get("name") or ""},
                 "entrypoint_resources": dict(HEAD, **(asked.pop("entrypoint_resources", None) or {}))}
    runtime_env = {"env_vars": dict(spec["env"])} if spec.get("env") else {}
    if asked.pop("ship_workdir", False):
        runtime_env["working_dir"] = _shipped(workdir)
    body_sent.update(asked)
    if runtime_env:
        body_sent["runtime_env"] = runtime_env
    meta = {
        "job_id": job_id, "engine": NAME, "ray_submission_id": sid, "engine_job_id": sid,
        "ray_version": str(head.get("ray_version"))[:40], "dashboard": ray_api.address(),
        "name": spec.get("name") or job_id, "labels": spec.get("labels") or {},
        "command": spec.get("command"), "kind": spec.get("kind") or "cmd", "args": list(spec.get("args") or []),
        "workdir": workdir, "env": spec.get("env") or {}, "env_names": sorted(spec.get("env") or {}),
        "secret_env_names": sorted(spec.get("secrets") or {}), "resources": spec.get("resources") or {},
        "line_buffered": line_buffered, "progress_regex": spec.get("progress_regex"), "profile": spec.get("profile"),
        "pre": spec.get("pre"), "host": socket.gethostname(), "launched_at": time.time(),
        "parent_job_id": spec.get("parent_job_id"), "key": spec.get("key"), "queue": spec.get("queue"),
        "log": os.path.join(jdir, LOG),
    }
    if spec.get("policy") is not None:  # a run: its driver supervises the attempts (gpuops.onbox.engines.ray_run)
        meta.update(policy=spec["policy"], run={"id": job_id, "attempt": 1})
    jobrecord.write_json(os.path.join(jdir, META), meta)  # before Ray starts the driver, which reads it
    answer = ray_api.submit(body_sent)
    submitted.append(sid)
    if not isinstance(answer, dict) or answer.get("submission_id") != sid:
        raise JobError("bad-answer", "Ray answered the submission of %s with %r" % (sid, str(answer)[:200]))
    return job_id


def _shipped(workdir):
    """Ray's URI of `workdir` uploaded as a working_dir package (files at the zip's root, as Ray
    packs one), so Ray's workers on every node run in a copy of it."""
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as z:
        for root, dirs, files in os.walk(workdir):
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
            for name in sorted(files):
                path = os.path.join(root, name)
                if os.path.isfile(path):
                    z.write(path, os.path.relpath(path, workdir))
                if data.tell() > PACKAGE_MAX:
                    raise JobError("usage", "--ship-workdir: %s is over %d MiB zipped; ship the code only (a smaller "
                                            "--workdir), the data on a shared filesystem" % (workdir, PACKAGE_MAX >> 20))
    body = data.getvalue()
    name = "_ray_pkg_%s.zip" % hashlib.sha1(body).hexdigest()
    status, text = ray_api.request("PUT", "/api/packages/gcs/" + name, raw=body, timeout=120)
    if status != 200:
        raise JobError("rejected", "Ray refused the working directory's package: %s" % ray_api.last_line(text))
    return "gcs://" + name


def _quoted(word: str):
    safe = all(c.isalnum() or c in "@%+=:,./-_" for c in word)
    return word if word and safe else "'" + word.replace("'", "'\"'\"'") + "'"


def retried(spec, parent, opts):
    """A retry's Ray request: the parent's driver and resources, with those the retry names
    replacing the parent's."""
    spec["resources"] = dict(parent.get("resources") or {}, **(opts.get("resources") or {}))
    try:
        with open(jobrecord.path(parent["job_id"], DRIVER), "rb") as f:
            spec["driver_b64"] = base64.b64encode(f.read()).decode("ascii")
    except (OSError, IOError, KeyError):
        raise JobError("not-found", "job %s has no driver left to run again" % parent.get("job_id"))
