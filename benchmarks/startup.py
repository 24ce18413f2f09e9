"""How long the light verbs take to start, against the interpreter's own start in the same run.

    python3 benchmarks/startup.py [--runs 15]

Times, interleaved so drift hits all alike, the wall time and the CPU time (user + system, which
a busy machine disturbs less) of:

  python3 -c pass                 the floor: the interpreter, in a venv that finds gpuops as an
                                  installed copy does (benchmarks/installed.py)
  gpuops --help                   the overview help
  gpuops gotcha U7                a gotcha looked up and printed
  gpuops profiles                 the platform profiles listed
  gpuops triage --log TINY --json a small log triaged (triage start-up)

each as `python3 -m gpuops ...`, twice: with compiled bytecode cached (as an installed gpuops runs;
the cache goes to a temporary PYTHONPYCACHEPREFIX) and with none (PYTHONDONTWRITEBYTECODE=1: every
module compiled from source on every call, as in a checkout that may not write __pycache__).
Medians. Target (issue 14): --help, gotcha U7 and triage start-up <= 0.15 s.
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

TINY_LOG = ROOT / "tests" / "fixtures" / "triage" / "bash_killed.log"
TARGET_S = 0.15
CASES = {
    "python3 -c pass": ["-c", "pass"],
    "gpuops --help": ["-m", "gpuops", "--help"],
    "gpuops gotcha U7": ["-m", "gpuops", "gotcha", "U7"],
    "gpuops profiles": ["-m", "gpuops", "profiles"],
    "gpuops triage (start-up)": ["-m", "gpuops", "triage", "--log", str(TINY_LOG), "--json"],
}
TARGETED = ("gpuops --help", "gpuops gotcha U7", "gpuops triage (start-up)")


def once(python, argv, env):
    started = time.perf_counter()
    proc = subprocess.Popen([python] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(python, env, runs):
    for argv in CASES.values():
        once(python, argv, env)  # fills the bytecode cache, when there is one
    samples = {name: ([], []) for name in CASES}
    for _ in range(runs):
        for name, argv in CASES.items():
            wall, cpu = once(python, argv, env)
            samples[name][0].append(wall)
            samples[name][1].append(cpu)
    return {name: (statistics.median(w), statistics.median(c)) for name, (w, c) in samples.items()}


def report(title, med):
    floor_wall, floor_cpu = med["python3 -c pass"]
    print(f"  {title}")
    for name, (wall, cpu) in med.items():
        mark = ""
        if name in TARGETED:
            mark = f"   (target <= {TARGET_S:.2f} s: {'met' if wall <= TARGET_S else 'MISSED'})"
        print(f"    {name:26s} {wall:6.3f} s wall ({wall - floor_wall:+.3f} over the floor)  "
              f"{cpu:6.3f} s CPU ({cpu - floor_cpu:+.3f}){mark}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    cache = tempfile.mkdtemp(prefix="gpuops-pyc-")
    try:
        python = installed_python(cache)
        cached = measure(python, as_installed(base, cache), args.runs)
        source = measure(python, {**base, "PYTHONDONTWRITEBYTECODE": "1"}, args.runs)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print(f"start-up benchmark: {args.runs} interleaved runs, medians, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    report("bytecode cached (an installed gpuops)", cached)
    report("no bytecode (every module compiled on every call)", source)


if __name__ == "__main__":
    main()
