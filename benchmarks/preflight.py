"""How long `gpuops preflight --host H` takes, against what it replaces. One run, on loopback.

    python3 benchmarks/preflight.py [--runs 7] [--scenario healthy]

Starts its own OpenSSH sshd through the test rig (tests/rig/sshd.py) and times, interleaved so
drift hits all of them alike, the median wall time of:

  bare ssh       `ssh host true` with the OpenSSH client: the floor for any remote check
  per-command    the same facts the way shell scripts gather them: 7 separate `ssh host CMD` calls
  op             gpuops.ops.preflight in-process: resolve, connect, one exec, checks (no CLI start-up)
  cli            `python -m gpuops preflight --host H --json` as a subprocess: the above plus the
                 interpreter and imports, what a user or agent pays per call

Targets: op <= 1.5x bare ssh, and <= 0.25x the per-command way. Both boxes run the login shell's
rc file, as a real box does. --scenario puts a fake nvidia-smi on the box's PATH (and a fixture
sysroot under it) so the GPU queries run too; without it the box is this machine as it is.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuops.ops import preflight as op  # noqa: E402
from gpuops.remote.targets import target_for  # noqa: E402
from tests.fixtures.fakegpu.boxes import compose  # noqa: E402
from tests.rig.sshd import SshRig  # noqa: E402

# What a hand-written preflight script runs, one ssh call each.
PER_COMMAND = [
    "nvidia-smi --query-gpu=name,memory.used,temperature.gpu,clocks_throttle_reasons.active --format=csv",
    "df -h ~ . /dev/shm /tmp; df -i ~ . /tmp",
    "free -m; nproc; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max 2>/dev/null "
    "|| cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "grep oom_kill /sys/fs/cgroup/memory.events 2>/dev/null || grep oom_kill /sys/fs/cgroup/memory/memory.oom_control",
    "dmesg 2>/dev/null | grep -iE 'xid|killed process' | tail -20",
    "python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1 | tail -1",
    "uptime; cat /proc/sys/kernel/random/boot_id; command -v tmux setsid nohup; ss -ltn 2>/dev/null | grep -c 29500",
]


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--scenario", help="fake nvidia-smi scenario under tests/fixtures/fakegpu (e.g. healthy)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gpuops-bench-"))
    rig = SshRig(work / "rig")
    env = compose(work, "v2-healthy", args.scenario)[1] if args.scenario else None
    box = rig.box("bench", env=env)
    os.environ["GPUOPS_SSH_CONFIG"] = str(rig.ssh_config)
    ssh = ["ssh", "-F", str(rig.ssh_config), "-o", "BatchMode=yes", box.spec]
    try:
        subprocess.run(ssh[:-1] + ["-o", "StrictHostKeyChecking=accept-new", box.spec, "true"], check=True,
                       capture_output=True)

        def bare():
            subprocess.run(ssh + ["true"], check=True, capture_output=True)

        def per_command():
            for cmd in PER_COMMAND:
                subprocess.run(ssh + [cmd], capture_output=True)

        def in_process():
            target = target_for(box.spec)
            try:
                op.preflight(target)
            finally:
                target.close()

        def cli():
            r = subprocess.run([sys.executable, "-m", "gpuops", "preflight", "--json", "--host", box.spec],
                               capture_output=True, cwd=ROOT)
            if r.returncode not in (0, 1):
                raise SystemExit(f"preflight failed: {r.stderr.decode()[-500:]}")

        cases = {"bare ssh": bare, "per-command (7 ssh)": per_command, "op (in-process)": in_process, "cli": cli}
        for fn in cases.values():
            fn()  # warm caches on both ends once
        samples = {name: [] for name in cases}
        exec_before = box.exec_requests()
        for _ in range(args.runs):
            for name, fn in cases.items():
                samples[name].append(timed(fn))
        execs = box.exec_requests() - exec_before
    finally:
        rig.stop()

    med = {name: statistics.median(v) for name, v in samples.items()}
    print(f"preflight benchmark: loopback sshd, {args.runs} interleaved runs, medians"
          f"{', fake GPU scenario ' + args.scenario if args.scenario else ', no GPU'}")
    for name, value in med.items():
        print(f"  {name:22s} {value * 1000:8.1f} ms   (min {min(samples[name]) * 1000:.1f})")
    print(f"  exec channels per run: {execs / args.runs:.0f} (bare 1 + per-command {len(PER_COMMAND)} + op 1 + cli 1)")
    for name in ("op (in-process)", "cli"):
        vs_bare = med[name] / med["bare ssh"]
        vs_cmds = med[name] / med["per-command (7 ssh)"]
        print(f"  {name:22s} {vs_bare:5.2f}x bare ssh (target <= 1.5: {'met' if vs_bare <= 1.5 else 'MISSED'}), "
              f"{vs_cmds:5.2f}x per-command (target <= 0.25: {'met' if vs_cmds <= 0.25 else 'MISSED'})")


if __name__ == "__main__":
    main()
