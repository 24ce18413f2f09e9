"""Goodput of a run that looks after itself, beside what a user would otherwise run, on the same
faults at the same time: a CPU training run (two gloo ranks on loopback,
tests/fixtures/runs/ddp_resume.py) under

  gpuops      the real `gpuops launch --host local` with a run policy: --max-retries 3
              --checkpoint-dir DIR --resume-arg '--resume {checkpoint}' --stall-after 20s
  torchrun    `torchrun --max-restarts 3` alone (the script resumes from its newest complete
              checkpoint itself, as torchrun's documentation asks of a script it restarts)
  none        `torchrun` with no restarts: no recovery at all

each with the same three faults, a little past a quarter, a half and three quarters of the steps:
rank 1 killed with SIGKILL; rank 1 stopped with SIGSTOP, so rank 0 hangs in the next all-reduce;
SIGTERM to every process of the attempt and to the run's supervisor (gpuops' supervisor, or
torchrun's agent), as a spot reclaim does. Beside them the gpuops run with no faults (the
baseline), and a run kept by `gpuops launch --fleet F --vault DIR` on real sshd boxes whose box
is killed outright half way (benchmarks/goodput_keeper.py). All at once, so all see the same load.

    python3 benchmarks/goodput.py [--steps 300] [--step-s 0.3] [--every 10] [--stall-after 20]
                                  [--save benchmarks/results/goodput-cpu.md]

About 5 minutes on a quiet 2-core machine (torch starting under load takes longer). Every number comes from the runs themselves: the step times
rank 0 stamps for each step it finishes (--stamps: step, start, end and the attempt: gpuops'
GPUOPS_JOB_ID or torchrun's restart count), gpuops' decisions from the events `gpuops wait
--after-event 0` returns, the checkpoint each attempt resumed from from the steps it redid.

  goodput     the useful step time (each step counted once, the run of it that the final model
              descends from) over a window of wall time: for the runs under faults, the same
              window for all, from the launch to the end of the slowest run that completed (a run
              that died or hung is charged the rest of it: nobody was there to restart it); for
              the baseline, its own run
  recovery    per fault, from the fault to the first step the run had never finished before;
              "never" when the run did not get past it (torchrun's agent sees no hang: a run with
              no step and no new worker for --hung-after seconds is ended by this script and counted
              as hung), and
              gpuops' share where its events say: detected (attempt-failed), restarted
              (attempt-started), training again (the new attempt's first step)
  steps lost  per fault, the attempt's last finished step minus the checkpoint resumed from

Whatever a fault costs is fixed (detection, the job's own restart, the steps redone), so goodput
depends on the run's length; the last line says from which length gpuops' overhead leaves 0.8.
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

from benchmarks import goodput_keeper  # noqa: E402
from benchmarks.stepstamps import Stamps  # noqa: E402
from gpuops.onbox.host import procs  # noqa: E402

DDP = ROOT / "tests" / "fixtures" / "runs" / "ddp_resume.py"
FAULTS = ("kill", "hang", "sigterm")


def gpuops(*argv, stdout=subprocess.PIPE):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "gpuops"] + list(argv), env=env, stdout=stdout, cwd=str(ROOT))


def envelope(proc):
    out, _ = proc.communicate()
    return json.loads(out)


def ddp_command(a, ckpt, stamps, restarts=None):
    """torchrun over two ranks of the fixture; `restarts`: torchrun's own --max-restarts (the
    script then resumes by itself), None for gpuops' run policy (which passes --resume)."""
    own = "" if restarts is None else f"--max-restarts {restarts} "
    resume = "" if restarts is None else " --resume-latest"
    return (f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 2 {own}{DDP} --ckpt {ckpt} "
            f"--steps {a.steps} --every {a.every} --step-seconds {a.step_s} --stamps {stamps}{resume}")


class Run(object):
    """One run under gpuops' policy, launched through the CLI, its faults injected."""

    policy = "gpuops"

    def __init__(self, work, name, args, faults=()):
        self.work, self.name, self.args = work / name, name, args
        self.ckpt = self.work / "ckpt"
        self.ckpt.mkdir(parents=True)
        self.stamps = Stamps(self.work / "stamps")
        self.jobs = self.work / "jobs"
        self.todo = list(faults)  # [(step, kind)], in step order
        self.faults = []
        self.waiter = self.result = self.ended = None
        self.state = "still running at --timeout"

    def launch(self):
        a = self.args
        self.started = time.time()
        doc = envelope(gpuops("launch", "--host", "local", "--jobs-dir", str(self.jobs), "--name", self.name,
                              "--env", "OMP_NUM_THREADS=1", "--max-retries", "3", "--checkpoint-dir", str(self.ckpt),
                              "--resume-arg", "--resume {checkpoint}", "--stall-after", "%gs" % a.stall_after,
                              "--cmd", ddp_command(a, self.ckpt, self.stamps.path), "--json"))
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
        rows = self.stamps.poll()
        if self.todo and rows and rows[-1]["step"] >= self.todo[0][0]:
            self.inject(self.todo.pop(0)[1], rows[-1]["job"])
        return self.running()

    def running(self):
        if self.waiter.poll() is None:
            return True
        self.waited.seek(0)
        self.result = json.load(self.waited)
        self.ended = self.end_event_at()
        self.state = "completed" if self.result["data"].get("state") == "COMPLETED" else \
            str(self.result["data"].get("state")).lower()
        return False

    def attempt_pids(self, job):
        """(rank pids by LOCAL_RANK, every pid of the attempt), the supervisor apart."""
        ranks, everyone = {}, []
        for pid in procs.pids():
            if procs.job_tag(pid) != job:
                continue
            everyone.append(pid)
            rank = _local_rank(pid)
            if rank is not None and "ddp_resume" in (procs.cmdline(pid) or ""):
                ranks[rank] = pid
        return ranks, everyone

    def inject(self, kind, job):
        ranks, everyone = self.attempt_pids(job)
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

    def events(self):
        return self.result["data"].get("events") or []

    def end_event_at(self):
        ended = [e["at"] for e in self.events() if e["kind"] in ("completed", "gave-up", "timed-out", "stopped")]
        return ended[-1] if ended else time.time()

    def fault_rows(self):
        rows = []
        for f in self.faults:
            later = [s for s in self.stamps.rows if s["job"] != f["job"] and s["end"] > f["at"]]
            row = _past(self.stamps.rows, f, later)
            after = [e for e in self.events() if e["at"] >= f["at"]]
            failed = next((e for e in after if e["kind"] == "attempt-failed" and e["job"] == f["job"]), None)
            started = next((e for e in after if e["kind"] == "attempt-started" and e["job"] != f["job"]), None)
            row.update(cls=failed.get("class") if failed else None,
                       detected=failed["at"] - f["at"] if failed else None,
                       restarted=started["at"] - f["at"] if started else None)
            rows.append(row)
        return rows


class Torchrun(Run):
    """The same run under torchrun alone: --max-restarts 3, or 0 (no recovery). torchrun's agent
    is the supervisor; a run that makes no step for --hung-after seconds is ended here (the agent
    and every process under it), since nothing of its own would."""

    def __init__(self, work, name, args, faults=(), restarts=3):
        super().__init__(work, name, args, faults)
        self.restarts = restarts
        self.policy = "torchrun --max-restarts %d" % restarts if restarts else "none (torchrun, no restarts)"

    def launch(self):
        self.started = time.time()
        self.log = open(self.work / "log", "w")
        self.proc = subprocess.Popen(ddp_command(self.args, self.ckpt, self.stamps.path, self.restarts).split(),
                                     env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.supervisor = self.proc.pid
        self.workers, self.active = set(), self.started

    def running(self):
        last = max(self.stamps.rows[-1]["end"] if self.stamps.rows else 0, self.active)
        if self.proc.poll() is None:
            if time.time() - last < self.args.hung_after:
                return True
            workers = set(procs.descendants(self.proc.pid))
            if workers - self.workers:  # a restart's workers, still starting: not a hang
                self.workers |= workers
                self.active = time.time()
                return True
            _end_group(self.proc)
            self.state, self.ended = "hung (no step and no new worker for %gs: ended here)" % self.args.hung_after, last
            return False
        done = self.stamps.rows and max(s["step"] for s in self.stamps.rows) == self.args.steps
        self.state = "completed" if self.proc.returncode == 0 and done else "died (exit %s)" % self.proc.returncode
        self.ended = time.time() if done else last
        return False

    def attempt_pids(self, job):
        """torchrun starts each worker in a session of its own: the attempt is the agent's descendants."""
        ranks, everyone = {}, procs.descendants(self.proc.pid)
        for pid in everyone:
            rank = _local_rank(pid)
            if rank is not None and "ddp_resume" in (procs.cmdline(pid) or ""):
                ranks[rank] = pid
        return ranks, everyone

    def events(self):
        return []

    def fault_rows(self):
        rows = []
        for f in self.faults:
            later = [s for s in self.stamps.rows if s["job"] != f["job"] and s["end"] > f["at"]]
            rows.append(dict(_past(self.stamps.rows, f, later), cls=None, detected=None, restarted=None))
        return rows


def _past(stamps, fault, later):
    """A fault's row from the stamps: the attempt's last step, where the next resumed, and when
    the run trained again and got past it."""
    last = max(s["step"] for s in stamps if s["job"] == fault["job"])
    first = later[0] if later else None
    new = next((s for s in later if s["step"] > last), None)
    return dict(fault, last=last, resumed_step=first["step"] - 1 if first else None,
                training=first["end"] - fault["at"] if first else None,
                recovered=new["end"] - fault["at"] if new else None)


def _local_rank(pid):
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return next((int(e[11:]) for e in env if e.startswith(b"LOCAL_RANK=")), None)


def _end_group(proc):
    """This script's own torchrun agent and every process under it (its workers have sessions of
    their own), started here."""
    for pid in [proc.pid] + procs.descendants(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def secs(v):
    return "%.1f s" % v if v is not None else "never"


def report(baseline, faulty, keeper, args):
    out = []
    say = out.append
    now = time.time()
    for r in [baseline] + faulty:
        r.ended = r.ended or now
    completed = [r.ended for r in faulty if r.state == "completed"]
    window = (max(completed) if completed else now) - faulty[0].started
    useful, steps = baseline.stamps.useful_s()
    base = useful / (baseline.ended - baseline.started)
    say("baseline  gpuops, no faults: %s, %d/%d steps, wall %.1f s, useful %.1f s, goodput %.3f" % (
        baseline.state, steps, args.steps, baseline.ended - baseline.started, useful, base))
    say("under the same three faults (kill, hang, sigterm); goodput over the same %.1f s window:" % window)
    goodput = {}
    for r in faulty:
        useful, steps = r.stamps.useful_s(until=r.started + window)
        goodput[r.name] = useful / window
        say("%-31s %s, %d/%d steps, useful %.1f s, goodput %.3f (%.2f of the baseline's)" % (
            r.policy, r.state, steps, args.steps, useful, goodput[r.name], goodput[r.name] / base))
        for row in r.fault_rows():
            lost = row["last"] - row["resumed_step"] if row["resumed_step"] is not None else None
            ours = "" if r.policy != "gpuops" else " [detected %s, restarted %s]" % (
                secs(row["detected"]), secs(row["restarted"]))
            say("    %-7s after step %4d%s: past it in %s%s, training again %s; %s steps lost" % (
                row["kind"], row["last"], " (class %s)" % row["cls"] if row["cls"] else "", secs(row["recovered"]),
                ours, secs(row["training"]), lost if lost is not None else "all"))
        for _, kind in r.todo:
            say("    %-7s not reached: the run had ended" % kind)
    ours, torchrun, none = (goodput[r.name] for r in faulty)
    say("gpuops' policy %.3f against torchrun --max-restarts 3 alone %.3f (%+.3f, %.2fx) and no recovery %.3f "
        "(%.2fx)" % (ours, torchrun, ours - torchrun, ours / torchrun if torchrun else float("inf"), none,
                     ours / none if none else float("inf")))
    gp = faulty[0]
    overhead = (gp.ended - gp.started) - gp.stamps.useful_s()[0]
    say("gpuops' faulty run: overhead (wall - useful) %.1f s; at that overhead goodput is >= 0.8 from %.0f s of "
        "useful step time" % (overhead, 4 * overhead))
    out += keeper
    return out, gp.state == "completed" and ours > torchrun


def machine():
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    return "%s, %d cores (%s), Python %s, torch %s, load average %s before the run" % (
        platform.platform(), os.cpu_count(), cpu, platform.python_version(), torch.__version__,
        " ".join("%.2f" % x for x in os.getloadavg()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--step-s", type=float, default=0.3)
    ap.add_argument("--every", type=int, default=10, help="checkpoint period in steps")
    ap.add_argument("--stall-after", type=float, default=20.0)
    ap.add_argument("--hung-after", type=float, default=90.0, help="torchrun alone: no step this long is a hang")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds any run may take")
    ap.add_argument("--no-keeper", action="store_true", help="leave out the box-loss run under the keeper")
    ap.add_argument("--save", help="also write the machine and the numbers to this markdown file")
    args = ap.parse_args(argv)
    where = machine()
    work = Path(tempfile.mkdtemp(prefix="goodput-"))
    print("work directory (job records, logs, events, stall evidence): %s" % work, flush=True)
    n, e = args.steps, args.every
    at = list(zip([(n * k // 4) // e * e + e // 2 + 1 for k in (1, 2, 3)], FAULTS))  # mid-period: a fault costs steps
    baseline = Run(work, "baseline", args)
    faulty = [Run(work, "faults", args, at), Torchrun(work, "torchrun", args, at, restarts=3),
              Torchrun(work, "none", args, at, restarts=0)]
    kept = None if args.no_keeper else goodput_keeper.KeptRun(work / "keeper", args)
    try:
        if kept:
            kept.launch()
        for r in [baseline] + faulty:
            r.launch()
        live = [baseline] + faulty + ([kept] if kept else [])
        deadline = time.time() + args.timeout
        while live and time.time() < deadline:
            time.sleep(0.1)
            live = [r for r in live if r.poll()]
        lines, ok = report(baseline, faulty, kept.report() if kept else [], args)
    finally:
        for r in faulty[1:]:
            if getattr(r, "proc", None) is not None and r.proc.poll() is None:
                _end_group(r.proc)
        if kept:
            kept.close()
    print("\n".join(lines))
    if args.save:
        cmd = "python3 benchmarks/goodput.py " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.save).write_text("# goodput: gpuops' run policy beside torchrun alone and no recovery (issue 40)\n\n"
                                   "`%s`, %s\n\nMachine: %s; load average %s after.\n\n```\n%s\n```\n" % (
                                       cmd, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), where,
                                       " ".join("%.2f" % x for x in os.getloadavg()), "\n".join(lines)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
