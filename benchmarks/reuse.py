"""What a loop of gpuops calls costs with the SSH master kept between calls, and without. On loopback.

    python3 benchmarks/reuse.py [--calls 10] [--rounds 3]

Starts its own OpenSSH sshd through the test rig (tests/rig/sshd.py; the box runs the login
shell's rc file, as a real box does) and times, per call, medians over the rounds:

  bare ssh         `ssh host true`: the handshake floor every call without reuse pays
  kept ssh         `ssh host true` over an ssh master kept for the purpose: no handshake, but the
                   login rc and the channel, which every exec channel pays (what is left of a call
                   once the handshake is gone; on a box whose rc runs pyenv or conda init, most of it)
  status  off/on   `gpuops status --host H --json` run --calls times in a row, GPUOPS_SSH_PERSIST=0 / 60
  preflight off/on `gpuops preflight --host H --json` likewise
  first call       `status` with reuse on and no master yet (each one after closing the last)

The box has a fake GPU (tests/fixtures/fakegpu, scenario healthy) whose nvidia-smi costs at least
--smi-cost seconds a call, as a real one does, so preflight's GPU queries are not free.
Targets (issue 14): a repeated call with reuse on <= 0.5x bare ssh; a first call <= 1.5x.
The whole CLI is timed, interpreter start-up included (bytecode compiled once, and a venv that
finds gpuops as an installed copy does: benchmarks/installed.py): what an agent pays per tool
call. "status on, no helper" is status with reuse on and GPUOPS_RESIDENT=0: every call an exec
channel on the kept master, as before the box's resident helper.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.installed import as_installed, installed_python  # noqa: E402
from gpuops.remote import mux  # noqa: E402
from tests.fixtures.fakegpu.boxes import compose  # noqa: E402
from tests.fixtures.fakegpu.fake_nvidia_smi import COST_ENV  # noqa: E402
from tests.rig.sshd import SshRig  # noqa: E402


def timed(argv, env):
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.decode()[-500:]}")
    return elapsed


def close_all(env):
    for path in mux.sockets(mux.shared_dir(env)):
        mux.close(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smi-cost", type=float, default=0.1, help="seconds each fake nvidia-smi call takes at least")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gpuops-bench-"))
    runtime = tempfile.mkdtemp(prefix="gb-")  # short: a socket path must fit in 107 bytes
    rig = SshRig(work / "rig")
    box = rig.box("bench", env={**compose(work, "v2-healthy", "healthy")[1], COST_ENV: str(args.smi_cost)})
    base = as_installed({**os.environ, "GPUOPS_SSH_CONFIG": str(rig.ssh_config), "GPUOPS_TRANSPORT": "openssh",
                         "XDG_RUNTIME_DIR": runtime}, work / "pyc")
    off, on = {**base, "GPUOPS_SSH_PERSIST": "0"}, {**base, "GPUOPS_SSH_PERSIST": "60"}
    exec_only = {**on, "GPUOPS_RESIDENT": "0"}
    ssh = ["ssh", "-F", str(rig.ssh_config), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
           box.spec, "true"]
    kept = ssh[:-2] + ["-o", "ControlMaster=auto", "-o", f"ControlPath={runtime}/bench-%C", "-o",
                       "ControlPersist=300", box.spec, "true"]
    gpuops = [installed_python(work), "-m", "gpuops"]
    verbs = {"status": ["status", "--host", box.spec, "--json"],
             "preflight": ["preflight", "--host", box.spec, "--json"]}
    samples = {name: [] for name in ("bare ssh", "kept ssh", "first call", "status off", "status on",
                                     "status on, no helper", "preflight off", "preflight on")}
    try:
        subprocess.run(ssh, check=True, capture_output=True)
        subprocess.run(kept, check=True, capture_output=True)
        for _ in range(args.rounds):
            for _ in range(args.calls):
                samples["bare ssh"].append(timed(ssh, base))
                samples["kept ssh"].append(timed(kept, base))
            for _ in range(args.calls):
                close_all(on)
                time.sleep(0.3)  # the closed master's sshd session ends before the clock starts
                samples["first call"].append(timed(gpuops + verbs["status"], on))
            for verb, argv in verbs.items():
                for _ in range(args.calls):
                    samples[f"{verb} off"].append(timed(gpuops + argv, off))
                close_all(on)
                timed(gpuops + verbs["status"], on)
                for _ in range(args.calls):
                    samples[f"{verb} on"].append(timed(gpuops + argv, on))
                if verb == "status":
                    for _ in range(args.calls):
                        samples["status on, no helper"].append(timed(gpuops + argv, exec_only))
        logins = sum(1 for line in box.log.read_text(errors="replace").splitlines() if "Accepted publickey" in line)
    finally:
        close_all(on)
        subprocess.run(kept[:-2] + ["-O", "exit", box.spec], capture_output=True)
        rig.stop()
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)

    med = {name: statistics.median(v) for name, v in samples.items()}
    floor = med["bare ssh"]
    print(f"reuse benchmark: loopback sshd, {args.rounds} rounds of {args.calls} calls, medians per call; "
          f"fake nvidia-smi >= {args.smi_cost:g} s a call")
    for name, value in med.items():
        print(f"  {name:20s} {value * 1000:8.1f} ms   {value / floor:5.2f}x bare ssh   "
              f"{value / med['kept ssh']:5.2f}x kept ssh")
    for verb in verbs:
        ratio = med[f"{verb} on"] / floor
        print(f"  {verb} repeated with reuse: {ratio:.2f}x bare ssh (target <= 0.5: {'met' if ratio <= 0.5 else 'MISSED'})")
    gap = med["preflight on"] - med["status on"]
    print(f"  preflight on - status on: {gap * 1000:.1f} ms = {gap / floor:.2f}x bare ssh, the probe's wait for its "
          f"side-by-side nvidia-smi queries (>= {args.smi_cost:g} s each): preflight's floor is status's plus that")
    ratio = med["first call"] / floor
    print(f"  first call: {ratio:.2f}x bare ssh (target <= 1.5: {'met' if ratio <= 1.5 else 'MISSED'})")
    print(f"  sshd logins in all: {logins}")


if __name__ == "__main__":
    main()
