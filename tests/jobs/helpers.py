"""Helpers shared by the jobs tests."""

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gpuops.onbox.host import procs


def _tagged(job_ids):
    out = []
    for pid in procs.pids():
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item.startswith(b"GPUOPS_JOB_ID=") and item[14:].decode() in job_ids:
                out.append(pid)
    return out


def kill_everything(jobs_dir: Path):
    """Kill the jobs, their supervisors and queue runners recorded under `jobs_dir`."""
    if not jobs_dir.exists():
        return
    job_ids, recorded = set(), []
    for meta_path in jobs_dir.glob("*/meta.json"):
        meta = json.loads(meta_path.read_text())
        job_ids.add(meta["job_id"])
        recorded.append((meta.get("wrapper_pid"), meta.get("wrapper_start_ticks")))
        recorded.append((meta.get("pid"), meta.get("start_ticks")))
    for runner in jobs_dir.glob(".queues/*/runner.json"):
        r = json.loads(runner.read_text())
        recorded.insert(0, (r.get("pid"), r.get("start_ticks")))
    for pid, ticks in recorded:
        if pid and procs.alive(pid, ticks):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for _ in range(3):
        for pid in _tagged(job_ids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def wait_for(predicate, timeout=10.0, every=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    return predicate()


def meta_of(jobs_dir, job_id):
    return json.loads((Path(jobs_dir) / job_id / "meta.json").read_text())


def wait_run_end(box, jobs_dir, run, timeout=300, state="COMPLETED"):
    """A run's end through `gpuops wait` (the run's, not an attempt's), with all its events."""
    from gpuops.ops import wait as waiting

    doc = waiting.wait(box, job=run, jobs_dir=str(jobs_dir), timeout_s=timeout, after_event=0)
    said = [(e["kind"], e.get("why")) for e in doc["data"].get("events") or []]
    assert doc["data"]["state"] == state, (doc["summary"], said, doc["data"]["new_text"][-2000:])
    return doc


def run_record(jobs_dir, run):
    return json.loads((Path(jobs_dir) / run / "run.json").read_text())


def event_kinds(doc):
    return [e["kind"] for e in doc["data"]["events"]]


def launch_shape(target, jobs_dir, work, name, limit_s):
    """One output shape of tests/fixtures/progress/shapes.py started as a run under --stall-after
    `limit_s` (no retry), its checkpoint directory the run's for the shapes that save; the run's
    id. The shape's player writes when it began to hang into work/hang-at-NAME."""
    import sys

    from gpuops.jobs import runpolicy
    from gpuops.ops import jobs as op
    from tests.conftest import FIXTURES
    from tests.fixtures.progress import shapes

    ckpt = Path(work) / ("ckpt-" + name)
    ckpt.mkdir()
    policy = {"max_retries": "0", "stall_after": "%gs" % limit_s}
    if name in shapes.SAVES:
        policy["checkpoint_dir"] = str(ckpt)
    env = {"CKPT": str(ckpt), "HANG_AT": str(Path(work) / ("hang-at-" + name)), "PYTHONUNBUFFERED": "1"}
    doc = op.launch(target, command=f"{sys.executable} {FIXTURES / 'progress' / 'play.py'} {name}",
                    jobs_dir=str(jobs_dir), env=env, policy=runpolicy.build(**policy))
    assert doc["ok"], doc["summary"]
    return doc["data"]["job"]["job_id"]


@contextlib.contextmanager
def tmpfs(where: Path, size: str):
    """A tmpfs of `size` mounted on `where` (a new directory) while the block runs: a disk a job can
    fill. Skips the test where no tmpfs can be mounted."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)])
