"""Keeper test boxes: real sshd boxes on loopback, each with its own home, job records, fixture
sysroot and fake nvidia-smi (two idle H100s, so placement has something to place on), whose
python3 is the one running the tests (real torch, CPU). A box is killed outright by stopping its
sshd and killing every process its job records name. A fleet file lists the boxes with prices
and a stop command that writes what the vault held when it ran."""

import itertools
import os
import stat
import sys

import pytest

from tests.fixtures.fakegpu.boxes import FAKEGPU, SYSTEM_PATH, compose
from tests.jobs.helpers import kill_everything

_NAMES = itertools.count(1)


class Fleet:
    def __init__(self, rig, base):
        self.rig, self.base, self.boxes = rig, base, {}
        self.bin = base / "bin"
        self.bin.mkdir()
        wrapper = self.bin / "python3"  # a wrapper: a virtual environment's python finds its packages by its path
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.state, self.vault = base / "state", base / "vault"
        self.file = base / "fleet.toml"

    def host(self):
        """A box of the rig that is not in the fleet file (a vault host): its alias."""
        name = f"kp{next(_NAMES)}"
        home = self.base / f"home-{name}"
        home.mkdir()
        _, env = compose(self.base, "v2-healthy", "healthy", name=f"root-{name}")
        env.update(PATH=f"{FAKEGPU / 'healthy'}:{self.bin}:{SYSTEM_PATH}", GPUOPS_JOBS_DIR=str(self.jobs(name)),
                   HOME=str(home), OMP_NUM_THREADS="1")
        self.boxes[name] = self.rig.box(name, env=env)
        return name

    def box(self, price, stop=None):
        name = self.host()
        with open(self.file, "a") as f:
            f.write(f'[[host]]\nalias = "{name}"\nusd_per_hour = {price}\n')
            if stop:
                f.write(f"stop = '{stop}'\n")
            f.write("\n")
        return name

    def jobs(self, name):
        return self.base / f"jobs-{name}"

    def home(self, name):
        return self.base / f"home-{name}"

    def kill(self, name):
        """The box is gone: its sshd, every connection, and every process its records name."""
        self.boxes[name].stop()
        kill_everything(self.jobs(name))

    def env(self):
        return {**self.rig.env(), "GPUOPS_STATE_DIR": str(self.state)}


@pytest.fixture
def fleet(rig, tmp_path):
    f = Fleet(rig, tmp_path)
    saved = os.environ.get("GPUOPS_STATE_DIR")
    os.environ["GPUOPS_STATE_DIR"] = str(f.state)
    yield f
    for name in f.boxes:
        kill_everything(f.jobs(name))
        f.boxes[name].stop()
    _kill_keepers(f.state)
    if saved is None:
        os.environ.pop("GPUOPS_STATE_DIR", None)
    else:
        os.environ["GPUOPS_STATE_DIR"] = saved


def _kill_keepers(state):
    """Every keeper this test started, by its pid file (pid and start time)."""
    import json
    import signal

    from gpuops.onbox.host import procs

    for pid_file in (state / "keeper").glob("*/keeper.pid"):
        held = json.loads(pid_file.read_text())
        if procs.alive(held["pid"], held["start_ticks"]):
            os.kill(held["pid"], signal.SIGKILL)
