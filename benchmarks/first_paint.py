"""How soon a person at a terminal sees something, and how soon a Ctrl-C gives the prompt back.

    python3 benchmarks/first_paint.py [--runs 5]

The real CLI on a real pseudo-terminal (80x24), against a real sshd box of the test rig
(tests/rig/sshd.py, fixture sysroot, fake GPUs). Interleaved, so drift hits each case alike:

  status, cold   `gpuops status --host box`, no kept connection (GPUOPS_SSH_PERSIST=0)
  status, warm   the same riding the master an earlier call kept
  fleet, warm    `gpuops fleet --host box`

For each: the seconds from the process's start to its first byte on the terminal (the spinner
or the answer), and to its exit. Then `gpuops fleet --host box,hung`, where `hung` accepts TCP and
never answers (a dead box's SSH handshake), interrupted with SIGINT to its process group once the
spinner shows: the seconds from the Ctrl-C to the exit. Targets (issue 38): the first paint within
0.1 s of the spinner's turn (its delay, gpuops.cli.spinner.DELAY_S, plus start-up), a Ctrl-C
answered within 0.3 s. Python's own start-up is printed beside them as the floor, and each first
byte as a multiple of it (a ratio in the same run holds under load, where seconds do not).
"""

import argparse
import fcntl
import os
import pty
import select
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures.fakegpu.boxes import compose  # noqa: E402
from tests.rig.sshd import SshRig, free_port  # noqa: E402


def on_pty(argv, env, interrupt_on=None, timeout=60.0):
    """(seconds to the first byte, seconds to exit, seconds from SIGINT to exit or None)."""
    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=side, stdout=side, stderr=side, start_new_session=True)
    os.close(side)
    first = sent = None
    seen = bytearray()
    while time.monotonic() - t0 < timeout:
        ready, _, _ = select.select([main], [], [], 0.01)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            first = first if first is not None else time.monotonic() - t0
            seen.extend(chunk)
            if interrupt_on and sent is None and interrupt_on in seen:
                os.killpg(proc.pid, signal.SIGINT)
                sent = time.monotonic()
        elif proc.poll() is not None:
            break
    proc.wait(timeout=timeout)
    end = time.monotonic()
    os.close(main)
    return first, end - t0, (end - sent) if sent else None


def blackhole():
    """A port that accepts connections and says nothing, as a dead box's sshd behind a NAT would."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpuops-paint-"))
    rig = SshRig(work / "rig")
    _, box_env = compose(work, "v2-healthy", "healthy")
    home = work / "home"
    home.mkdir()
    rig.box("box", env=dict(box_env, HOME=str(home)))
    hole = blackhole()
    rig.alias("hung", port=hole.getsockname()[1])
    env = dict(rig.env(), GPUOPS_STATE_DIR=str(work / "state"), GPUOPS_JOBS_DIR=str(work / "jobs"),
               TERM="xterm-256color")
    env.pop("COLUMNS", None)
    gpuops = [sys.executable, "-m", "gpuops"]
    cases = {
        "python -c pass": ([sys.executable, "-c", "pass"], {}),
        "status, cold": (gpuops + ["status", "--host", "box"], {"GPUOPS_SSH_PERSIST": "0"}),
        "status, warm": (gpuops + ["status", "--host", "box"], {}),
        "fleet, warm": (gpuops + ["fleet", "--host", "box"], {}),
    }
    on_pty(gpuops + ["status", "--host", "box"], env)  # the first call keeps a master for the warm ones
    got = {name: [] for name in cases}
    stops = []
    try:
        for _ in range(args.runs):
            for name, (argv, extra) in cases.items():
                got[name].append(on_pty(argv, dict(env, **extra)))
            stops.append(on_pty(gpuops + ["fleet", "--host", "box,hung"], env, interrupt_on=b"connecting to hung")[2])
    finally:
        hole.close()
        rig.stop()
    floor = statistics.median(e for _, e, _ in got["python -c pass"])
    print(f"{'case':<16} {'first byte s':>13} {'exit s':>8} {'first byte / python start':>26}   "
          f"(median of {args.runs}; 80x24 pty)")
    for name, runs in got.items():
        firsts = [f for f, _, _ in runs if f is not None]
        first = statistics.median(firsts) if firsts else float("nan")
        ratio = f"{first / floor:.2f}" if firsts else "-"
        print(f"{name:<16} {first:>13.3f} {statistics.median(e for _, e, _ in runs):>8.3f} {ratio:>26}")
    answered = [s for s in stops if s is not None]
    print(f"Ctrl-C during fleet (one box hung): exit {statistics.median(answered):.3f} s after SIGINT "
          f"(median of {len(answered)}; max {max(answered):.3f})" if answered else "Ctrl-C: the spinner never showed")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
