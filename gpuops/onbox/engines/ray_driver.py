"""The entrypoint of a gpuops job on Ray: what Ray's job supervisor runs on the head, in place of
the command. Entry: main(argv), argv = [job dir]; gpuops.onbox.engines.ray_submit writes it (bundled,
standard library only) into the job's directory, and Ray's entrypoint names only it.

It takes the job's secrets from the job directory's 0600 `secrets.json` and deletes the file
before the command starts, so a secret is never in Ray's job record, its runtime_env, its log or
any argv; runs the job's immutable `cmd` as the supervisor would (bash, or its #! interpreter) in
the job's working directory; and writes what the command prints both to Ray (its driver log,
`ray job logs`) and to the job's own `log` with `growth` samples, so gpuops pages, follows and
dates that log byte for byte as on any engine. It ends as the command ended: its exit code, or
killed by the same signal (Ray reports that as a negative driver exit code). Ray's stop signals
it and the command (its process tree), and SIGKILLs what is left. A job with a run policy has
gpuops.onbox.engines.ray_run for its driver instead, which runs this one for a job without.
"""

import json
import os
import select
import signal
import subprocess
import sys
import time

SAMPLE_S = 1.0


def read_json(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, IOError, ValueError):
        return None


def _secrets(jdir):
    path = os.path.join(jdir, "secrets.json")
    found = read_json(path) or {}
    try:
        os.unlink(path)
    except OSError:
        pass
    return found


def started(jdir):
    """(driver.json, the command's environment, its secrets) of the job in `jdir`; the secrets file
    is gone once this returns."""
    spec = read_json(os.path.join(jdir, "driver.json")) or {}
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    env.update(GPUOPS_JOB_ID=spec.get("job_id") or "", GPUOPS_JOB_DIR=jdir, PYTHONUNBUFFERED="1")
    found = _secrets(jdir)
    env.update(found)
    return spec, env, found


def main(argv):
    jdir = argv[0]
    spec, env, _ = started(jdir)
    try:
        child = subprocess.Popen(spec["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=env, cwd=spec.get("workdir") or None)
    except (OSError, KeyError) as e:
        sys.stdout.write("gpuops: the job could not start: %s\n" % e)
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: _forward(child, number))
    _pump(child.stdout, os.path.join(jdir, "log"), os.path.join(jdir, "growth"))
    return end_as(child.wait())


def end_as(code):
    """End as the command ended: its exit code, or killed by its signal (a negative code)."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def _forward(child, number: int) -> None:
    try:
        child.send_signal(number)
    except OSError:
        pass


def _pump(pipe, log_path, growth_path) -> None:
    """Copy the command's output to Ray and to the job's log, sampling the log's size."""
    fd = pipe.fileno()
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    out = sys.stdout.buffer
    size, sampled, last = 0, 0, 0.0
    try:
        while True:
            try:
                ready = select.select([fd], [], [], SAMPLE_S)[0]
                data = os.read(fd, 65536) if ready else None
            except InterruptedError:
                continue
            if data == b"":
                break
            if data:
                os.write(log, data)
                size += len(data)
                try:
                    out.write(data)
                    out.flush()
                except (OSError, ValueError):
                    pass
            if time.time() - last >= SAMPLE_S and size != sampled:
                _sample(growth_path, size)
                sampled, last = size, time.time()
    finally:
        if size != sampled:
            _sample(growth_path, size)
        os.close(log)


def _sample(path, size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, ("%.2f %d\n" % (time.time(), size)).encode("ascii"))
    finally:
        os.close(fd)
