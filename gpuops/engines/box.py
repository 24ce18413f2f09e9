"""The box's own supervisor as an engine, on this side (its box half: gpuops.onbox.engines.box_engine).

Its state rule: an exit record decides COMPLETED, FAILED or KILLED, unless `gpuops pause` stopped
the job (PAUSED until resumed); a changed boot_id or a dead process without an exit record is
VANISHED; a live process is RUNNING (then judged for a stall like every engine's).
"""

from ..jobs import records, rows, runpolicy
from ..jobs.records import ExitRecord, JobFacts, Meta, PauseRecord
from ..states import COMPLETED, FAILED, KILLED, PAUSED, RUNNING, TERMINAL, VANISHED
from ..envelope import step
from .base import Engine, command_line
from typing import Optional


class Box(Engine):
    name, title = "box", "the box's supervisor"
    help = "gpuops' supervisor on the host, the default"
    composes = True
    # the run loop's fields, and a --torchrun node's place on the link between the gang's supervisors
    policy_fields = runpolicy.ENFORCED + ("gang",)
    stop_target = {"pid": int, "start_ticks": (int, type(None)), "cmd": (str, type(None)), "gpu": bool,
                   "planned": bool}
    # what the box's check of --gpus found (gpuops.onbox.host.gpu_pins; read by gpuops.engines.answers.gpu_findings)
    meta_fields = {"share_gpu": (bool, type(None)), "gpu_check": (dict, type(None))}

    def decide(self, row: dict, facts: dict, meta: dict) -> None:
        f = records.read(JobFacts, facts)
        if f.exit is not None and _paused(f):
            row.update(state=PAUSED, reason="paused by gpuops: checkpointed and stopped; `gpuops resume` starts it "
                                            "again from its checkpoint")
        elif f.exit is not None:
            _from_exit(row, records.read(ExitRecord, f.exit), records.read(Meta, meta), f.survivors_alive or [])
        elif f.liveness == "rebooted":
            row.update(state=VANISHED, reason="the box rebooted since launch (boot_id changed)")
        elif f.liveness == "alive":
            row["state"] = RUNNING
            if f.wrapper_alive is False:
                row["hint"] = "the gpuops supervisor of this job is gone: its exit will not be recorded"
        elif f.live_pids:  # VANISHED only once no process of the job lives
            pids = f.live_pids
            row.update(state=RUNNING, reason=f"its leader (pid {records.read(Meta, meta).pid}) and its gpuops supervisor are gone "
                                             f"unrecorded, but {len(pids)} process(es) of the job still run (pids "
                                             f"{', '.join(map(str, pids))}): gpuops stop --job {row['job_id']} ends them")
        else:
            row.update(state=VANISHED, reason=_vanish_reason(f))

    def plan(self, targets):
        """The leader and the lasting processes (gpuops.onbox.engines.box_stop): not a child that comes and goes."""
        bound = [t for t in targets if t["planned"]]
        return {"pids": [t["pid"] for t in bound]}, [(t["pid"], t["start_ticks"]) for t in bound]

    def stop_steps(self, host: str, jid: str, gone: bool, jobs_dir: str | None) -> list:
        if gone:
            return [command_line(host, "retry", jid, jobs_dir=jobs_dir, why="to run it again")]
        return [step("gpuops", "reap", "--host", host, why="lists what still holds a GPU")]

    def diagnosis(self, ev, row, host: str, jobs_dir, triaged=None, pid: Optional[int]=None):
        from ..onbox.track import wandblines
        from ..diagnose import verdict

        v = verdict.decide(ev)
        if pid and v["confidence"] == "high" and v["verdict"] not in ("running", "reboot"):
            v["confidence"] = "medium"  # no exit record or launch baseline for a process we did not start
        nxt, advice = verdict.next_steps(v["verdict"], host, ev.get("job_id"), jobs_dir,
                                         ended=bool(row) and row["state"] in TERMINAL)
        advice = verdict.triage_advice(triaged, ev, v["ruled_out"]) + advice + verdict.gotcha_advice(v)
        tracked = wandblines.wandb(ev.get("log_head"), ev.get("log_tail"), (ev.get("meta") or {}).get("env"))
        advice += wandblines.advice(tracked)
        if triaged and triaged.get("primary"):
            nxt += [s for s in triaged.get("next") or [] if s not in nxt]
        data = {"verdict": v["verdict"], "confidence": v["confidence"], "job": ev.get("job_id"), "pid": ev.get("pid"),
                "exit_code": v["exit_code"], "signal": v["signal"], "evidence": v["evidence"],
                "ruled_out": v["ruled_out"], "gotcha": v["gotcha"],
                "kernel_log": {"readable": ev.get("kernel_readable"), "source": ev.get("kernel_source"),
                               "tried": ev.get("kernel_tried")},
                "oom_kills": {"at_launch": ev.get("oom_kills_at_launch"), "now": ev.get("oom_kills_now")},
                "disks": ev.get("disks"), "cores": ev.get("cores"), "trackers": {"wandb": tracked}, "triage": triaged,
                "error_line": ev.get("error_line"), "state": row["state"] if row else None}
        return {"verdict": v, "data": data, "next": nxt, "advice": advice, "what": ev.get("job_id") or f"pid {pid}",
                "ok": v["verdict"] in ("running", "completed", "stopped")}  # a stop someone asked for is no failure


ENGINE = Box()


def _paused(facts: JobFacts) -> bool:
    rec = records.read(PauseRecord, facts.pause)
    return bool(rec.stopped_at) and not rec.resumed_at


def _from_exit(row: dict, rec: ExitRecord, meta: Meta, survivors: list) -> None:
    row["ended_at"] = rec.ended_at
    row["duration_s"] = rows.since(rec.ended_at, meta.launched_at)
    if rec.signal:
        row.update(state=KILLED, signal=rec.signal)
    elif rec.exit_code == 0:
        row.update(state=COMPLETED, exit_code=0)
    elif rec.exit_code is not None:
        row.update(state=FAILED, exit_code=rec.exit_code, hint=rows.code_hint(rec.exit_code))
    else:
        row.update(state=VANISHED, reason=rec.error or "the exit record holds neither a code nor a signal")
    if rec.error and row["state"] == FAILED:
        row["reason"] = rec.error
    rows.ended_by_supervisor(row, rec)
    if survivors:
        row["survivors"] = survivors
        rows.add_hint(row, "%d process(es) of the job's group outlived it (pids %s): gpuops stop --job %s" % (
            len(survivors), ", ".join(map(str, survivors)), row["job_id"]))


def _vanish_reason(facts: JobFacts) -> str:
    if facts.pid_reused:
        return "the recorded pid now belongs to another process (pid reused); the job ended unrecorded"
    if facts.stop:
        return "stopped by `gpuops stop`, but its supervisor did not record the exit"
    if facts.wrapper_alive is False:
        return "the process and its gpuops supervisor are gone without an exit record (killed, OOM?)"
    lost = records.read(Meta, facts.meta).supervisor_lost
    if lost:  # recorded by the launcher (gpuops.onbox.run.wrapper), which found the job running without it
        return f"{lost}, and the job has ended unrecorded"
    return "the process is gone and no exit record was written"
