"""Goodput of a run that looks after itself: a CPU training run (torchrun, two gloo ranks on
loopback, tests/fixtures/runs/ddp_resume.py) launched with the real `gpuops launch --host local`
under a run policy, with three injected faults, against the same run with no faults, both in one
benchmark run and at the same time (so both see the same load on the machine).

    python3 benchmarks/goodput.py [--steps 1400] [--step-s 0.3] [--every 10] [--stall-after 20]
                                  [--save benchmarks/results/goodput-cpu.md]

About 9 minutes on a 2-core machine: goodput is useful time over wall time, and what a fault
costs is fixed (its detection, the job's own restart, the steps redone), so the run must be long
enough for 0.8 to be reachable; the last line says from which length it is. A shorter --steps
still measures the recovery times and the steps lost.

The policy: --max-retries 3 --checkpoint-dir DIR --resume-arg '--resume {checkpoint}'
--stall-after 20s. Faults, in the faulty run a little past a quarter, a half and three quarters
of the steps: rank 1 killed with SIGKILL; rank 1 stopped with SIGSTOP, so rank 0 hangs in the
next all-reduce; SIGTERM to every process of the attempt and to the run's supervisor, as a spot
reclaim does.

Every number comes from the run itself, never from this script's guesses: the step times are
the ones rank 0 stamps for each step it finishes (--stamps: step, start, end and the attempt's
GPUOPS_JOB_ID), the run's end and its decisions are the events `gpuops wait --after-event 0`
returns from the job record (gpuops.onbox.run.runevents), and the checkpoint each attempt resumed
from is the step of its `resumed` event. Printed:

  goodput     the useful step time (each step counted once, the run of it that the final model
              descends from) over the wall time from `gpuops launch` to the run's `completed`
              event; target >= 0.8, and as a ratio of the fault-free run's
  recovery    per fault, the time from the fault to the first step the run had never finished
              before (the run is past the fault); target <= stall-after + 30 s for the hang,
              <= 30 s otherwise; with where it went: detected (the attempt-failed event),
              restarted (attempt-started), training again (the new attempt's first step)
  steps lost  per fault, the attempt's last finished step minus the checkpoint resumed from;
              target <= the checkpoint period (--every)
"""

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuops.onbox.host import procs  # noqa: E402

DDP = ROOT / "tests" / "fixtures" / "runs" / "ddp_resume.py"
FAULTS = ("kill", "hang", "sigterm")


def gpuops(*argv, stdout=subprocess.PIPE):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "gpuops"] + list(argv), env=env, stdout=stdout, cwd=str(ROOT))


def envelope(proc):
    out, _ = proc.communicate()
    return json.loads(out)


class Run(object):
    """One run launched through the CLI, its step stamps read as they grow, its faults injected."""

    def __init__(self, work, name, args, faults=()):
        self.work, self.name, self.args = work / name, name, args
        self.ckpt, self.stamps_path = self.work / "ckpt", self.work / "stamps"
        self.ckpt.mkdir(parents=True)
        self.jobs = self.work / "jobs"
        self.todo = list(faults)  # [(step, kind)], in step order
        self.faults, self.stamps, self.read = [], [], 0
        self.waiter = self.result = None

    def launch(self):
        a = self.args
        cmd = (f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 2 {DDP} --ckpt {self.ckpt} "
               f"--steps {a.steps} --every {a.every} --step-seconds {a.step_s} --stamps {self.stamps_path}")
        self.started = time.time()
        doc = envelope(gpuops("launch", "--host", "local", "--jobs-dir", str(self.jobs), "--name", self.name,
                              "--env", "OMP_NUM_THREADS=1", "--max-retries", "3", "--checkpoint-dir", str(self.ckpt),
                              "--resume-arg", "--resume {checkpoint}", "--stall-after", "%gs" % a.stall_after,
                              "--cmd", cmd, "--json"))
        if not doc["ok"]:
            raise SystemExit("launch failed: %s" % doc["summary"])
        self.id = doc["data"]["job"]["job_id"]
        meta = json.loads((self.jobs / self.id / "meta.json").read_text())
        self.supervisor = meta["wrapper_pid"]
        # the real `wait`: it returns on the run's end (not an attempt's) with every event since seq 0
        self.waited = open(self.work / "wait.json", "w+")  # a file: a pipe nobody reads until the end fills
        self.waiter = gpuops("wait", "--host", "local", "--jobs-dir", str(self.jobs), "-j", self.id, "--after-event",
                             "0", "--timeout", str(int(a.timeout)), "--json", stdout=self.waited)

    def poll(self):
        """Read new stamps, inject the next fault when its step is reached; False once the run ended."""
        with open(self.stamps_path, "a+") as f:
            f.seek(self.read)
            chunk = f.read()
        whole = chunk[:chunk.rfind("\n") + 1]
        self.read += len(whole.encode())
        for line in whole.splitlines():
            step, start, end, job = line.split()
            self.stamps.append({"step": int(step), "start": float(start), "end": float(end), "job": job})
        if self.todo and self.stamps and self.stamps[-1]["step"] >= self.todo[0][0]:
            self.inject(self.todo.pop(0)[1], self.stamps[-1]["job"])
        if self.waiter.poll() is None:
            return True
        self.waited.seek(0)
        self.result = json.load(self.waited)
        return False

    def inject(self, kind, job):
        ranks, everyone = {}, []
        for pid in procs.pids():
            if procs.job_tag(pid) != job:
                continue
            everyone.append(pid)
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            rank = next((int(e[11:]) for e in env if e.startswith(b"LOCAL_RANK=")), None)
            if rank is not None and "ddp_resume" in (procs.cmdline(pid) or ""):
                ranks[rank] = pid
        if kind == "kill":
            os.kill(ranks[1], signal.SIGKILL)
        elif kind == "hang":
            os.kill(ranks[1], signal.SIGSTOP)
        else:  # a reclaim signals every process of the box, the run's supervisor among them
            for pid in everyone + [self.supervisor]:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        self.faults.append({"kind": kind, "at": time.time(), "job": job})
        (self.work / "faults.json").write_text(json.dumps(self.faults))  # beside the records, to check by hand

    # ------------------------------------------------------------ the numbers

    def useful_s(self):
        last = {}
        for s in self.stamps:  # a redone step replaces the run of it that a fault threw away
            last[s["step"]] = s["end"] - s["start"]
        return sum(last.values()), len(last)

    def events(self):
        return self.result["data"].get("events") or []

    def wall_s(self):
        ended = [e["at"] for e in self.events() if e["kind"] in ("completed", "gave-up", "timed-out", "stopped")]
        return (ended[-1] if ended else time.time()) - self.started

    def fault_rows(self):
        rows = []
        for f in self.faults:
            last = max(s["step"] for s in self.stamps if s["job"] == f["job"])  # after the fault too
            after = [e for e in self.events() if e["at"] >= f["at"]]
            failed = next((e for e in after if e["kind"] == "attempt-failed" and e["job"] == f["job"]), None)
            resumed = next((e for e in after if e["kind"] == "resumed"), None)
            started = next((e for e in after if e["kind"] == "attempt-started" and e["job"] != f["job"]), None)
            later = [s for s in self.stamps if s["job"] != f["job"] and s["end"] > f["at"]]
            first = later[0] if later else None
            new = next((s for s in later if s["step"] > last), None)
            rows.append(dict(f, last=last, resumed_step=resumed.get("step") if resumed else None,
                             cls=failed.get("class") if failed else None,
                             detected=failed["at"] - f["at"] if failed else None,
                             restarted=started["at"] - f["at"] if started else None,
                             training=first["end"] - f["at"] if first else None,
                             recovered=new["end"] - f["at"] if new else None))
        return rows


def secs(v):
    return "%.1f s" % v if v is not None else "never"


def report(runs, args):
    out = []
    say = out.append
    goodput = {}
    for r in runs:
        useful, steps = r.useful_s()
        wall = r.wall_s()
        goodput[r.name] = useful / wall
        attempts = sum(1 for e in r.events() if e["kind"] == "attempt-started")
        say("%-9s %s, %d/%d steps, %d attempt(s): wall %.1f s, useful step time %.1f s, goodput %.3f" % (
            r.name, r.result["data"].get("state"), steps, args.steps, attempts, wall, useful, goodput[r.name]))
    faulty = runs[1]
    rows = faulty.fault_rows()
    ok = goodput["faults"] >= 0.8 and len(rows) == len(FAULTS) and all(
        r.result["data"].get("state") == "COMPLETED" for r in runs)
    for row in rows:
        target = args.stall_after + 30 if row["kind"] == "hang" else 30
        lost = row["last"] - row["resumed_step"] if row["resumed_step"] is not None else None
        ok = ok and row["recovered"] is not None and row["recovered"] <= target and lost is not None \
            and lost <= args.every
        say("  %-7s after step %4d (class %s): past it in %s (target <= %g s) [detected %s, restarted %s, "
            "training again %s]; %s steps lost (target <= %d)" % (
                row["kind"], row["last"], row["cls"], secs(row["recovered"]), target, secs(row["detected"]),
                secs(row["restarted"]), secs(row["training"]), lost if lost is not None else "all", args.every))
    say("goodput %.3f with three faults (target >= 0.8), %.3f without; %.2f of the fault-free run's" % (
        goodput["faults"], goodput["baseline"], goodput["faults"] / goodput["baseline"]))
    # What the faults cost is fixed per fault (detection, restart, redone steps), so goodput depends
    # on the run's length: say from which length this overhead leaves 0.8.
    overhead = faulty.wall_s() - faulty.useful_s()[0]
    say("the faulty run's overhead (wall - useful): %.1f s, of which %.1f s over the fault-free run's; "
        "at that overhead goodput is >= 0.8 from %.0f s of useful step time" % (
            overhead, overhead - (runs[0].wall_s() - runs[0].useful_s()[0]), 4 * overhead))
    say("targets met" if ok else "TARGETS MISSED")
    return out, ok


def machine():
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    return "%s, %d cores (%s), Python %s, torch %s, load average %s before the run" % (
        platform.platform(), os.cpu_count(), cpu, platform.python_version(), torch.__version__,
        " ".join("%.2f" % x for x in os.getloadavg()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1400)
    ap.add_argument("--step-s", type=float, default=0.3)
    ap.add_argument("--every", type=int, default=10, help="checkpoint period in steps")
    ap.add_argument("--stall-after", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds either run may take")
    ap.add_argument("--save", help="also write the machine and the numbers to this markdown file")
    args = ap.parse_args(argv)
    where = machine()
    work = Path(tempfile.mkdtemp(prefix="goodput-"))
    print("work directory (job records, logs, events, stall evidence): %s" % work, flush=True)
    n, e = args.steps, args.every
    at = [(n * k // 4) // e * e + e // 2 + 1 for k in (1, 2, 3)]  # mid-period: a fault costs steps
    runs = [Run(work, "baseline", args), Run(work, "faults", args, zip(at, FAULTS))]
    for r in runs:
        r.launch()
    live = list(runs)
    while live:
        time.sleep(0.1)
        live = [r for r in live if r.poll()]
    lines, ok = report(runs, args)
    print("\n".join(lines))
    if args.save:
        cmd = "python3 benchmarks/goodput.py " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.save).write_text("# goodput: a run that looks after itself (issue 26)\n\n`%s`, %s\n\n"
                                   "Machine: %s.\n\n```\n%s\n```\n" % (
                                       cmd, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), where,
                                       "\n".join(lines)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
