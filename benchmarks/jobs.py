"""How long the job verbs take on loopback, against the bare SSH they are built on.

    python3 benchmarks/jobs.py [--runs 7] [--jobs 20]

Starts its own OpenSSH sshd through the test rig and times, interleaved, the median wall time of:

  bare ssh      `ssh host true` with the OpenSSH client: the floor for any remote action
  nohup launch  `ssh host 'nohup CMD </dev/null >log 2>&1 & echo $!'`: the usual hand-made detach
                (no records, no exit code, no identity check)
  launch        gpuops.ops.jobs.launch in-process: connect, one exec, supervisor started and
                meta.json written before it returns
  status        gpuops.ops.jobs.status over --jobs N recorded jobs (liveness + progress scan each)
  follow lag    time from a line written on the box to the same line delivered by logs --follow

Targets: launch <= 2x bare ssh; status of 20 jobs <= 2x bare ssh; follow lag <= 0.5 s.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuops.ops import joblogs, jobs as op  # noqa: E402
from gpuops.remote.targets import target_for  # noqa: E402
from tests.jobs.helpers import kill_everything  # noqa: E402
from tests.rig.sshd import SshRig  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def follow_lag(spec, jobs_dir, rounds=5):
    """Seconds between a line's write on the box and its delivery through logs --follow."""
    marker = Path(jobs_dir).parent / "lag-go"
    t = target_for(spec)
    job = op.launch(t, command=f"for i in $(seq 1 {rounds}); do while [ ! -e {marker}.$i ]; do sleep 0.01; done; "
                                f"echo line $i; done", jobs_dir=jobs_dir)["data"]["job"]["job_id"]
    t.close()
    seen = {}

    def sink(data):
        for line in data.decode().splitlines():
            seen[line] = time.perf_counter()

    follower = target_for(spec)
    th = threading.Thread(target=lambda: joblogs.logs(follower, job=job, follow=True, from_offset=0,
                                                 jobs_dir=jobs_dir, sink=sink))
    th.start()
    time.sleep(0.5)
    lags = []
    for i in range(1, rounds + 1):
        written = time.perf_counter()
        Path(f"{marker}.{i}").touch()
        while f"line {i}" not in seen:
            time.sleep(0.005)
        lags.append(seen[f"line {i}"] - written)
    th.join(timeout=10)
    follower.close()
    return statistics.median(lags)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=20)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gpuops-bench-jobs-"))
    rig = SshRig(work / "rig")
    box = rig.box("bench")
    os.environ["GPUOPS_SSH_CONFIG"] = str(rig.ssh_config)
    jobs_dir = str(work / "jobs")
    ssh = ["ssh", "-F", str(rig.ssh_config), "-o", "BatchMode=yes", box.spec]
    try:
        subprocess.run(ssh[:-1] + ["-o", "StrictHostKeyChecking=accept-new", box.spec, "true"], check=True,
                       capture_output=True)
        t = target_for(box.spec)
        for i in range(args.jobs):
            op.launch(t, command=f"echo 'completed step: {i}'", jobs_dir=jobs_dir)
        t.close()

        def bare():
            subprocess.run(ssh + ["true"], check=True, capture_output=True)

        def nohup():
            subprocess.run(ssh + [f"nohup true </dev/null >{work}/nohup.log 2>&1 & echo $!"], check=True,
                           capture_output=True)

        def launch():
            target = target_for(box.spec)
            try:
                op.launch(target, command="true", jobs_dir=str(work / "launched"))
            finally:
                target.close()

        def status():
            target = target_for(box.spec)
            try:
                op.status(target, jobs_dir=jobs_dir, limit=args.jobs)
            finally:
                target.close()

        samples = {"bare ssh": [], "nohup launch": [], "launch": [], "status": []}
        fns = {"bare ssh": bare, "nohup launch": nohup, "launch": launch, "status": status}
        for _ in range(args.runs):
            for name, fn in fns.items():
                samples[name].append(timed(fn))
        med = {k: statistics.median(v) for k, v in samples.items()}
        lag = follow_lag(box.spec, str(work / "lag"))
    finally:
        for d in ("jobs", "launched", "lag"):
            kill_everything(work / d)
        rig.stop()

    base = med["bare ssh"]
    print(f"median of {args.runs} runs, loopback sshd, {args.jobs} recorded jobs")
    for name, value in med.items():
        print(f"  {name:13s} {value * 1000:7.1f} ms   {value / base:4.2f}x bare ssh")
    print(f"  {'follow lag':13s} {lag * 1000:7.1f} ms")
    ok = med["launch"] <= 2 * base and med["status"] <= 2 * base and lag <= 0.5
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
