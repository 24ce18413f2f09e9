"""A real Ray head for tests: `ray start --head --num-cpus 2` from the test extra's ray, in a temp
dir, on free ports, stopped by its own processes' pids.

Nothing system-wide: the temp dir (short, under /tmp: Ray's unix sockets must fit 107 bytes) holds
the session, every port Ray opens is a free one (so the rig can share the machine with another
head), and the stop ends exactly the processes whose command line names the rig's temp dir (and
what they leave: workers and drivers die with their raylet and job supervisors), never every Ray
process of the machine as `ray stop` would.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.rig.sshd import free_port

START_S = 90


def unavailable():
    """Why a Ray head cannot run here, or None: only a missing wheel is a reason to skip."""
    try:
        import ray
    except ImportError:
        return "ray is not installed: the test extra pins it (pip install -e '.[test]')"
    if not _ray_cli():
        return f"ray {ray.__version__} is installed but its `ray` command is not on PATH"
    return None


def _ray_cli():
    return shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")


def distinct_ports(n):
    """`n` free ports, no two alike: the kernel may hand back a port it just freed, and Ray refuses
    to start when two of its components are given one port (seen once in a full run)."""
    found = []
    while len(found) < n:
        port = free_port()
        if port not in found:
            found.append(port)
    return found


class RayHead:
    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="gr", dir="/tmp"))
        self.temp = self.dir / "t"
        self.ports = distinct_ports(9)  # the GCS, the dashboard, then start()'s seven
        self.gcs_port, self.dashboard_port = self.ports[:2]
        self.log = self.dir / "start.log"

    @property
    def dashboard(self):
        return f"http://127.0.0.1:{self.dashboard_port}"

    def env(self):
        """What a login on the head needs to find it: Ray's own RAY_ADDRESS convention and temp dir."""
        return {"RAY_ADDRESS": self.dashboard, "RAY_TMPDIR": str(self.temp), "RAY_USAGE_STATS_ENABLED": "0",
                "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"]}

    def start(self):
        names = ("ray-client-server-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                 "metrics-export-port", "runtime-env-agent-port", "node-manager-port", "object-manager-port")
        ports = {f"--{name}": str(port) for name, port in zip(names, self.ports[2:])}
        argv = [_ray_cli(), "start", "--head", "--num-cpus", "2", "--temp-dir", str(self.temp),
                "--port", str(self.gcs_port), "--dashboard-host", "127.0.0.1", "--dashboard-port",
                str(self.dashboard_port), "--disable-usage-stats", "--object-store-memory", str(200 << 20)]
        for flag, port in ports.items():
            argv += [flag, port]
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        env.pop("RAY_ADDRESS", None)
        with open(self.log, "wb") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=START_S,
                                  start_new_session=True)
        if done.returncode != 0:
            raise RuntimeError(f"ray start --head failed ({done.returncode}): {self.log.read_text()[-2000:]}")
        deadline = time.time() + START_S
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.dashboard + "/api/version", timeout=2) as r:
                    if "ray_version" in json.loads(r.read()):
                        return self
            except (OSError, ValueError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Ray dashboard did not answer within {START_S}s: {self.log.read_text()[-2000:]}")

    def ray(self, *args, timeout=120):
        """The real `ray` CLI against this head (its output, as text)."""
        env = dict(os.environ, RAY_ADDRESS=self.dashboard, RAY_USAGE_STATS_ENABLED="0")
        return subprocess.run([_ray_cli(), *args], capture_output=True, text=True, env=env, timeout=timeout)

    def _pids(self):
        mark = str(self.temp).encode()
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        if mark in f.read():
                            found.append(int(name))
                except OSError:
                    pass
        return found

    def stop(self):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self._pids():
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.time() + 10
            while self._pids() and time.time() < deadline:
                time.sleep(0.2)
        shutil.rmtree(self.dir, ignore_errors=True)
