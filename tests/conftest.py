import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.rig.sshd import SshRig

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Tiers, read from the fixtures a test uses (their whole closure, so a box fixture built on `rig`
# counts): Slurm's daemons, then any real service (sshd through `rig`; Ray; torch processes run
# through those boxes), else `unit`. `./scripts/test --fast` runs the unit tier (-m unit).
SLURM_FIXTURES = frozenset(("slurm", "slurm_accounted"))
SERVICE_FIXTURES = frozenset(("rig", "ray_cluster"))


def tier(fixturenames):
    names = set(fixturenames)
    if names & SLURM_FIXTURES:
        return "slurm"
    if names & SERVICE_FIXTURES:
        return "rig"
    return "unit"


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(tier(getattr(item, "fixturenames", ())))


def _need(tool):
    if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
        pytest.fail(f"{tool} is not installed: run the README's test command (scripts/test), which installs it")


@pytest.fixture(scope="session")
def rig(tmp_path_factory):
    """The session's SSH rig; add boxes with rig.box(name, env={...})."""
    _need("sshd")
    r = SshRig(tmp_path_factory.mktemp("sshrig"))
    # Masters kept between calls are tested on purpose in test_reuse.py; everywhere else each
    # call stands alone, so a count of logins or channels means what the test says it does.
    saved = {k: os.environ.get(k) for k in ("GPUOPS_SSH_CONFIG", "GPUOPS_SSH_PERSIST")}
    os.environ.update(GPUOPS_SSH_CONFIG=str(r.ssh_config), GPUOPS_SSH_PERSIST="0")
    yield r
    r.stop()
    for key, old in saved.items():
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


@pytest.fixture(scope="session")
def plain_box(rig):
    """A box with no overlay: the real machine seen over SSH."""
    return rig.box("plain")


def gpuops(*args, env=None, input=None, timeout=120):
    """Run the real CLI as a subprocess; returns CompletedProcess with text output."""
    return subprocess.run([sys.executable, "-m", "gpuops", *args], capture_output=True, text=True,
                          env=env or os.environ.copy(), input=input, timeout=timeout, cwd=ROOT)


@pytest.fixture
def cli():
    return gpuops


@pytest.fixture(scope="session", autouse=True)
def _state_dir(tmp_path_factory):
    """What gpuops keeps on this workstation (last-seen jobs, pulls, torch facts, gangs) goes to
    the session's temp dir, never the developer's own ~/.local/state."""
    if os.environ.get("GPUOPS_STATE_DIR"):
        yield
        return
    os.environ["GPUOPS_STATE_DIR"] = str(tmp_path_factory.mktemp("gpuops-state"))
    yield
    os.environ.pop("GPUOPS_STATE_DIR", None)


@pytest.fixture
def anyio_backend():
    """The MCP tests' event loop (anyio's pytest plugin asks for it)."""
    return "asyncio"


@contextlib.contextmanager
def kept_masters(monkeypatch, prefix, resident=True):
    """SSH masters kept between calls (gpuops.remote.mux), in a socket directory of their own,
    every master closed afterwards; `resident` False keeps calls on exec channels. The directory
    is short on purpose: a socket path longer than 90 bytes turns reuse off."""
    runtime = tempfile.mkdtemp(prefix=prefix)
    monkeypatch.setenv("GPUOPS_SSH_PERSIST", "60")
    monkeypatch.setenv("GPUOPS_TRANSPORT", "openssh")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    if resident:
        monkeypatch.delenv("GPUOPS_RESIDENT", raising=False)
    else:
        monkeypatch.setenv("GPUOPS_RESIDENT", "0")
    try:
        yield runtime
    finally:
        from gpuops.remote import mux

        for path in mux.sockets(mux.shared_dir()):
            mux.close(path)
        shutil.rmtree(runtime, ignore_errors=True)
