"""From scanned facts to a verdict: status, primary class, other classes, evidence, next steps.

Status: see status.py (the procedure's table, extended with the terminal evidence of logs that
have no JOB SUMMARY: launcher failure reports, trainer completion markers, Slurm's own lines).

Primary class. The classes found compete in this order:
  1. specific causes (role root) and generic causes (tracebacks, crash signals, Ray actor errors),
     earliest first: in a cascade the first error is the cause and the later ones (NCCL timeouts
     on the other nodes, heartbeat timeouts) are its consequences. A root cause printed inside a
     traceback (same task, within signatures.TRACEBACK_SPAN lines of its `Traceback (most recent
     call last):`) counts from the traceback's first line, where it beats the generic class.
  2. hang: steps stalled while the job was alive (hanging), or before a cancel or the training
     time limit stopped it (measured up to the log's last timestamp); a job that failed on its
     own is not called hung;
  3. exit reports (a node, a stage or a subprocess exited non-zero), earliest first;
  4. the mechanisms: the training time limit, Slurm's time limit, preemption, then cancellation
     (the mechanism, not the cause);
  5. unknown-death for a job whose state says it ended with nothing in the log saying how; a Ray
     bootstrap failure only when nothing else is found.
Only *terminal* occurrences compete: an error after which training went on for two or more steps
(or two progress lines that are no steps), or before an elastic restart notice, did not end the
run (it is still listed in `also`). A job that
is running, or whose log has no end, has no primary failure from the soft signatures (warnings
healthy runs print too): they are listed in `also`. Occurrences after the stopping mechanism
(Slurm's CANCELLED line, the time-limit banner, a launcher receiving SIGTERM) are its
consequences. Exit lines with 130/143 (srun, NODE_EXIT, the subprocess) are not markers: they
are printed after the fact, once the processes are gone.
A completed job has no primary failure. Next steps follow the framework the log shows where the
advice differs (framework_advice.py: a torch CUDA OOM is never told to set remat_policy).

Heartbeat timeouts follow the false-positive checklist: when an accused task crashed before the
accusation (traceback, NCCL error, OOM or SIGKILL on that task), that crash is the primary cause;
otherwise the accusation is presumed false, and confirmed false when the accused task itself
logged the coordination service's error (it was alive to print it).
"""

from datetime import datetime

from ... import states
from . import steps
from . import advice as A
from . import classes as C
from . import frameworks as FW
from . import progress as P
from . import signatures as S
from . import status as ST
from . import wording as W

# A job state from Slurm or from gpuops' own records (gpuops.states), plus plain words.
_ALIVE = set(S.SLURM_ALIVE) | set(states.ALIVE) | {"ALIVE"}
_ENDED = set(S.SLURM_ENDED) | set(states.TERMINAL) | {"ENDED", "DEAD", "GONE"}
_ENDED_BY = {"completed": "completion line", "failed": "failure line", "cancelled": "cancel line"}
_LIVE = ("running", "hanging")
_SHORT_STATES = {"R": "RUNNING", "PD": "PENDING", "CG": "COMPLETING", "CD": "COMPLETED", "F": "FAILED",
                 "CA": "CANCELLED", "TO": "TIMEOUT", "PR": "PREEMPTED", "NF": "NODE_FAIL", "OOM": "OUT_OF_MEMORY",
                 "S": "SUSPENDED", "DL": "DEADLINE", "BF": "BOOT_FAIL"}


class Result:
    """`data` has exactly signatures.DATA_KEYS; the rest feeds the envelope and the report."""

    def __init__(self, data, findings, context, summary):
        self.data, self.findings, self.context, self.summary = data, findings, context, summary


def normalize_state(value):
    if value is None:
        return None
    word = str(value).strip().split()[0].rstrip("+").upper() if str(value).strip() else ""
    if word in ("", "UNKNOWN", "NONE", "-"):
        return None
    return _SHORT_STATES.get(word, word)


def classify(facts, now=None, slurm_state=None, exit_record=None, context=None, progress=None):
    """`progress`: when the job's own record dates its step lines (a gpuops job: the supervisor's
    growth samples, as `status` reads them), {"at": epoch the last step line was written,
    "step_time_s": ...}; those facts then decide the stall, with the same rule status uses."""
    return _Verdict(facts, now or datetime.now(), slurm_state, exit_record, dict(context or {}), progress,
                    now is not None).result()


class _Verdict:
    def __init__(self, f, now, slurm_state, exit_record, ctx, progress=None, now_given=False):
        self.f, self.now, self.ctx = f, now, ctx
        self.now_given = now_given  # a time the caller named (--now, a box's clock), not this machine's
        self.now_epoch = now.timestamp()
        self.state_raw = slurm_state
        self.state = normalize_state(slurm_state)
        self.exit_record = exit_record
        self.total = f.pt_steps or f.cfg_steps or f.form_total
        self.period = P.checkpoint_period(f.cfg_period, f.pt_period, f.pt_ckpt, S.DEFAULT_CHECKPOINT_PERIOD)
        self.step_time = f.step_time
        self.last_epoch = None
        self.dated_by = None
        if progress and progress.get("at") is not None:
            self.last_epoch, self.dated_by = float(progress["at"]), "the job's record"
            self.step_time = progress.get("step_time_s") or self.step_time
        elif f.last_step_basis is not None:
            stamp, add_s, add_steps = f.last_step_basis
            self.last_epoch = stamp.epoch(now) + add_s + add_steps * (self.step_time or 0.0)
            self.dated_by = "the log's times"
        self.end_epoch = f.end_stamp.epoch(now) if f.end_stamp is not None else None
        if ctx.get("slurm_id") is None and f.slurm_id is not None:
            ctx["slurm_id"] = f.slurm_id

    # ------------------------------------------------------------------ status

    def status(self):
        f = self.f
        self.ended_by = None
        self.no_end = False
        self.stopped_for = None
        recorded = ST.from_records(f, self.state, self.exit_record)
        if recorded is not None:
            status, self.ended_by = recorded
            return status
        alive, ended = self.state in _ALIVE, self.state in _ENDED
        logged = ST.from_log(self)
        # An error that ends the log of a job Slurm still runs may be one rank's: the others can be
        # hung in a collective, which the step rows below tell.
        if logged is not None and not (alive and logged[2] == "error"):
            status, occ, _ = logged
            self.ended_by = f"{_ENDED_BY[status]}: {occ.decoded().strip()}"
            return status
        if ended:
            return "unknown"
        stall = self.stalled(self.now_epoch)
        if stall is False:
            return "running"
        if alive:  # silence in a log without step lines is no hang: status would not call it stalled
            return "hanging" if stall and self.last_epoch is not None else "running"
        self.no_end = True  # nothing says the process ended: no death is claimed
        if stall and self.now_given and self.last_epoch is not None:
            # A named time (--now, the box's clock) past the stall bar since the last dated step: the log
            # stopped logging, and what a death there would cost is counted (the seed's unknown-death row),
            # still without claiming one: the job may be alive and unseen (issue 27).
            self.stopped_for = self.now_epoch - self.last_epoch
        return "unknown"

    def stalled(self, ref):
        """Has no step line come for longer than the stall bar before `ref`? Step lines are dated
        by the job's record or the log's times; a log without step lines by its last time. None
        when nothing dates them."""
        if self.last_epoch is not None:
            return steps.stalled(self.last_epoch, self.step_time, ref)
        if self.f.last_step is None and self.end_epoch is not None:
            return steps.stalled(self.end_epoch, None, ref)
        return None

    def failed_after(self, line):
        """Did a failure line (not an exit report, not a soft signature) end the run after `line`?
        e.g. the final save failing."""
        for name in self.f.classes:
            occ = self.last_hard(name) if S.CLASS_BY_NAME[name].role in ("root", "cause") else None
            if occ is not None and occ.line > line and self.terminal([occ]) is not None:
                return True
        return False

    def last_hard(self, name):
        """The last occurrence of a class on a line that is not a soft signature, or None."""
        hits = self.f.classes.get(name)
        if not hits:
            return None
        occs = sorted(set(hits.all()) | set(hits.by_step.values()), key=lambda o: o.line)
        return next((o for o in reversed(occs) if o.sig not in S.SOFT_SIGNATURES), None)

    # ------------------------------------------------------------------ terminal occurrences

    def _threshold(self):
        return None if self.f.last_step is None else self.f.last_step - 1

    def _resolved(self, step_at):
        if step_at is not None:
            return step_at
        return (self.f.first_step - 1) if self.f.first_step is not None else -1

    def terminal(self, occs):
        """The first occurrence after which training did not go on for 2+ more steps, or past two
        more of a framework's progress lines that are no steps, and that no restart notice followed
        (the run went on after it)."""
        thr = self._threshold()
        marks = self.f.progress_marks
        went_on = max(self.f.restart.line if self.f.restart is not None else 0, marks[0] if len(marks) == 2 else 0)
        cands = [o for o in occs if (thr is None or self._resolved(o.step_at) >= thr) and o.line > went_on]
        return min(cands, key=lambda o: o.line) if cands else None

    def terminal_of(self, cls):
        hits = self.f.classes.get(cls)
        return self.terminal(hits.by_step.values()) if hits else None

    # ------------------------------------------------------------------ the verdict

    def result(self):
        f = self.f
        status = self.status()
        completed = status == "completed"
        found = f.classes
        hang = self._hang(status)
        mechanism = self._mechanism_line(status)
        eligible = {}
        for name in found:
            occ = self.terminal_of(name)
            if occ is not None and (mechanism is None or occ.line < mechanism):
                eligible[name] = occ
        heartbeat = self._heartbeat(found) if "heartbeat-timeout" in found else None
        if status == "running" or self.no_end:  # warnings are no failure until something ends the run
            eligible = {n: o for n, o in eligible.items() if o.sig not in S.SOFT_SIGNATURES}
        primary = None if completed else self._primary(status, eligible, hang, heartbeat, found)
        classes = self._all_classes(status, found, hang)
        also = [c for c in classes if c != primary]
        # Where training should be: now for a live job; for one that ended (or whose log has no
        # end) when its log ends, never today's clock.
        ref = self.now_epoch if status in _LIVE or self.stopped_for is not None else self.end_epoch
        prog = P.project(first_step=f.first_step, last_step=f.last_step, total_steps=self.total, period=self.period,
                         step_time=self.step_time, last_step_epoch=self.last_epoch, now_epoch=ref,
                         completed=completed,
                         failed=status != "running" and (not self.no_end or self.stopped_for is not None))
        stage = self._stage(primary, eligible.get(primary) or self._first(primary))
        dashboards = self._dashboards(status)
        data = {
            "status": status,
            "primary": primary,
            "also": also,
            "stage": stage,
            "evidence": self._evidence(primary, also, eligible, heartbeat),
            "progress": prog,
        }
        data["next"], data["advice"] = A.compose(self, status, primary, also, prog, heartbeat, dashboards)
        context = self._context(status)
        results = W.findings_for(data, found, eligible, self, context, heartbeat, dashboards)
        summary = W.summary_line(data) + W.stopped_text(self) + ("; no end in the log" if self.no_end else "")
        return Result(data, results, context, summary)

    def _hang(self, status):
        f = self.f
        if ST.SUPERVISOR_CLASS.get((self.exit_record or {}).get("ended_by")) == "hang":
            return True
        if f.last_step is None:
            return False
        if status == "hanging":
            return True
        # A stopped job was hung only if something stopped it while it was stalled: a cancel or
        # the training time limit (a job that failed on its own was not "still running").
        if status == "cancelled" or "train-timeout" in f.classes:
            ref = self.end_epoch if self.end_epoch is not None else self.now_epoch
            return steps.stalled(self.last_epoch, self.step_time, ref) is True
        return False

    def _mechanism_line(self, status):
        lines = []
        for name in ("cancelled", "train-timeout", "timeout", "preempted"):
            occ = self.terminal_of(name)
            if occ is not None:
                lines.append(occ.line)
        hint = self.f.cancel_hint
        if hint is not None and self.terminal([hint]) is not None:
            lines.append(hint.line)
        if status == "cancelled" and self.f.summary is not None:
            lines.append(self.f.summary["line"])
        return min(lines) if lines else None

    def _primary(self, status, eligible, hang, heartbeat, found):
        ranked = []
        for name, occ in eligible.items():
            role = S.CLASS_BY_NAME[name].role
            if role in ("root", "cause"):
                ranked.append((occ.event, 0 if role == "root" else 1, S.PRIORITY[name], name))
        if ranked:
            primary = min(ranked)[3]
            if primary == "heartbeat-timeout" and heartbeat and heartbeat["prior"]:
                primary = heartbeat["prior"][0][1]
            return primary
        if hang:
            return "hang"
        ended = ST.SUPERVISOR_CLASS.get((self.exit_record or {}).get("ended_by"))
        if ended:
            return ended
        exits = sorted((occ.event, S.PRIORITY[n], n) for n, occ in eligible.items() if S.CLASS_BY_NAME[n].role == "exit")
        if exits:
            return exits[0][2]
        for mechanism in ("train-timeout", "timeout", "preempted"):
            if mechanism in found:
                return mechanism
        if status == "cancelled" or "cancelled" in eligible:
            return "cancelled"
        if status == "unknown" and not self.no_end:
            return "unknown-death"
        if "ray-start-fail" in eligible:
            return "ray-start-fail"
        return None

    def _all_classes(self, status, found, hang):
        f = self.f
        order = {}
        for name, hits in found.items():
            order[name] = hits.first[0].line
        if hang and "hang" not in order:
            order["hang"] = f.last_step_occ.line if f.last_step_occ else f.lines
        if status == "unknown" and not self.no_end:
            order["unknown-death"] = f.lines + 1
        if status == "cancelled" and not {"cancelled", "timeout", "preempted"} & set(order):
            order["cancelled"] = self._mechanism_line(status) or f.lines
        return [n for n, _ in sorted(order.items(), key=lambda kv: (kv[1], S.PRIORITY[kv[0]]))]

    def _first(self, cls):
        hits = self.f.classes.get(cls) if cls else None
        return hits.first[0] if hits else None

    def _stage(self, primary, occ):
        if primary is None:
            return None
        cls = S.CLASS_BY_NAME[primary]
        if primary == "stage-fail" and occ is not None and occ.detail:
            return occ.detail
        # A harness stage that FAILED at or after the cause names the stage it happened in.
        banner = self.f.classes.get("stage-fail")
        after = [o for o in banner.all() if occ is None or o.line >= occ.line] if banner else []
        if after and after[0].detail and self.f.last_step is None:
            return after[0].detail
        if cls.stage:
            return cls.stage
        if self.f.last_step is not None:
            return "Training"
        return self.f.stage_now

    # ------------------------------------------------------------------ checklists

    def _heartbeat(self, found):
        f = self.f
        hb = found["heartbeat-timeout"].first[0]
        accused = sorted(f.accused)
        thr = self._threshold()
        prior = []
        for task in accused:
            crash = f.crash_by_task.get(task)
            if crash and crash[1].line < hb.line and (thr is None or self._resolved(crash[1].step_at) >= thr):
                prior.append((crash[1].line, crash[0], task, crash[1]))
        prior.sort()
        self_reported = [t for t in accused if t in f.self_death]
        if prior:
            verdict = "true-positive"
        elif self_reported:
            verdict = "confirmed-false-positive"
        else:
            verdict = "presumed-false-positive"
        return {"line": hb.line, "accused": accused, "self_reported": self_reported,
                "prior": [(line, cls, task, occ) for line, cls, task, occ in prior], "verdict": verdict}

    def _dashboards(self, status):
        f = self.f
        if not f.ray:
            return None
        specs = f.tunnel_specs
        prom = [s for s in specs if s[2] not in (S.RAY_DASHBOARD_PORT, S.TENSORBOARD_PORT)]
        port = f.prometheus_port or (prom[0][2] if prom else S.PROMETHEUS_DEFAULT_PORT)
        head = (prom[0][1] if prom else (specs[0][1] if specs else None))
        return {"live": status in ("running", "hanging"), "head_host": head, "prometheus_port": port,
                "tunnel": f.tunnel.decoded().strip() if f.tunnel else None,
                "tunnel_line": f.tunnel.line if f.tunnel else None}

    # ------------------------------------------------------------------ evidence

    def _evidence(self, primary, also, eligible, heartbeat):
        f = self.f
        picked = {}

        def add(occ, rank):
            if occ is not None and occ.line is not None and (occ.line not in picked or picked[occ.line][0] > rank):
                picked[occ.line] = (rank, occ)

        if f.summary is not None:
            add(f.summary["text"], 0)
        if primary in f.classes:
            lead = eligible.get(primary) or f.classes[primary].first[0]
            add(lead, 0)
            for occ in f.classes[primary].all()[:5]:
                add(occ, 1)
        ends = primary == "unknown-death" or "unknown-death" in also or self.no_end  # where the log stops
        if primary == "hang" or "hang" in also or ends:
            add(f.last_step_occ, 1)
        if ends:
            add(f.last_line, 1)
        if heartbeat:
            for t in heartbeat["self_reported"][:3]:
                add(f.self_death[t], 2)
            for _, _, _, occ in heartbeat["prior"][:3]:
                add(occ, 1)
        if primary == "cancelled" and f.cancel_hint is not None:
            add(f.cancel_hint, 1)
        for name in also:
            if name in f.classes:
                add(eligible.get(name) or f.classes[name].first[0], 3)
        chosen = sorted(picked.values(), key=lambda ro: (ro[0], ro[1].line))[:S.EVIDENCE_MAX]
        return [{"line": occ.line, "text": W.clip(occ.decoded())} for _, occ in sorted(chosen, key=lambda ro: ro[1].line)]

    def several_ranks(self):
        """Does the log show more than one process in collectives? Two tasks' lines, a world of 2+ ranks
        or nodes, a collective library coming up, or the JAX/MaxText harness (one process drives all of
        a node's GPUs through collectives)."""
        f = self.f
        tasks = set(f.task_last_steps) | set(f.crash_by_task) | set(f.node_exits)
        return bool(f.collective or (f.world or 0) > 1 or len(tasks) > 1 or f.step_form == "maxtext"
                    or FW.family(self.framework() or "torch") == "jax")

    def class_of(self, name):
        """A class as this log reads: a hang of one process is no collective deadlock (classes.py)."""
        return C.HANG_ONE_PROCESS if name == "hang" and not self.several_ranks() else S.CLASS_BY_NAME[name]

    def framework(self):
        """The framework the log shows (frameworks.shown), or None."""
        return FW.shown(self.f.frameworks, self.f.step_form == "maxtext")

    def fix_for(self, name, status):
        """The first prose step of a class, for its finding."""
        return A.first_fix(self, name, status in A.LIVE)

    def _context(self, status):
        f = self.f
        ctx = dict(self.ctx)
        ctx.update(
            job_state=self.state or (str(self.state_raw) if self.state_raw else None),
            lines=f.lines, bytes=f.bytes, engine=f.engine, pieces=f.pieces,
            ended_by=self.ended_by,
            no_end=self.no_end or None,
            steps_dated_by=self.dated_by,
            end_time=f.end_stamp.iso() if f.end_stamp else None,
            last_step_time=datetime.fromtimestamp(self.last_epoch, self.now.tzinfo).isoformat() if self.last_epoch else None,
            now=self.now.isoformat(),
            restore=W.restore_text(f),
            truncated_last_line=f.truncated,
            steady_steps=f.steady_steps,
            stopped_logging_s=round(self.stopped_for, 1) if self.stopped_for is not None else None,
            several_ranks=self.several_ranks(),
            stalled_for_s=round(self.now_epoch - self.last_epoch, 1) if (status in ("running", "hanging", "unknown")
                                                                         and self.last_epoch) else None,
            tasks_at_last_step=len(f.task_last_steps) or None,
            step_form=f.step_form,
            framework=self.framework(),
        )
        return ctx
