"""Goodput of a run that looks after itself: a CPU training run (torchrun, two gloo ranks on
loopback) with three injected faults, against the same run with no faults, in one benchmark.

    python3 benchmarks/goodput.py [--steps 600] [--step-s 0.2] [--every 20] [--stall-after 15]

Faults, at a quarter, a half and three quarters of the steps: a rank killed with SIGKILL; a rank
stopped with SIGSTOP, so its peer hangs in the next all-reduce; the whole job sent SIGTERM, as a
spot reclaim does. Printed: goodput (useful step time / wall time, target >= 0.8); per fault the
time from the fault to the next new step (target <= stall-after + 30 s for the hang, <= 30 s
otherwise) and the steps lost (target <= the checkpoint period); the baseline's wall time.

SKELETON. Until the supervisor loop of issue 26 lands, the run policy is enforced by `StandIn`
below, a loop built from the on-box pieces the supervisor will use: checkpoints.newest_complete,
retrypolicy.decide on triage's class of the attempt's log, stallevidence.capture before the stall
kill, runevents. Its stall rule is the benchmark's own (no new step for --stall-after). When
`gpuops launch --max-retries --checkpoint-dir --resume-arg --stall-after` exists, `run` becomes
that launch and a `gpuops wait`, and the same numbers measure the real thing.
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuops.onbox import cgroup, checkpoints, procs, retrypolicy, runevents, signals  # noqa: E402
from gpuops.onbox import stallevidence, telemetry  # noqa: E402
from gpuops.triage import classify_file  # noqa: E402

TRAIN = textwrap.dedent("""
    import argparse, os, time, torch, torch.distributed as dist
    p = argparse.ArgumentParser()
    p.add_argument("--ckpt"); p.add_argument("--steps", type=int); p.add_argument("--every", type=int)
    p.add_argument("--step-s", type=float); p.add_argument("--resume")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(256, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start = 0
    if a.resume:
        state = torch.load(os.path.join(a.resume, "state.pt"), weights_only=True)
        model.module.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); start = state["step"] + 1
        if rank == 0: print("resumed from %s at step %d" % (a.resume, start), flush=True)
    for step in range(start, a.steps):
        t0 = time.time()
        loss = model(torch.randn(64, 256)).pow(2).mean()
        loss.backward(); opt.step(); opt.zero_grad()
        time.sleep(max(0.0, a.step_s - (time.time() - t0)))
        if rank == 0:
            print("step %d seconds: %.3f" % (step, time.time() - t0), flush=True)
            if (step + 1) % a.every == 0:
                tmp = os.path.join(a.ckpt, ".step-%d.tmp" % step)
                os.makedirs(tmp)
                torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step},
                           os.path.join(tmp, "state.pt"))
                os.rename(tmp, os.path.join(a.ckpt, "step-%d" % step))
    dist.destroy_process_group()
""")
STEP = re.compile(r"^step (\d+) seconds: ([0-9.]+)$", re.M)
STARTUP_S = 120.0


class StandIn(object):
    """The run policy, enforced by a loop on this machine (see the module's docstring)."""

    def __init__(self, work, args, faults=()):
        self.work, self.args, self.faults = work, args, sorted(faults)
        self.ckpt = work / "ckpt"
        self.ckpt.mkdir(parents=True, exist_ok=True)
        self.events = runevents.Events(str(work), run="goodput")
        self.steps = {}          # step -> (seen at, seconds), the last time it was printed
        self.fault_log = []      # {kind, at, step_before, resumed_from, next_step_at}

    def _start(self, attempt, resume):
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                str(self.work / "train.py"), "--ckpt", str(self.ckpt), "--steps", str(self.args.steps),
                "--every", str(self.args.every), "--step-s", str(self.args.step_s)]
        argv += ["--resume", resume] if resume else []  # the path is one argv word: no shell to quote for
        log = open(self.work / ("attempt-%d.log" % attempt), "wb")
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env), log

    def _ranks(self, leader):
        return [p for p in procs.descendants(leader) if "train.py" in (procs.cmdline(p) or "")]

    def _inject(self, proc, step):
        while self.faults and step >= self.faults[0][0]:
            _, kind = self.faults.pop(0)
            ranks = self._ranks(proc.pid)
            if kind == "kill" and ranks:
                os.kill(ranks[-1], signal.SIGKILL)
            elif kind == "hang" and ranks:
                os.kill(ranks[-1], signal.SIGSTOP)
            elif kind == "sigterm":
                # A reclaim signals every process of the box, the supervisor too: it knows.
                os.killpg(proc.pid, signal.SIGTERM)
                self.outside_signal = "SIGTERM"
            self.fault_log.append({"kind": kind, "at": time.time(), "step_before": max(self.steps),
                                   "attempt": self.attempt})

    def _kill_tree(self, proc):
        """SIGKILL torchrun and every worker: they sit in sessions of their own, beyond a killpg."""
        for pid in telemetry.members(proc.pid, proc.pid):
            st = procs.stat(pid)
            if st:
                signals.send(pid, st["start_ticks"], signal.SIGKILL)
        proc.wait()

    def _attempt(self, attempt, resume):
        self.outside_signal, self.attempt = None, attempt
        proc, log = self._start(attempt, resume)
        path, offset, ended_by = log.name, 0, None
        # The stall clock starts at the attempt's first step: importing torch and the rendezvous
        # take longer than a step on a loaded machine. Before it, a start-up limit applies.
        last_new, limit = time.time(), max(STARTUP_S, self.args.stall_after)
        oom_before = cgroup.oom_kills()
        while proc.poll() is None:
            time.sleep(0.1)
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            cut = chunk.rfind(b"\n") + 1
            offset += cut
            now = time.time()
            for m in STEP.finditer(chunk[:cut].decode("utf-8", "replace")):
                last_new, limit = now, self.args.stall_after  # any step line is progress, a redone one too
                step = int(m.group(1))
                self.steps[step] = (now, float(m.group(2)))
                for f in self.fault_log:  # a new step of a later attempt: one the fault did not let finish
                    if "next_step_at" not in f and attempt > f["attempt"] and step > f["step_before"]:
                        f["next_step_at"] = now
            if self.steps:
                self._inject(proc, max(self.steps))
            if now - last_new > limit:
                evidence = stallevidence.capture(path, telemetry.members(proc.pid, proc.pid), budget_s=10)
                stallevidence.save(str(self.work), attempt, evidence)
                self.events.emit("stalled", attempt=attempt, evidence="stall-%d.json" % attempt)
                ended_by = "stall"
                self._kill_tree(proc)
        self._kill_tree(proc)  # a worker torchrun could not stop must not train on beside the next attempt
        log.close()
        code = proc.returncode
        facts = {"exit_code": code if code >= 0 else None, "signal": signal.Signals(-code).name if code < 0 else None,
                 "ended_by": ended_by, "oom_before": oom_before, "oom_after": cgroup.oom_kills(),
                 "outside_signal": self.outside_signal, "triage_class": None}
        if code != 0 and ended_by is None:
            facts["triage_class"] = classify_file(path, exit_record={"exit_code": facts["exit_code"],
                                                                     "signal": facts["signal"]})["primary"]
        return facts

    def run(self):
        (self.work / "train.py").write_text(TRAIN)
        started, attempt, streak = time.time(), 0, 0
        while True:
            attempt += 1
            verdict = checkpoints.newest_complete(str(self.ckpt), interval_s=0.5 if attempt > 1 else 0)
            resume = verdict["path"]
            if attempt > 1 and self.fault_log:
                self.fault_log[-1]["resumed_from"] = checkpoints.step_of(verdict["newest"]["name"]) if resume else -1
                self.events.emit("resumed", attempt=attempt, checkpoint=resume)
            before = max(self.steps or [-1])
            facts = self._attempt(attempt, resume)
            streak = 1 if max(self.steps or [-1]) > before else streak + 1
            d = retrypolicy.decide(facts, attempt, max_retries=5, streak=streak)
            self.events.emit("retrying" if d["retry"] else ("completed" if d["class"] is None else "gave-up"),
                             attempt=attempt, why=d["why"])
            print("  attempt %d: %s" % (attempt, d["why"]), flush=True)
            if not d["retry"]:
                return {"wall_s": time.time() - started, "attempts": attempt, "class": d["class"]}
            time.sleep(d["backoff_s"])


def report(name, result, runner, args):
    useful = sum(seconds for _, seconds in runner.steps.values())
    done = len(runner.steps) == args.steps
    print("%s: %d/%d steps, %d attempt(s), wall %.1f s, useful %.1f s, goodput %.3f%s" % (
        name, len(runner.steps), args.steps, result["attempts"], result["wall_s"], useful, useful / result["wall_s"],
        "" if done else "  (INCOMPLETE)"))
    for f in runner.fault_log:
        recover = f["next_step_at"] - f["at"] if "next_step_at" in f else None
        target = args.stall_after + 30 if f["kind"] == "hang" else 30
        lost = f["step_before"] - f.get("resumed_from", -1)
        print("  fault %-7s at step %4d: next new step after %s (target <= %g s), %d steps redone (target <= %d)" % (
            f["kind"], f["step_before"], "%.1f s" % recover if recover is not None else "never", target, lost,
            args.every))
    return useful / result["wall_s"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--step-s", type=float, default=0.2)
    ap.add_argument("--every", type=int, default=20, help="checkpoint period in steps")
    ap.add_argument("--stall-after", type=float, default=15.0)
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="goodput-")
    print("work directory (logs, events, stall evidence): %s" % tmp, flush=True)
    base = StandIn(Path(tmp) / "baseline", args)
    print("baseline (no faults):", flush=True)
    base_result = base.run()
    n = args.steps
    faulty = StandIn(Path(tmp) / "faults", args, [(n // 4, "kill"), (n // 2, "hang"), (3 * n // 4, "sigterm")])
    print("with three faults:", flush=True)
    fault_result = faulty.run()
    baseline = report("baseline", base_result, base, args)
    goodput = report("faults  ", fault_result, faulty, args)
    step_s = statistics.median(s for _, s in base.steps.values()) if base.steps else 0
    print("median step %.3f s; goodput %.3f (target >= 0.8: %s), %.2f of the baseline's" % (
        step_s, goodput, "met" if goodput >= 0.8 else "NOT met", goodput / baseline if baseline else 0))


if __name__ == "__main__":
    main()
