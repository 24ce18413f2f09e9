"""The box-loss fault of benchmarks/goodput.py: a run kept by `gpuops launch --fleet F --vault DIR`
on real sshd boxes on loopback (tests/keeper/conftest.py's Fleet: each box its own sshd, home, job
records and fake GPUs; torch on the CPU), whose box is killed outright half way: its sshd, every
connection and every process its job records name. The keeper calls the box lost after
--lost-after without an answer and relaunches the run on the other box from the vault's newest
checkpoint. Reported: the recovery (the kill to the first step the run had never finished), the
keeper's share of it (detection: from the box's last answer to `lost`; relaunch: placing, pushing
the checkpoint, launching; both from the keeper's ledger), the rest (the job's own start), the steps
lost, and the ledger's line.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from benchmarks.stepstamps import Stamps
from gpuops.keeper import ledger, record, view
from gpuops.onbox.host import procs
from tests.keeper.conftest import Fleet
from tests.rig.sshd import SshRig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DDP = os.path.join(ROOT, "tests", "fixtures", "runs", "ddp_resume.py")
LOST_AFTER_S = 6


class KeptRun(object):
    def __init__(self, work, args):
        self.work, self.args = work, args
        work.mkdir(parents=True)
        self.rig = SshRig(work / "rig")
        self.fleet = Fleet(self.rig, work)
        os.environ["GPUOPS_STATE_DIR"] = str(self.fleet.state)  # where record.read finds the keeper's record
        self.boxes = [self.fleet.box(2.0), self.fleet.box(2.0)]
        self.stamps = Stamps(work / "stamps")
        self.killed = None
        self.rec = None

    def launch(self):
        a = self.args
        cmd = (f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 1 {DDP} --ckpt ckpt "
               f"--steps {a.steps} --every {a.every} --step-seconds {a.step_s} --stamps {self.stamps.path}")
        env = dict(self.fleet.env(), PYTHONPATH=ROOT)
        self.started = time.time()
        out = subprocess.run([sys.executable, "-m", "gpuops", "launch", "--fleet", str(self.fleet.file), "--vault",
                              str(self.fleet.vault), "--gpus", "1", "--cmd", cmd, "--checkpoint-dir", "ckpt",
                              "--resume-arg=--resume {checkpoint}", "--lost-after", str(LOST_AFTER_S), "--json"],
                             env=env, capture_output=True, text=True, cwd=ROOT)
        doc = json.loads(out.stdout)
        if not doc["ok"]:
            raise SystemExit("keeper launch failed: %s" % doc["summary"])
        self.run, self.box = doc["data"]["job"]["job_id"], doc["host"]

    def poll(self):
        rows = self.stamps.poll()
        if self.killed is None and rows and rows[-1]["step"] >= self.args.steps // 2 + self.args.every // 2:
            self.fleet.kill(self.box)
            self.killed = {"at": time.time(), "job": rows[-1]["job"], "last": rows[-1]["step"]}
        self.rec = record.read(self.run)
        return self.rec["phase"] not in record.ENDED

    def report(self):
        r, k = self.rec, self.killed
        if r is None or k is None:
            return ["box loss under the keeper: the run ended before its box could be killed"]
        money = view.status(r)["data"]["kept"]["ledger"]
        seconds = {kind: t["seconds"] for kind, t in money["totals"].items()}
        later = [s for s in self.stamps.rows if s["job"] != k["job"]]
        new = next((s for s in later if s["step"] > k["last"]), None)
        recovered = new["end"] - k["at"] if new else None
        keeper = seconds["detection"] + seconds["relaunch"]
        resumed = later[0]["step"] - 1 if later else None
        lost = k["last"] - resumed if later else None
        useful = self.stamps.useful_s()[0]
        share = (" (%.0f%% of the recovery)" % (100 * keeper / recovered)) if recovered else ""
        return [
            "box loss under the keeper (gpuops launch --fleet F --vault DIR --lost-after %ds; one rank on real sshd "
            "boxes): %s, attempts on %s" % (LOST_AFTER_S, r["phase"], ", ".join(a["box"] for a in r["attempts"])),
            "    box %s killed outright after step %d: past it in %s; the keeper's share %.1f s%s: detection %.1f s "
            "(the box's last answer to lost), relaunch %.1f s (placing, pushing the vault's checkpoint, launching); "
            "the rest is the job's own start; %s steps lost (resumed from the vault's checkpoint of step %s)" % (
                self.box, k["last"], "%.1f s" % recovered if recovered else "never", keeper, share,
                seconds["detection"], seconds["relaunch"], lost if lost is not None else "all", resumed),
            "    goodput %.3f (useful step time %.1f s over the ledger's wall %.1f s); ledger: %s" % (
                useful / money["wall_s"] if money["wall_s"] else 0, useful, money["wall_s"],
                ledger.line(money)),
        ]

    def close(self):
        for name in self.boxes:
            self.fleet.kill(name)
        for pid_file in (self.fleet.state / "keeper").glob("*/keeper.pid"):
            held = json.loads(pid_file.read_text())
            if procs.alive(held["pid"], held["start_ticks"]):
                os.kill(held["pid"], signal.SIGKILL)
        self.rig.stop()
        shutil.rmtree(self.work / "rig", ignore_errors=True)

