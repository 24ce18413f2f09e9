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

# A width in the environment makes a pipe's report fold like a terminal's: pytest-xdist's workers
# set COLUMNS=80 LINES=24, a developer's shell may too. Tests that mean a width set it themselves.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# Tiers, read from the fixtures a test uses (their whole closure, so a box fixture built on `rig`
# counts): Slurm's daemons; then real services and processes that stand for a machine (sshd boxes
# through `rig`, Ray, and through `real_processes`: the CLI as a subprocess, an MCP server, GPU
# holders, torch training); else `unit`. `./scripts/test --fast` runs the unit tier (-m unit).
SLURM_FIXTURES = frozenset(("slurm", "slurm_accounted"))
SERVICE_FIXTURES = frozenset(("rig", "ray_cluster", "real_processes"))


def tier(fixturenames):
    names = set(fixturenames)
    if names & SLURM_FIXTURES:
        return "slurm"
    if names & SERVICE_FIXTURES:
        return "rig"
    return "unit"


# Under pytest-xdist (--dist loadgroup) the tests of one group run on one worker, one after another:
# one Slurm for the session instead of one per worker, and nothing else running while a Ray head
# is up (a preflight then also asks the head's GCS: one more exec channel than a test counts).
XDIST_GROUPS = (("slurm", SLURM_FIXTURES), ("ray", frozenset(("ray_cluster", "quiet_of_ray"))))


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        item.add_marker(tier(names))
        for group, fixtures in XDIST_GROUPS:
            if set(names) & fixtures:
                item.add_marker(pytest.mark.xdist_group(group))
                break


def _need(tool):
    if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
        pytest.fail(f"{tool} is not installed: run the README's test command (scripts/test), which installs it")


@pytest.fixture(scope="session")
def rig(tmp_path_factory):
    """The session's SSH rig; add boxes with rig.box(name, env={...}).

    Calls reuse SSH masters (and the resident helper on them) as a user's calls do: a later call to
    a box rides the master an earlier one left, in a socket directory of the session's own. Tests
    that count logins or channels, or need each call to stand alone, ask for `fresh_logins`."""
    _need("sshd")
    r = SshRig(tmp_path_factory.mktemp("sshrig"))
    runtime = tempfile.mkdtemp(prefix="gpr")  # short: a socket path over 90 bytes turns reuse off
    saved = {k: os.environ.get(k) for k in ("GPUOPS_SSH_CONFIG", "GPUOPS_SSH_PERSIST", "XDG_RUNTIME_DIR")}
    os.environ.update(GPUOPS_SSH_CONFIG=str(r.ssh_config), GPUOPS_SSH_PERSIST="600", XDG_RUNTIME_DIR=runtime)
    try:
        yield r
    finally:
        _close_masters()
        r.stop()
        shutil.rmtree(runtime, ignore_errors=True)
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@pytest.fixture(scope="session")
def box_cache(tmp_path_factory):
    """XDG_CACHE_HOME of the sync boxes.

    Here, not in tests/sync: a module that imports a session fixture defines a second one, and the
    rig's box would be started twice."""
    return tmp_path_factory.mktemp("box-cache")


@pytest.fixture(scope="session")
def rsync_box(rig, box_cache):
    """A box with rsync, whose digest cache is in `box_cache`."""
    return rig.box("syncbox", env={"XDG_CACHE_HOME": str(box_cache)})


def _close_masters():
    from gpuops.remote import mux

    shared = mux.shared_dir()
    for path in mux.sockets(shared) if shared else ():
        mux.close(path)


@pytest.fixture
def quiet_of_ray():
    """For a test that a Ray head on this machine would disturb: under xdist it runs on the worker
    that runs the Ray tests (XDIST_GROUPS), after their head is stopped."""


@pytest.fixture
def fresh_logins(monkeypatch):
    """Each call makes its own connection, none kept: a count of logins or channels then means
    what the test says it does. Masters an earlier test kept are closed first: a call finds one by
    its socket and rides it (with the resident helper it armed) whatever PERSIST now says."""
    _close_masters()
    monkeypatch.setenv("GPUOPS_SSH_PERSIST", "0")


@pytest.fixture(scope="session")
def plain_box(rig):
    """A box with no overlay: the real machine seen over SSH."""
    return rig.box("plain")


def gpuops(*args, env=None, input=None, timeout=120):
    """Run the real CLI as a subprocess; returns CompletedProcess with text output."""
    return subprocess.run([sys.executable, "-m", "gpuops", *args], capture_output=True, text=True,
                          env=env or os.environ.copy(), input=input, timeout=timeout, cwd=ROOT)


def gpuops_inproc(*args, env=None, input=None, timeout=None):
    """The CLI run in this process, as `gpuops()` runs it in a subprocess (timeout is not
    enforced): for tests of what a verb answers (its envelope, report and exit status), not of the
    process (signals, streams cut by an exit, start-up). Only verbs that stay on this machine: a
    call over SSH would leave its threads and kept connections in the test process."""
    import io

    from gpuops.cli import main

    saved_env, saved_argv, saved_stdin = dict(os.environ), sys.argv, sys.stdin
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        sys.argv = ["gpuops", *args]
        sys.stdin = io.TextIOWrapper(io.BytesIO((input or "").encode()))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv, sys.stdin = saved_argv, saved_stdin
    return subprocess.CompletedProcess(["gpuops", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli_inproc():
    return gpuops_inproc


@pytest.fixture
def real_processes():
    """Marks a test that runs real processes standing for a machine or a service (its tier is
    `rig`, see `tier`); it provides nothing else."""


@pytest.fixture
def cli(real_processes):
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


@pytest.fixture(scope="session", autouse=True)
def _no_launch_watch():
    """A launch watches its job for a second (gpuops.ops.jobs.CONFIRM_S) so a typo is FAILED at
    launch; every other test's jobs start without that second. Tests of that watch ask for
    `launch_confirms`."""
    saved = os.environ.get("GPUOPS_LAUNCH_CONFIRM_S")
    os.environ["GPUOPS_LAUNCH_CONFIRM_S"] = "0"
    yield
    if saved is None:
        os.environ.pop("GPUOPS_LAUNCH_CONFIRM_S", None)
    else:
        os.environ["GPUOPS_LAUNCH_CONFIRM_S"] = saved


@pytest.fixture
def launch_confirms(monkeypatch):
    monkeypatch.delenv("GPUOPS_LAUNCH_CONFIRM_S", raising=False)


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
