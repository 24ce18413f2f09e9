"""Fixtures for the detached-jobs tests: a box over the real sshd rig, a jobs dir per test, and
a cleanup that kills every process a test's jobs left behind (by recorded pid + start time, and
by the GPUOPS_JOB_ID tag in their environment)."""

import shutil
from pathlib import Path

import pytest

from gpuops.remote.targets import target_for
from tests.jobs.helpers import kill_everything


@pytest.fixture(scope="session")
def boot_root(tmp_path_factory):
    """A GPUOPS_ROOT overlay: boot_id (a copy of the real one, so tests can fake a reboot) and a
    fake GPU device file /dev/nvidia0 (a process holding it open counts as a GPU holder)."""
    root = tmp_path_factory.mktemp("jobs-root")
    f = root / "proc/sys/kernel/random/boot_id"
    f.parent.mkdir(parents=True)
    f.write_text(Path("/proc/sys/kernel/random/boot_id").read_text())
    (root / "dev").mkdir()
    (root / "dev/nvidia0").write_text("")
    return root


@pytest.fixture(scope="session")
def jobs_box(rig, boot_root):
    return rig.box("jobsbox", env={"GPUOPS_ROOT": str(boot_root)})


@pytest.fixture
def jobs_dir(tmp_path, boot_root):
    d = tmp_path / "jobs"
    real = Path("/proc/sys/kernel/random/boot_id").read_text()
    (boot_root / "proc/sys/kernel/random/boot_id").write_text(real)
    yield d
    kill_everything(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def box(jobs_box):
    """An SSHTarget to the jobs box (closed after the test)."""
    t = target_for(jobs_box.spec)
    yield t
    t.close()

