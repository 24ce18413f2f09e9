"""Gang test boxes: real sshd boxes on loopback whose python3 is the one running the tests (so
real torch, CPU wheel, is there), each with its own job records and home. Every process a gang
left behind is killed after the module, by its records (tests.jobs.helpers)."""

import os
import stat
import sys

import pytest

from tests.fixtures.fakegpu.boxes import SYSTEM_PATH
from tests.jobs.helpers import kill_everything

DDP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "gang", "ddp_train.py")


class Boxes:
    def __init__(self, rig, base):
        self.rig, self.base, self.boxes = rig, base, {}
        self.bin = base / "bin"
        self.bin.mkdir()
        # A wrapper, not a link: a virtual environment's python finds its packages from its own path.
        wrapper = self.bin / "python3"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.state = base / "state"

    def box(self, name, **env):
        home = self.base / f"home-{name}"
        home.mkdir(exist_ok=True)
        full = {"PATH": f"{self.bin}:{SYSTEM_PATH}", "GPUOPS_JOBS_DIR": str(self.jobs(name)), "HOME": str(home)}
        full.update(env)
        self.boxes[name] = self.rig.box(name, env=full)
        return self.boxes[name]

    def jobs(self, name):
        return self.base / f"jobs-{name}"

    def env(self):
        """The CLI's environment: the rig's ssh_config and this module's gang records."""
        return {**self.rig.env(), "GPUOPS_STATE_DIR": str(self.state)}


@pytest.fixture(scope="module")
def gang_rig(rig, tmp_path_factory):
    boxes = Boxes(rig, tmp_path_factory.mktemp("gang"))
    saved = os.environ.get("GPUOPS_STATE_DIR")
    os.environ["GPUOPS_STATE_DIR"] = str(boxes.state)  # the in-process calls read the same records
    yield boxes
    for name, box in boxes.boxes.items():
        kill_everything(boxes.jobs(name))
        box.stop()
    if saved is None:
        os.environ.pop("GPUOPS_STATE_DIR", None)
    else:
        os.environ["GPUOPS_STATE_DIR"] = saved
