"""How long the fleet view of many boxes takes against the view of one. One run, on loopback.

    python3 benchmarks/fleet.py [--boxes 64] [--runs 3] [--window 2] [--python-fake]

Starts --boxes real sshd processes through the test rig (tests/rig/sshd.py), each a fake 2-GPU box
(fixture sysroot + the "healthy" scenario), and times, interleaved so drift hits both alike, the
median wall time of gpuops.ops.fleet.inventory (in-process, no CLI start-up) over:

  one box     the first box alone
  fleet       all the boxes at once (bounded pool of gpuops.ops.fleet.WORKERS)

twice: cold, every call paying its own SSH handshake (GPUOPS_SSH_PERSIST=0, a first call of the
day), and warm, riding the masters and resident helpers earlier calls left (as `fleet --watch`
and any view within GPUOPS_SSH_PERSIST seconds of the last do). Target: fleet <= 3x one box.

On loopback both ends of every box share this machine's cores, which no real fleet does: each
box's sshd handshake, its python3 and each nvidia-smi sample run on that box's own CPUs. So the
fake nvidia-smi answers here from a recording of the Python fake's answers (a `case` in sh, the
same bytes), not by starting a Python process per sample: with --python-fake it does, and the
machine's CPU, not gpuops, sets the figure. Machine CPU and gpuops's own CPU are printed per box.
"""

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuops.fleetfile import Box  # noqa: E402
from gpuops.onbox.host import gpu_pins, smi  # noqa: E402
from gpuops.ops import fleet as op  # noqa: E402
from gpuops.remote import mux  # noqa: E402
from tests.fixtures.fakegpu.boxes import FAKEGPU, compose  # noqa: E402
from tests.rig.sshd import SshRig  # noqa: E402

# The queries the fleet view makes of nvidia-smi (gpuops.onbox.host.gpu_light.sample with names and UUIDs,
# then without).
_FIELDS = [f for f, _, _ in smi.FIELDS]
QUERIES = [["--query-gpu=" + ",".join(_FIELDS + [smi.NAME_FIELD[0], gpu_pins.UUID_FIELD[0]]),
            "--format=csv,noheader,nounits"],
           ["--query-gpu=" + ",".join(_FIELDS), "--format=csv,noheader,nounits"]]


def recorded_fake(directory, scenario="healthy"):
    """A directory holding an nvidia-smi that answers the fleet view's queries with the Python
    fake's recorded bytes (and hands any other query to the Python fake)."""
    directory.mkdir(parents=True, exist_ok=True)
    real = FAKEGPU / scenario / "nvidia-smi"
    cases = []
    for i, argv in enumerate(QUERIES):
        out = subprocess.run([str(real), *argv], capture_output=True, check=True).stdout
        (directory / f"answer{i}").write_bytes(out)
        cases.append(f'  {shlex.quote(" ".join(argv))}) exec cat "$here/answer{i}" ;;')
    script = directory / "nvidia-smi"
    script.write_text("#!/bin/sh\nhere=$(dirname \"$0\")\ncase \"$*\" in\n" + "\n".join(cases)
                      + f'\n  *) exec {shlex.quote(str(real))} "$@" ;;\nesac\n')
    script.chmod(0o755)
    return directory


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


def helpers():
    """Boxes whose kept master has a resident helper armed (gpuops.remote.resident)."""
    directory = mux.shared_dir()
    return sum(name.endswith(mux.RESIDENT_SUFFIX) for name in os.listdir(directory)) if directory else 0


def measure(boxes, runs, window, persist):
    os.environ["GPUOPS_SSH_PERSIST"] = persist
    if persist != "0":  # the warm runs ride masters and helpers earlier calls left: make them now, untimed
        op.inventory(boxes, window_s=0)
        deadline = time.monotonic() + 300
        while helpers() < len(boxes) and time.monotonic() < deadline:
            op.inventory(boxes, window_s=0)  # arms a few more boxes' helpers, in the background
            time.sleep(2)
        print(f"  {helpers()} of {len(boxes)} boxes have a resident helper")
    one, many, cpu_many, own_many = [], [], [], []
    for _ in range(runs):
        t, _, _, doc = timed(lambda: op.inventory(boxes[:1], window_s=window))
        assert doc["ok"], doc["summary"]
        one.append(t)
        t, cpu, own, doc = timed(lambda: op.inventory(boxes, window_s=window))
        assert doc["ok"], doc["summary"]
        many.append(t)
        cpu_many.append(cpu)
        own_many.append(own)
    return statistics.median(one), statistics.median(many), statistics.median(cpu_many), statistics.median(own_many)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--boxes", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=op.DEFAULT_WINDOW_S)
    ap.add_argument("--python-fake", action="store_true", help="a Python process per nvidia-smi sample")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gpuops-bench-fleet-"))
    rig = SshRig(work / "rig")
    _, env = compose(work, "v2-healthy", "healthy")
    if not args.python_fake:
        env["PATH"] = f"{recorded_fake(work / 'fake')}:{env['PATH'].split(':', 1)[1]}"
    os.environ.update(GPUOPS_SSH_CONFIG=str(rig.ssh_config), XDG_RUNTIME_DIR=str(work / "run"))
    (work / "run").mkdir(mode=0o700)
    started = time.perf_counter()
    try:
        boxes = [Box(alias=rig.box(f"fleet{i:03d}", env={**env, "GPUOPS_JOBS_DIR": str(work / "jobs")}).spec)
                 for i in range(args.boxes)]
        print(f"{args.boxes} sshd boxes up in {time.perf_counter() - started:.1f}s; {os.cpu_count()} cores; "
              f"{'Python' if args.python_fake else 'recorded'} fake nvidia-smi")
        os.environ["GPUOPS_SSH_PERSIST"] = "0"
        for box in boxes:  # trust each host key once, one at a time, so no timed run writes known_hosts
            op.inventory([box], window_s=0)
        for name, persist in (("cold", "0"), ("warm", "600")):
            a, b, cpu, own = measure(boxes, args.runs, args.window, persist)
            print(f"{name}: window {args.window:g}s, median of {args.runs}: one box {a:.2f}s, {args.boxes} boxes "
                  f"{b:.2f}s, ratio {b / a:.2f}x (target <= 3x); machine CPU {cpu / args.boxes:.3f} core-s per box "
                  f"({cpu:.1f} of {b * os.cpu_count():.1f} available), gpuops's own side (this process + its ssh "
                  f"clients) {own / args.boxes:.3f} per box")
    finally:
        directory = mux.shared_dir()
        for socket in mux.sockets(directory) if directory else []:  # the warm runs' masters
            mux.close(socket)
        rig.stop()


if __name__ == "__main__":
    main()
