"""What to do after a triage: advice (prose for a person, chosen by the class, the framework the
log shows and whether the job is alive) and the commands that can run as they are.

A class's steps (classes.py) are prose, except three markers that become runnable next steps
when their arguments are known and are left out otherwise: STOP (only for a live job: `gpuops
stop` for a gpuops job, a dry run; `scancel ID` for a Slurm job read here), DIAGNOSE (a gpuops
job) and SCONTROL (a Slurm job read on this machine, never for a job on a box, which may have
no Slurm). A step marked ENDED is a post-mortem check, left out while the job is alive.
"""

import re

from ...envelope import step
from ...units import duration
from . import classes as C
from . import framework_advice as FA
from . import frameworks as FW
from . import signatures as S
from . import wording as W
from typing import Sequence

LIVE = ("running", "hanging")
ADVICE_MAX = 14
_MARKERS = (C.STOP, C.DIAGNOSE, C.SCONTROL)
_EXIT_MEANING = {137: "SIGKILL: often the OOM killer", 134: "SIGABRT: look for a core dump",
                 139: "SIGSEGV: look for a core dump", 1: "a generic error"}


def steps_of(v, name: str):
    """The class's steps (torch's), the framework's own where its advice differs: the framework the
    log shows, then its family (a torch CUDA OOM is never told to set remat_policy; JAX's advice
    only where the log shows JAX/XLA)."""
    fw = v.framework()
    return FA.ADVICE.get((name, fw)) or FA.ADVICE.get((name, FW.family(fw))) or v.class_of(name).steps


def fill(v, text: str, live):
    """A prose step with the job directory filled in; None for a marker, or for a post-mortem
    check while the job is alive."""
    if text in _MARKERS:
        return None
    if text.startswith(C.ENDED):
        if live:
            return None
        text = text[len(C.ENDED):]
    job_dir = v.ctx.get("job_dir")
    if job_dir:
        return text.replace("{job_dir}", job_dir)
    return re.sub(r"\{job_dir\}/([\w.*-]+)", r"\1 in the job directory", text)


# Steps written for another situation than the job's: Ray's dashboards and TSDB (and the
# Prometheus that reads the TSDB) for a log that shows no Ray; a step for one exit code ("For
# 'Permission denied' (exit 126)") when the job exited with another.
_NEEDS_RAY = re.compile(r"RAY=1|Ray Dashboard|Prometheus|TSDB")
_FOR_EXIT = re.compile(r"^For .*\(exit (\d+)\)")


def applies(v, text: str) -> bool:
    """Whether a prose step fits the job the log is of (see _NEEDS_RAY)."""
    if _NEEDS_RAY.search(text) and not v.f.ray:
        return False
    code = (v.exit_record or {}).get("exit_code")
    said = _FOR_EXIT.search(text)
    return not (said and code is not None and int(said.group(1)) != code)


def first_fix(v, name: str, live):
    """The first prose step of a class: a finding's fix."""
    return next((t for t in (fill(v, s, live) for s in steps_of(v, name)) if t and applies(v, t)), None)


def command(v, marker, live):
    """The runnable step a marker stands for, or None when its arguments are not known."""
    host, job, sid = v.ctx.get("host"), v.ctx.get("job"), v.ctx.get("slurm_id")
    if job and host:  # a gpuops job on a box
        words = ["--host", host, "--job", job] + (["--jobs-dir", v.ctx["jobs_dir"]] if v.ctx.get("jobs_dir") else [])
        if marker == C.STOP and live:
            return step("gpuops", "stop", *words, why="a dry run: shows what would be signalled, and its plan")
        if marker == C.DIAGNOSE:
            return step("gpuops", "diagnose", *words, why="the box's records: exit, boot id, OOM counters, kernel log")
        return None
    if sid is None:
        return None
    if marker == C.STOP and live:
        return step("scancel", sid)
    if marker == C.SCONTROL:
        return step("scontrol", "show", "job", sid, why="PREEMPTED, TIMEOUT, NODE_FAIL or OUT_OF_MEMORY")
    return None


def compose(v, status, primary, also, prog, heartbeat, dashboards):
    """(next steps, advice) for a verdict."""
    f = v.f
    live = status in LIVE
    steps, advice = [], []

    def take(texts: Sequence[str]) -> None:
        for text in texts:
            made = command(v, text, live) if text in _MARKERS else None
            if made and made not in steps:
                steps.append(made)
            elif text == C.STOP and live:
                advice.append("Stop the job: scancel its Slurm id, or gpuops stop for a gpuops job.")
            said = fill(v, text, live)
            if said and applies(v, said):
                advice.append(said)

    if primary == "heartbeat-timeout" and heartbeat:
        advice.append(W.heartbeat_sentence(heartbeat))
    if primary is not None:
        if primary == "cancelled":
            advice.append(_cancel_sentence(v))
        if primary == "unknown-death":
            advice.extend(_death_clues(v))
        take(steps_of(v, primary))
        if primary == "node-fail":
            advice.append(_node_sentence(f))
        if primary == "hang" and len(set(f.task_last_steps.values())) == 1 and len(f.task_last_steps) > 1:
            advice.insert(0, f"All {len(f.task_last_steps)} tasks stopped after step {f.last_step}: the pattern "
                             "of a collective deadlock, not of one dead node.")
    elif status == "completed":
        advice.append("Nothing to fix: the job completed" + (f" (last step {f.last_step})." if f.last_step is not None else "."))
    elif status == "running" and v.stalled(v.now_epoch) is None:
        said = f" ({v.state})" if v.state else ""
        advice.append(f"The job is alive{said}, but nothing dates its step lines (no times on them), so whether "
                      "training still advances cannot be told from the log: compare the last step with a later "
                      "triage, or use gpuops status for a gpuops job.")
    elif status == "running":
        left = f", about {duration(prog['eta_s'])} left" if prog["eta_s"] is not None else ""
        at = f" (step {f.last_step}" + (f" of {v.total}" if v.total else "") + f"{left})" if f.last_step is not None else ""
        advice.append(f"Training is advancing{at}; nothing to fix. Triage again later to confirm it still advances.")
    elif v.no_end:
        advice.append(_no_end_sentence(v, prog))
    else:
        advice.append("No known failure signature matched: read the lines just before the end of the log.")
    if status not in LIVE + ("completed",):
        take([C.DIAGNOSE])  # an ended gpuops job that did not complete: the box's records say more
    for name in also:
        cls = S.CLASS_BY_NAME[name]
        if name == "heartbeat-timeout" and heartbeat:
            continue  # its checklist result follows; the generic hint could contradict it
        fix = first_fix(v, name, live)
        if cls.role in ("root", "cause") and fix and len(advice) < ADVICE_MAX:
            advice.append(f"Also found {name}: {fix}")
    if "heartbeat-timeout" in also and heartbeat:
        advice.append(W.heartbeat_sentence(heartbeat))
    if dashboards:
        advice.extend(W.dashboard_sentences(dashboards, v.ctx.get("job_dir")))
    return steps, advice


def _cancel_sentence(v) -> str:
    last = v.f.last_step
    if last is None:
        return "The job was cancelled before any training step completed; no error was found before it."
    at_end = ""
    if v.step_time and v.last_epoch is not None and v.end_epoch is not None:
        at_end = f", about step {int(last + max(0.0, v.end_epoch - v.last_epoch) / v.step_time)} expected then"
    return (f"Training was still advancing when the job was cancelled (last step {last}{at_end}) and no error "
            "came before the cancellation: nothing needs fixing unless the cancellation was unexpected.")


def _node_sentence(f):
    bad = [(h, c) for h, c in f.node_exits.items() if c not in (0,) + S.CANCEL_EXITS]
    if not bad:
        return "No NODE_EXIT line named the failing node; look for srun's 'task N: Exited with exit code' lines."
    parts = [f"{h} exit {c}" + (f" ({_EXIT_MEANING[c]})" if c in _EXIT_MEANING else "") for h, c in bad[:8]]
    return "Failed nodes: " + ", ".join(parts) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "") + "."


def _no_end_sentence(v, prog):
    f = v.f
    at = f" after step {f.last_step}" if f.last_step is not None else ""
    said = (f"No end in the log: it stops{at} with no completion, failure, cancel or exit record, and no "
            "scheduler state says the job ended, so it may still be running, or have been killed without a "
            "trace. Ask what ran it: gpuops status for a gpuops job, scontrol show job / sacct for Slurm, or "
            "triage again with --slurm-state.")
    if v.stopped_for is None:
        return said
    times = f", {int(v.stopped_for / v.step_time)} step times" if v.step_time else ""
    lost = prog["steps_lost"]
    cost = (f"; if it is gone, {lost} step(s) since the last checkpoint are lost" if lost is not None
            else "; if it is gone, the steps since its last checkpoint are lost")
    return f"{said} It stopped logging {duration(v.stopped_for)} before now{times} without a step{cost}."


def _death_clues(v):
    out = []

    if v.f.truncated:
        out.append("The log ends in the middle of a line with no cleanup messages: with the job ended, a SIGKILL "
                   "(host OOM killer, scheduler or a person) is the likely end.")
    if v.state in S.SLURM_ENDED_IT:
        out.append(f"Slurm reports the job as {v.state}: that is how it ended.")
    if not out:
        out.append("No cause was printed: the usual ones are the host OOM killer and Slurm preemption.")
    return out
