"""The keeper's loop: ask the run's box, decide (gpuops.keeper.rules), act, record; until the run
has ended and what was asked after it (its outputs in the vault, the box stopped) is done.

Each tick asks the box once (gpuops.onbox.facts.keeper_facts over a connection of its own, closed after),
so a box that vanished costs one failed connection, and one that comes back is asked afresh. Every
action is an event in the run's record (gpuops.keeper.record); the ledger's marks are set as the
run moves (gpuops.keeper.ledger).
"""

import os
import subprocess
import time

from .. import errors, fleetfile
from ..onbox.run import checkpoints
from ..ops import pull
from ..ops import sync as S
from ..remote.targets import target_for
from ..render import inert
from . import attempt, record, rules, vault

POLL_S = 5.0
PULL_RETRY_S = 30.0
STOP_TIMEOUT_S = 600.0
PLACE_FOR_S = 900.0  # how long a relaunch looks for a fitting box before the keeper gives up
TAIL = 2000


class Keeper(object):
    def __init__(self, run_id, clock=time.monotonic, sleep=time.sleep):
        self.rec = record.read(run_id)
        if self.rec is None:
            raise errors.NotFound(f"no kept run {run_id}")
        self.spec, self.clock, self.sleep = self.rec["spec"], clock, sleep
        self.vault = vault.Vault(self.spec["vault"], run_id)
        self.last_ok, self.last_ok_wall, self.error = clock(), time.time(), None
        self.failing_since = None  # when the box first failed to answer, of the failures in a row
        # a copy gives up within half of --lost-after: a blocked copy must not hide a lost box
        self.pull_retry_s = min(PULL_RETRY_S, self.spec["lost_after_s"] / 2)

    @property
    def attempt(self) -> dict:
        return self.rec["attempts"][-1]

    def save(self) -> None:
        record.write(self.rec)

    def say(self, kind, **fields) -> None:
        record.event(self.rec, kind, **fields)
        self.save()

    def run(self) -> int:
        """Tick until the run has ended; the exit status (0: finished as asked)."""
        while self.rec["phase"] not in record.ENDED:
            try:
                self.tick()
            except Exception as e:  # the record says why this keeper stopped looking after the run
                self.say("keeper-error", why=f"{type(e).__name__}: {e}"[:TAIL])
                raise
            if self.rec["phase"] not in record.ENDED:
                self.sleep(self.spec.get("poll_s", POLL_S))
        return 0 if self.rec["phase"] == record.FINISHED else 1

    def tick(self) -> None:
        answer = self.observe()
        held = [h["name"] for h in self.vault.held()]
        facts = {"answer": answer, "error": self.error, "failing_since": self.failing_since,
                 "boot_id": self.attempt["boot_id"],
                 "held": held, "outputs_done": self.rec.get("outputs_done")}
        policy = {"lost_after_s": self.spec["lost_after_s"], "keep": self.spec["keep"],
                  "outputs": self.spec.get("outputs")}
        action = rules.decide(self.clock(), facts, policy)
        try:
            getattr(self, "do_" + action["do"])(action, answer)
        except errors.HostError as e:  # the box went away mid-action: the next tick judges it
            self.failing_since = self.failing_since or self.clock()
            self.say("action-failed", action=action["do"], why=e.message)
        except errors.GpuopsError as e:  # a fleet file being edited, a vault disk full: said, tried again
            self.say("action-failed", action=action["do"], why=e.message)

    def observe(self):
        """The box's answer (and the time it came), or None with the error."""
        att = self.attempt
        try:
            target = target_for(att["box"])
            try:
                answer = attempt.checked_run(attempt.ask(target, "run", {"run": att["job"], "jobs_dir": self.spec.get("jobs_dir"),
                                                     "interval_s": self.spec.get("look_s", checkpoints.INTERVAL_S)},
                                     timeout_s=max(10.0, min(60.0, self.spec["lost_after_s"]))))
            finally:
                target.close()
        except errors.HostError as e:
            if self.error is None:
                self.say("unreachable", box=att["box"], why=e.message)
            self.error = e.message
            self.failing_since = self.failing_since or self.clock()
            return None
        if self.error is not None:
            self.say("answering", box=att["box"], why=f"answered again after {self.clock() - self.last_ok:.0f}s")
        self.error, self.failing_since, self.last_ok, self.last_ok_wall = None, None, self.clock(), time.time()
        seen, skew = att.setdefault("seen", {}), time.time() - answer["now"]
        for c in (answer.get("checkpoints") or {}).get("complete") or []:
            # when it was written, on this machine's clock: the work after it is redone if the box is lost
            written = c.get("mtime") + skew if isinstance(c.get("mtime"), (int, float)) else time.time()
            seen.setdefault(c["name"], min(written, time.time()))
        if answer.get("phase") == "ended" and not (answer.get("final") or {}).get("class") \
                and not any(m["kind"] == "idle" for m in self.rec["marks"]):
            self.rec["marks"].append({"kind": "idle", "at": time.time(), "box": att["box"],
                                      "usd_per_hour": att.get("usd_per_hour")})
            self.rec["phase"] = record.COMPLETED
            self.say("completed", box=att["box"], job=answer.get("current"))
        return answer

    # ------------------------------------------------------------------ actions

    def do_wait(self, action, answer) -> None:
        waiting = action["why"] if answer is None else None  # what status shows while the box is silent
        if waiting != self.rec.get("waiting"):
            self.rec["waiting"] = waiting
            self.save()

    def do_evacuate(self, action, answer) -> None:
        with self._target() as target:
            for name in action["names"]:
                self._copy_checkpoint(target, answer["checkpoints"]["dir"], name)
            self._copy_logs(target, answer)
        self._prune(answer["checkpoints"].get("best"))

    def _copy_checkpoint(self, target, box_dir, name) -> None:
        where = self.vault.incoming(name)
        doc = pull.pull(target, f"{box_dir}/{name}", where, S.Options(retry_for=self.pull_retry_s))
        if not doc["ok"]:
            self.say("evacuation-failed", name=name, why=doc["summary"])
            return
        self.vault.claim(name, where)
        self.say("evacuated", name=name, box=self.attempt["box"], files=doc["data"]["files"],
                 bytes=doc["data"]["payload_bytes"])

    def _prune(self, best) -> None:
        held = [{"name": h["name"], "step": checkpoints.step_of(h["name"])} for h in self.vault.held()]
        for name in rules.prunable(held, self.spec["keep"], best):
            self.vault.drop(name)
            self.say("vault-pruned", name=name)

    def _copy_logs(self, target, answer) -> None:
        """The run's directory (its events) and the current attempt's (its log) into the vault;
        a copy that fails is an event, never the run's end."""
        n = len(self.rec["attempts"])
        for where in dict.fromkeys((answer.get("run_dir"), answer.get("attempt_dir"))):
            if not where:
                continue
            local = self.vault.path(vault.BOXES, f"{n}-{self.attempt['box']}", where.rsplit("/", 1)[-1])
            doc = pull.pull(target, where, local, S.Options(retry_for=self.pull_retry_s))
            if not doc["ok"]:
                self.say("log-copy-failed", why=doc["summary"])

    def do_outputs(self, action, answer) -> None:
        with self._target() as target:
            for rel in self.spec["outputs"]:
                src = rel if rel.startswith("/") else f"{self.attempt['workdir']}/{rel}"
                local = self.vault.path(vault.OUTPUTS, os.path.basename(rel.rstrip("/")))
                doc = pull.pull(target, src, local, S.Options(retry_for=self.pull_retry_s))
                if not doc["ok"]:
                    self.say("output-copy-failed", path=rel, why=doc["summary"])
                    return
                self.say("output-evacuated", path=rel, files=doc["data"]["files"])
        self.rec["outputs_done"] = True
        self.save()

    def do_failed(self, action, answer) -> None:
        with self._target() as target:
            self._copy_logs(target, answer)
        self.end(record.FAILED, action["why"])

    def do_finish(self, action, answer) -> None:
        with self._target() as target:
            self._copy_logs(target, answer)
        if not self.spec.get("stop_when_done"):
            self.end(record.FINISHED, action["why"])
            return
        box = self.attempt["box"]
        stop = next((b.stop for b in fleetfile.boxes(self.spec["fleet"]) if b.alias == box), "")
        if not stop:
            self.say("stop-failed", box=box, why="the fleet file gives this box no stop command")
            self.end(record.STOP_FAILED, f"{box} has no stop = \"...\" in the fleet file")
            return
        self.say("stopping", box=box, why=action["why"])
        env = dict(os.environ, GPUOPS_BOX=box, GPUOPS_RUN_ID=self.rec["run_id"], GPUOPS_VAULT=self.vault.root)
        try:
            done = subprocess.run(["bash", "-c", stop], env=env, capture_output=True, timeout=STOP_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
            code, said = done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            code, said = None, f"still running after {STOP_TIMEOUT_S:g}s; left alone"
        if code != 0:
            why = f"stop command exited {code}: {inert.text(said[-TAIL:]).strip()}"
            self.say("stop-failed", box=box, why=why)
            self.end(record.STOP_FAILED, why)
            return
        self.say("stopped", box=box, why="stop command exited 0")
        self.end(record.FINISHED, "completed, evacuated and stopped")

    def do_relaunch(self, action, answer) -> None:
        att, now = self.attempt, time.time()
        att.update(ended_at=now, ended_why=action["why"])
        self.rec["lost"][att["box"]] = action["why"]
        record.mark_lost(att["box"], action["why"], self.rec["run_id"])
        self.rec["phase"] = record.RELAUNCHING
        self.say("lost", box=att["box"], why=action["why"])
        held = [{"name": h["name"], "step": checkpoints.step_of(h["name"])} for h in self.vault.held()]
        resume = max(held, key=lambda h: (h["step"] is not None, h["step"] or 0))["name"] if held else None
        running = next(m for m in reversed(self.rec["marks"]) if m["kind"] == "running")
        running["redone_after"] = att.get("seen", {}).get(resume, running["at"])
        detect_at = min(self.last_ok_wall, now) if answer is None else now
        self.rec["marks"] += [{"kind": "detection", "at": detect_at, "box": att["box"],
                               "usd_per_hour": att.get("usd_per_hour")},
                              {"kind": "launch", "at": now, "box": None, "usd_per_hour": None}]
        self.start(resume)

    def start(self, resume) -> None:
        """The next attempt, on a fitting box this run never lost, from `resume`."""
        until, said = self.clock() + self.spec.get("place_for_s", PLACE_FOR_S), None
        tried: set = set()
        while self.clock() < until:
            box, gpus, why = attempt.place(self.spec, set(self.rec["lost"]) | tried)
            if box is not None:
                try:
                    att, _ = attempt.launch(self.spec, box, gpus, resume=resume, vault=self.vault)
                except errors.GpuopsError as e:
                    tried.add(box.alias)
                    self.say("launch-failed", box=box.alias, why=e.message)
                    continue
                self.rec["attempts"].append(att)
                self.rec["marks"][-1].update(box=box.alias, usd_per_hour=box.usd_per_hour)
                self.rec["marks"].append({"kind": "running", "at": att["launched_at"], "box": box.alias,
                                          "usd_per_hour": box.usd_per_hour})
                self.rec["phase"] = record.RUNNING
                self.last_ok, self.last_ok_wall, self.error, self.failing_since = self.clock(), time.time(), None, None
                self.say("relaunched", box=box.alias, job=att["job"], resumed_from=resume,
                         why=f"on {box.alias}" + (f" from vault checkpoint {resume}" if resume else " from the start"))
                return
            if why != said:
                self.say("no-box", why=why)
                said = why
            tried.clear()
            self.sleep(self.spec.get("poll_s", POLL_S))
        self.end(record.GAVE_UP, f"no fitting box for {self.spec.get('place_for_s', PLACE_FOR_S):g}s: {said}")

    def end(self, phase, why) -> None:
        self.rec.update(phase=phase, ended_at=time.time(), why=why)
        self.say("ended", phase=phase, why=why)

    def _target(self):
        return _Closing(target_for(self.attempt["box"]))


class _Closing(object):
    def __init__(self, target):
        self.target = target

    def __enter__(self):
        return self.target

    def __exit__(self, *exc):
        self.target.close()
