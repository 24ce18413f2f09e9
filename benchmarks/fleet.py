"""How long the fleet view of many boxes takes against the view of one. One run, on loopback.

    python3 benchmarks/fleet.py [--boxes 64] [--runs 3] [--window 2]

Starts --boxes real sshd processes through the test rig (tests/rig/sshd.py), each a fake 2-GPU box
(fixture sysroot + the "healthy" fake nvidia-smi), and times, interleaved so drift hits both alike,
the median wall time of gpuops.ops.fleet.inventory (in-process, no CLI start-up) over:

  one box     the first box alone
  fleet       all the boxes at once (bounded pool of gpuops.ops.fleet.WORKERS)

Target: fleet <= 3x one box. Every call pays its own SSH handshake (GPUOPS_SSH_PERSIST=0), as a
first call of the day does. On loopback every box shares this machine's cores: each box's python3,
its sshd session and each fake nvidia-smi sample (a Python process of its own) compete for them, so
a small machine measures its own CPU as much as gpuops; the core count is printed with the ratio.
"""

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuops.fleetfile import Box  # noqa: E402
from gpuops.ops import fleet as op  # noqa: E402
from tests.fixtures.fakegpu.boxes import compose  # noqa: E402
from tests.rig.sshd import SshRig  # noqa: E402


def busy_cores_s():
    """CPU seconds this whole machine has spent (user, nice, system), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:4]
    return sum(int(x) for x in fields) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    """CPU seconds of gpuops's side alone: this process and its finished children (the ssh clients)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn):
    start, cpu, own = time.perf_counter(), busy_cores_s(), own_cpu_s()
    doc = fn()
    return time.perf_counter() - start, busy_cores_s() - cpu, own_cpu_s() - own, doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--boxes", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=op.DEFAULT_WINDOW_S)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gpuops-bench-fleet-"))
    rig = SshRig(work / "rig")
    _, env = compose(work, "v2-healthy", "healthy")
    os.environ.update(GPUOPS_SSH_CONFIG=str(rig.ssh_config), GPUOPS_SSH_PERSIST="0")
    started = time.perf_counter()
    try:
        boxes = [Box(alias=rig.box(f"fleet{i:03d}", env={**env, "GPUOPS_JOBS_DIR": str(work / "jobs")}).spec)
                 for i in range(args.boxes)]
        print(f"{args.boxes} sshd boxes up in {time.perf_counter() - started:.1f}s; {os.cpu_count()} cores")
        for box in boxes:  # trust each host key once, one at a time, so no timed run writes known_hosts
            op.inventory([box], window_s=0)
        one, many, cpu_one, cpu_many, own_many = [], [], [], [], []
        for _ in range(args.runs):
            t, cpu, _, doc = timed(lambda: op.inventory(boxes[:1], window_s=args.window))
            assert doc["ok"], doc["summary"]
            one.append(t)
            cpu_one.append(cpu)
            t, cpu, own, doc = timed(lambda: op.inventory(boxes, window_s=args.window))
            assert doc["ok"], doc["summary"]
            many.append(t)
            cpu_many.append(cpu)
            own_many.append(own)
        a, b = statistics.median(one), statistics.median(many)
        print(f"window {args.window:g}s, median of {args.runs}: one box {a:.2f}s, "
              f"{args.boxes} boxes {b:.2f}s, ratio {b / a:.2f}x (target <= 3x)")
        # Both ends of every box live on this machine: when the fleet run keeps every core busy,
        # the wall time is this machine's CPU (all the sshds, pythons and fake nvidia-smis), not
        # gpuops waiting on one box after another. Other work on the machine is counted too.
        per_box = statistics.median(cpu_many) / args.boxes
        print(f"machine CPU: one box {statistics.median(cpu_one):.2f} core-s; fleet {statistics.median(cpu_many):.1f} "
              f"core-s ({per_box:.2f} per box) of {b * os.cpu_count():.1f} available in its wall time")
        own = statistics.median(own_many)
        print(f"gpuops's own side (this process + its ssh clients): {own:.1f} core-s, {own / args.boxes:.3f} per box; "
              f"the rest is the boxes' sshds, python3 and fake nvidia-smi, which real boxes run on their own CPUs")
    finally:
        rig.stop()


if __name__ == "__main__":
    main()
