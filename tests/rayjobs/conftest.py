"""Fixtures for gpuops jobs on Ray: one real Ray head for all of these tests (tests/rig/ray.py;
package-scoped: started once in the session, stopped when the last Ray test ends, so no later
test's preflight finds a head on this machine), reached as a box through the suite's real sshd,
and a jobs directory per test whose Ray jobs are stopped when the test ends, so the head's two
CPUs are free for the next."""

import json
import urllib.request
from pathlib import Path

import pytest

from gpuops.remote.targets import target_for
from tests.rig.ray import RayHead, unavailable


@pytest.fixture(scope="package")
def ray_cluster():
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    head = RayHead().start()
    yield head
    head.stop()


@pytest.fixture(scope="package")
def head_box(rig, ray_cluster):
    return rig.box("rayhead", env=ray_cluster.env())


@pytest.fixture
def box(head_box):
    t = target_for(head_box.spec)
    yield t
    t.close()


@pytest.fixture
def jobs_dir(tmp_path, ray_cluster):
    d = tmp_path / "jobs"
    yield d
    stop_recorded(ray_cluster, d)


def stop_recorded(ray_cluster, jobs_dir):
    """Stop every Ray job recorded under `jobs_dir` that Ray still runs or holds."""
    for meta in Path(jobs_dir).glob("*/meta.json"):
        sid = json.loads(meta.read_text()).get("ray_submission_id")
        if sid:
            req = urllib.request.Request(f"{ray_cluster.dashboard}/api/jobs/{sid}/stop", data=b"", method="POST")
            try:
                urllib.request.urlopen(req, timeout=10).close()
            except OSError:
                pass
