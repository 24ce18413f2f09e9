"""The keeper's loop: ask the run's box, decide (gpuops.keeper.rules), act, record; until the run
has ended and what was asked after it (its outputs in the vault, the box stopped) is done.

Each tick asks the box once (gpuops.onbox.facts.keeper_facts over a connection of its own, closed after),
so a box that vanished costs one failed connection, and one that comes back is asked afresh. Every
action is an event in the run's record (gpuops.keeper.record); the ledger's marks are set as the
run moves (gpuops.keeper.ledger).
"""

import math
import os
import posixpath
import time

from .. import errors, fleetstate
from ..onbox.run import checkpoints
from ..ops import pull
from ..ops import sync as S
from ..remote.targets import target_for
from . import attempt, gangattempt, ledger, record, remotevault, rules, stopping, vault

POLL_S = 5.0
PULL_RETRY_S = 30.0
PLACE_FOR_S = 900.0  # how long a relaunch looks for a fitting box before the keeper gives up
LOGS_EVERY_S = 60.0  # between checkpoints, every node's log is copied at least this often
TAIL = 2000


class Keeper(object):
    def __init__(self, run_id, clock=time.monotonic, sleep=time.sleep) -> None:
        self.rec = record.read(run_id)
        if self.rec is None:
            raise errors.NotFound(f"no kept run {run_id}")
        self.spec, self.clock, self.sleep = self.rec["spec"], clock, sleep
        self.vault = remotevault.vault_of(self.spec, run_id)
        self.watch: dict = {}  # box -> how it answered lately (see _watch)
        self.seen: list = []  # this tick's look at each node of the attempt, head first (see tick)
        self.vault_error: str | None = None  # why the vault (a remote one) did not answer the last look
        # a copy gives up within half of --lost-after: a blocked copy must not hide a lost box
        self.pull_retry_s = min(PULL_RETRY_S, self.spec["lost_after_s"] / 2)

    @property
    def attempt(self) -> dict:
        return self.rec["attempts"][-1]

    def nodes(self) -> list:
        """[{box, job, boot_id}] of the current attempt: a gang's nodes, head first, or its one box."""
        att = self.attempt
        return att.get("nodes") or [{"box": att["box"], "job": att["job"], "boot_id": att["boot_id"]}]

    def _watch(self, box) -> dict:
        """{error, failing_since (when the box first failed to answer, of the failures in a row),
        last_ok (monotonic), last_ok_wall} of `box`, from when the keeper began to look at it."""
        return self.watch.setdefault(box, {"error": None, "failing_since": None, "last_ok": self.clock(),
                                           "last_ok_wall": time.time()})

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
        if record.stop_asked(self.rec["run_id"]):
            return self.do_stop()
        seen = []
        for i, node in enumerate(self.nodes()):
            answer = self.observe(node, head=i == 0)
            w = self._watch(node["box"])
            seen.append({"box": node["box"], "answer": answer, "error": w["error"], "failing_since": w["failing_since"],
                         "boot_id": node["boot_id"]})
        self.seen = seen
        try:
            held = [h["name"] for h in self.vault.held()]
        except errors.GpuopsError as e:  # a vault host out of reach: said once, nothing decided until it answers
            if e.message != self.vault_error:
                self.say("vault-unreachable", why=e.message)
            self.vault_error = e.message
            return
        self.vault_error = None
        facts = {"held": held, "outputs_done": self.rec.get("outputs_done")}
        policy = {"lost_after_s": self.spec["lost_after_s"], "keep": self.spec["keep"],
                  "outputs": self.spec.get("outputs")}
        spent = ledger.ledger(self.rec["marks"], time.time())["usd"]
        action = rules.over_budget(spent, self.spec.get("budget_usd"))
        if action is None and self.attempt.get("nodes"):
            action = rules.decide_gang(self.clock(), seen, facts, policy)
        elif action is None:
            action = rules.decide(self.clock(), dict(seen[0], **facts), policy)
        try:
            getattr(self, "do_" + action["do"])(action, seen[0]["answer"])
        except errors.HostError as e:  # the box went away mid-action: the next tick judges it
            w = self._watch(self.attempt["box"])
            w["failing_since"] = w["failing_since"] or self.clock()
            self.say("action-failed", action=action["do"], why=e.message)
        except errors.GpuopsError as e:  # a fleet file being edited, a vault disk full: said, tried again
            self.say("action-failed", action=action["do"], why=e.message)

    def observe(self, node, head=True):
        """The box's answer on `node`'s run, or None (its _watch says why); the head's answer sets
        when each checkpoint was written and when the run completed."""
        att, w = self.attempt, self._watch(node["box"])
        try:
            target = target_for(node["box"])
            try:
                answer = attempt.checked_run(attempt.ask(target, "run", {"run": node["job"], "jobs_dir": self.spec.get("jobs_dir"),
                                                     "interval_s": self.spec.get("look_s", checkpoints.INTERVAL_S)},
                                     timeout_s=max(10.0, min(60.0, self.spec["lost_after_s"]))))
            finally:
                target.close()
        except errors.GpuopsError as e:  # any failed call (an SSH master dropped mid-call: exit 255, no output)
            # is a failed look, judged by --lost-after like silence; the keeper itself never dies of it
            if w["error"] is None:
                self.say("unreachable", box=node["box"], why=e.message)
            w["error"] = e.message
            w["failing_since"] = w["failing_since"] or self.clock()
            return None
        if w["error"] is not None:
            self.say("answering", box=node["box"], why=f"answered again after {self.clock() - w['last_ok']:.0f}s")
        w.update(error=None, failing_since=None, last_ok=self.clock(), last_ok_wall=time.time())
        if not head:
            return answer
        seen, skew = att.setdefault("seen", {}), time.time() - answer["now"]
        for c in (answer.get("checkpoints") or {}).get("complete") or []:
            # when it was written, on this machine's clock: the work after it is redone if the box is lost
            written = c.get("mtime") + skew if isinstance(c.get("mtime"), (int, float)) else time.time()
            seen.setdefault(c["name"], min(written, time.time()))
        if answer.get("phase") == "ended" and not (answer.get("final") or {}).get("class") \
                and not any(m["kind"] == "idle" for m in self.rec["marks"]):
            # idle from the run's end on the box (on this machine's clock), not from when this look saw it
            ended = answer.get("ended_at")
            ended = ended + skew if type(ended) in (int, float) and math.isfinite(ended) else time.time()
            began = max(m["at"] for m in self.rec["marks"])
            self.rec["marks"].append({"kind": "idle", "at": min(max(ended, began), time.time()),
                                      "box": ",".join(n["box"] for n in self.nodes()),
                                      "usd_per_hour": att.get("usd_per_hour")})
            self.rec["phase"] = record.COMPLETED
            self.say("completed", box=att["box"], job=answer.get("current"))
        return answer

    # ------------------------------------------------------------------ actions

    def do_wait(self, action, answer) -> None:
        every = self.spec.get("logs_every_s", LOGS_EVERY_S)  # between checkpoints, the logs go on being copied
        if answer is not None and time.time() - self.rec.get("logs_at", 0) >= every:
            with self._target() as target:
                self._copy_logs(target, answer)
            self.save()
        waiting = action["why"] if answer is None else None  # what status shows while the box is silent
        if waiting != self.rec.get("waiting"):
            self.rec["waiting"] = waiting
            self.save()

    def do_evacuate(self, action, answer) -> None:
        with self._target() as target:
            kinds = {c["name"]: c.get("kind") for c in answer["checkpoints"]["complete"]}
            for name in action["names"]:
                self._copy_checkpoint(target, answer["checkpoints"]["dir"], name, kinds.get(name))
            self._copy_logs(target, answer)
        self._prune(answer["checkpoints"].get("best"))

    def _copy_checkpoint(self, target, box_dir, name: str, kind) -> None:
        """Checkpoint `name` (a directory, or one file: `kind` as the box judged it) pulled, verified,
        into the vault's incoming place, then claimed; a file is pulled as the one entry of `box_dir`
        that the rules carry (a pull's source is a directory)."""
        one = kind == vault.FILE
        where = self.vault.incoming(name)
        claimed = False
        try:
            doc = pull.pull(target, box_dir if one else f"{box_dir}/{name}", where,
                            S.Options(excludes=vault.only(name) if one else (), retry_for=self.pull_retry_s))
            if not doc["ok"]:
                self.say("evacuation-failed", name=name, why=doc["summary"])
                return
            self.vault.claim(name, where, vault.FILE if one else "dir")
            claimed = True
        finally:
            if not claimed:  # a staged copy can be gigabytes, and a name past the newest K is not copied again
                self.vault.clear(name)
        self.say("evacuated", name=name, box=self.attempt["box"], files=doc["data"]["files"],
                 bytes=doc["data"]["payload_bytes"])

    def _prune(self, best) -> None:
        held = [{"name": h["name"], "step": checkpoints.step_of(h["name"])} for h in self.vault.held()]
        for name in rules.prunable(held, self.spec["keep"], best):
            self.vault.drop(name)
            self.say("vault-pruned", name=name)

    def _copy_logs(self, target, answer) -> None:
        """Every node's run directory (its events) and current attempt's (its log) into the vault, at
        boxes/N-BOX/ (attempt N of the run, the node's box: a place of its own, never overwritten by
        another node or attempt): the head's over `target`, each other node's that answered this tick
        over a connection of its own. A copy that fails is an event, never the run's end; a node that
        did not answer keeps what was copied before (a lost box's log up to its last copy)."""
        self._copy_node_logs(target, self.attempt["box"], answer)
        for node in self.seen[1:]:
            if node["answer"] is None:
                continue
            try:
                with _Closing(target_for(node["box"])) as other:
                    self._copy_node_logs(other, node["box"], node["answer"])
            except errors.GpuopsError as e:  # that node's box went away: judged by the next tick, not here
                self.say("log-copy-failed", box=node["box"], why=e.message)
        self.rec["logs_at"] = time.time()

    def _copy_node_logs(self, target, box, answer) -> None:
        n = len(self.rec["attempts"])
        for where in dict.fromkeys((answer.get("run_dir"), answer.get("attempt_dir"))):
            if not where:
                continue
            parts = (vault.BOXES, f"{n}-{box}", where.rsplit("/", 1)[-1])
            local = self.vault.landing(*parts)
            doc = pull.pull(target, where, local, S.Options(retry_for=self.pull_retry_s))
            failed = doc["summary"] if not doc["ok"] else self.vault.land(local, *parts)
            if failed:
                self.say("log-copy-failed", box=box, why=failed)

    def do_outputs(self, action, answer) -> None:
        with self._target() as target:
            for rel in self.spec["outputs"]:
                # the one entry of the directory holding it, into outputs/: a directory or one file alike
                src = rel if rel.startswith("/") else f"{self.attempt['workdir']}/{rel}"
                above, name = posixpath.split(src.rstrip("/"))
                local = self.vault.landing(vault.OUTPUTS)
                doc = pull.pull(target, above or "/", local, S.Options(excludes=vault.only(name),
                                                                       retry_for=self.pull_retry_s))
                failed = doc["summary"] if not doc["ok"] else self.vault.land(local, vault.OUTPUTS)
                if failed:
                    self.say("output-copy-failed", path=rel, why=failed)
                    return
                self.say("output-evacuated", path=rel, files=doc["data"]["files"])
        self.rec["outputs_done"] = True
        self.save()

    def do_failed(self, action, answer) -> None:
        with self._target() as target:
            self._copy_logs(target, answer)
        self.end(record.FAILED, action["why"])

    def do_finish(self, action, answer) -> None:
        if not self.rec.get("logs_done"):
            with self._target() as target:
                self._copy_logs(target, answer)
            self.rec["logs_done"] = True
        if self.spec.get("stop_when_done"):
            self._stop_all(action["why"], record.FINISHED, "completed, evacuated and stopped")
        elif self.spec.get("stop_idle_s"):
            self._stop_idle()
        else:
            self.end(record.FINISHED, action["why"])

    def do_budget(self, action, answer) -> None:
        """--budget reached: what the box holds that the vault lacks is copied, the run stopped (a stop
        wins over its supervisor's retries), then every box of the attempt stopped."""
        self.say("budget-reached", why=action["why"])
        if answer is not None and answer.get("checkpoints"):
            names = rules.wanted(answer["checkpoints"], [h["name"] for h in self.vault.held()], self.spec["keep"])
            if names:
                self.do_evacuate({"names": names}, answer)
        for box, why in gangattempt.stop(self.nodes(), self.spec.get("jobs_dir")):
            self.say("run-not-stopped", box=box, why=why)
        self._stop_all(action["why"], record.OVER_BUDGET, action["why"])

    def do_stop(self) -> None:
        """`gpuops stop RUN`: the run stopped on every box of the attempt (a stop wins over its
        supervisor's retries); nothing is relaunched after. A box that could not be told ends it in
        STOP_FAILED: its run may still be going there."""
        failed = gangattempt.stop(self.nodes(), self.spec.get("jobs_dir"))
        for box, why in failed:
            self.say("run-not-stopped", box=box, why=why)
        if failed:
            return self.end(record.STOP_FAILED, "gpuops stop: " + "; ".join(f"{b}: {w}" for b, w in failed))
        self.end(record.STOPPED, "stopped by `gpuops stop`")

    def _stop_all(self, why, phase, done_why) -> None:
        """Every box of the attempt stopped by its stop command, then the run ends in `phase`; the
        first stop that fails (or a box with none) ends it in STOP_FAILED instead."""
        stops = stopping.commands(self.spec)
        for node in self.nodes():
            if not self._stop_box(node["box"], stops.get(node["box"]), why):
                return
        self.end(phase, done_why)

    def _stop_idle(self) -> None:
        """--stop-idle: each box of the last attempt stopped once the fleet sees it idle that long; a
        box busy again (another job, a GPU in use) is no longer the run's to stop and is left running."""
        limit, done = self.spec["stop_idle_s"], self.rec.setdefault("idle_done", [])
        left = [n["box"] for n in self.nodes() if n["box"] not in done]
        stops, seen = stopping.commands(self.spec), stopping.idle(self.spec, left)
        for box in left:
            state, idle_s, why = seen.get(box, ("unknown", None, "not in the fleet file"))
            if state == "busy":
                self.say("stop-idle-skipped", box=box, why=f"busy again ({why}): left running")
            elif state != "idle" or idle_s < limit:
                continue
            elif not self._stop_box(box, stops.get(box), f"idle {idle_s:.0f}s (--stop-idle {limit:g}s)"):
                return
            done.append(box)
        if len(done) < len(self.nodes()):
            self.do_wait({"why": f"waiting for --stop-idle {limit:g}s on {', '.join(left)}"}, None)
            return
        self.end(record.FINISHED, "completed and evacuated; its idle boxes handled by --stop-idle")

    def _stop_box(self, box, command, why) -> bool:
        """Run `box`'s stop command; False (and the run's end) when there is none or it fails."""
        if command:
            self.say("stopping", box=box, why=why)
        ok, failed = stopping.run(box, command, self.rec["run_id"], self.vault.root)
        if not ok:
            self.say("stop-failed", box=box, why=failed)
            self.end(record.STOP_FAILED, f"{box}: {failed}")
            return False
        self.say("stopped", box=box, why="stop command exited 0")
        return True

    def do_relaunch(self, action, answer) -> None:
        att, now = self.attempt, time.time()
        gone = action.get("boxes") or {att["box"]: action["why"]}
        att.update(ended_at=now, ended_why=action["why"])
        for box, why in gone.items():
            self.rec["lost"][box] = why
            fleetstate.mark_lost(box, why, self.rec["run_id"])
            self.say("lost", box=box, why=why)
        self.rec["phase"] = record.RELAUNCHING
        self.save()
        keep = self._stop_survivors([n for n in att.get("nodes") or [] if n["box"] not in gone])
        held = [{"name": h["name"], "step": checkpoints.step_of(h["name"])} for h in self.vault.held()]
        resume = max(held, key=lambda h: (h["step"] is not None, h["step"] or 0))["name"] if held else None
        running = next(m for m in reversed(self.rec["marks"]) if m["kind"] == "running")
        running["redone_after"] = att.get("seen", {}).get(resume, running["at"])
        silent = [self._watch(b)["last_ok_wall"] for b in gone if self._watch(b)["failing_since"] is not None]
        detect_at = min(silent + [now])
        self.rec["marks"] += [{"kind": "detection", "at": detect_at, "box": running["box"],
                               "usd_per_hour": att.get("usd_per_hour")},
                              {"kind": "launch", "at": now, "box": None, "usd_per_hour": None}]
        self.start(resume, keep)

    def _stop_survivors(self, nodes) -> list:
        """A gang's nodes on boxes that were not lost: their runs stopped (what still runs would wait
        for the lost node, or retry with it); the boxes the next attempt keeps, in node order. A node
        whose stop failed is left alone and its box not used again by this run."""
        if not nodes:
            return []
        failed = dict(gangattempt.stop(nodes, self.spec.get("jobs_dir")))
        for box, why in failed.items():
            self.rec["lost"][box] = f"its node of the gang could not be stopped: {why}"
            self.say("node-not-stopped", box=box, why=why)
        kept = [n["box"] for n in nodes if n["box"] not in failed]
        if kept:
            self.say("nodes-stopped", boxes=kept, why="the gang goes on without its lost node")
        return kept

    def start(self, resume, keep=()) -> None:
        """The next attempt, on fitting boxes this run never lost (a gang: `keep` first), from `resume`."""
        until, said = self.clock() + self.spec.get("place_for_s", PLACE_FOR_S), None
        tried: set = set()
        while self.clock() < until:
            if record.stop_asked(self.rec["run_id"]):  # a stop wins over a relaunch
                return self.end(record.STOPPED, "stopped by `gpuops stop` before a relaunch")
            try:
                att, why = self._launch(resume, keep, set(self.rec["lost"]) | tried)
            except _LaunchFailed as e:
                tried |= e.boxes
                self.say("launch-failed", box=",".join(sorted(e.boxes)), why=e.why)
                continue
            if att is not None:
                self.rec["attempts"].append(att)
                label = ",".join(n["box"] for n in self.nodes())
                self.rec["marks"][-1].update(box=label, usd_per_hour=att["usd_per_hour"])
                self.rec["marks"].append({"kind": "running", "at": att["launched_at"], "box": label,
                                          "usd_per_hour": att["usd_per_hour"]})
                self.rec["phase"] = record.RUNNING
                self.watch.clear()
                self.say("relaunched", box=label, job=att["job"], resumed_from=resume,
                         why=f"on {label}" + (f" from vault checkpoint {resume}" if resume else " from the start"))
                return
            if why != said:
                self.say("no-box", why=why)
                said = why
            tried.clear()
            self.sleep(self.spec.get("poll_s", POLL_S))
        self.end(record.GAVE_UP, f"no fitting box for {self.spec.get('place_for_s', PLACE_FOR_S):g}s: {said}")

    def _launch(self, resume, keep, passed) -> tuple:
        """(the new attempt's record, None), or (None, why no box fits now); _LaunchFailed names the
        boxes a launch failed on."""
        if not self.spec.get("gang"):
            box, gpus, why = attempt.place(self.spec, passed)
            if box is None:
                return None, why
            try:
                return attempt.launch(self.spec, box, gpus, resume=resume, vault=self.vault)[0], None
            except errors.GpuopsError as e:
                raise _LaunchFailed({box.alias}, e.message) from None
        boxes, short = gangattempt.place(self.spec, passed, [k for k in keep if k not in passed])
        if short and len(boxes) < gangattempt.smallest(self.spec):
            return None, f"{len(boxes)} box(es) for a gang of at least {gangattempt.smallest(self.spec)}: {short}"
        try:
            return gangattempt.launch(self.spec, boxes, resume=resume, vault=self.vault), None
        except errors.GpuopsError as e:
            raise _LaunchFailed({b.alias for b in boxes if b.alias not in keep} or {b.alias for b in boxes},
                                e.message) from None

    def end(self, phase, why) -> None:
        self.rec.update(phase=phase, ended_at=time.time(), why=why)
        self.say("ended", phase=phase, why=why)

    def _target(self):
        return _Closing(target_for(self.attempt["box"]))


class _LaunchFailed(Exception):
    def __init__(self, boxes, why) -> None:
        super().__init__(why)
        self.boxes, self.why = boxes, why


class _Closing(object):
    def __init__(self, target) -> None:
        self.target = target

    def __enter__(self):
        return self.target

    def __exit__(self, *exc) -> None:
        self.target.close()
