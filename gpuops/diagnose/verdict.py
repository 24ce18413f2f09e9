"""Pure reasoning from gathered evidence to one verdict (no I/O).

The reflex answer to "my run is gone" is OOM; it is often wrong. The ladder here follows the
evidence in the order that is hardest to fake: a changed boot_id (reboot) beats everything; an
exit record written by the job's own supervisor beats guesses; a stop record written by `gpuops
stop` names who sent the signal; a kernel OOM-killer line naming
the pid, or a cgroup OOM counter that rose since launch, is OOM evidence; exit 137 alone is not
(it only says SIGKILL). A clean kernel log proves nothing inside a container, where the host's
log is usually unreadable, so the cgroup counter decides there. A death by SIGSEGV, SIGABRT or
another core signal, or a core dump of the run's own pid, is a native crash (gpuops.diagnose.crash),
named with its core.
"""

from datetime import datetime, timezone

from .. import xid
from ..gotcha import split_ids
from ..jobs import records
from ..jobs.records import ExitRecord
from ..jobs.rows import SHELL_CODES
from ..states import STALLED
from ..onbox.triage.retrypolicy import MAX_RUNTIME, STALL
from ..onbox.triage.wording import PLAIN
from . import crash

# The verdicts whose name is an API word, not a person's: how a summary says them (the name stays
# in --json's `verdict`).
WORDS = {"failed-exit": "failed", "killed-by-signal": "killed by a signal", "failed-to-start": "could not start",
         "oom-kill": "killed by the OOM killer", "node-failure": "its node failed", "never-runs": "can never run",
         "unknown": "cause unknown"}


def in_words(verdict: str) -> str:
    return WORDS.get(verdict, verdict)


EXTERNAL = {"SIGKILL", "SIGTERM", "SIGINT", "SIGQUIT"}
ENOSPC_MARKS = ("No space left on device", "ENOSPC", "Disk quota exceeded")
NEARLY_FULL_BYTES = 64 << 20


def _oom_evidence(ev, sig):
    """(level, lines): 'kernel' when a kernel OOM line names the process; 'counter' when the
    cgroup counter rose since launch, or when the process died of SIGKILL while the kernel
    OOM-killed another process (a child whose pid we never recorded); None otherwise."""
    named = ev.get("kernel_oom_named") or []
    if named:
        return "kernel", [o["line"] for o in named]
    lines = []
    before, now = ev.get("oom_kills_at_launch"), ev.get("oom_kills_now")
    if before is not None and now is not None and now > before:
        lines.append(f"cgroup OOM-kill counter rose from {before} to {now} since launch")
    if sig == "SIGKILL" or not ev.get("exit"):
        lines += [f"after launch the kernel OOM-killed pid {o['pid']} ({o['comm']})"
                  for o in ev.get("kernel_oom_other") or []]
    return ("counter" if lines else None), lines


def _disk_full(ev):
    tail = ev.get("log_tail") or ""
    said = next((m for m in ENOSPC_MARKS if m in tail), None)
    full = [d for d in ev.get("disks") or []
            if "error" not in d and (d.get("free_bytes", 1 << 62) < NEARLY_FULL_BYTES or d.get("free_inodes") == 0)]
    return said, full


def _no_inodes(full):
    """Did a filesystem the job writes run out of inodes (U7) rather than bytes?"""
    return any(d.get("free_inodes") == 0 for d in full)


def _disk_lines(full):
    return [f"{d['path']}: {d.get('free_bytes')} bytes and {d.get('free_inodes')} inodes free" for d in full]


def _xid_after_launch(ev):
    """The fatal Xids after launch (gpuops.xid): an application Xid is the program's own fault."""
    return [x for x in ev.get("xid_after_launch") or [] if xid.is_fatal(x.get("code"))]


def decide(ev: dict) -> dict:
    """Verdict document: verdict, confidence, evidence, ruled_out, exit_code, signal.

    `ev["status"]`, when given, is the job's status row (gpuops.engines.statusrow.derive of the same
    facts `status` reads), so a live job is "stalled" exactly when status calls it STALLED."""
    record = ev.get("exit") or None
    rec = records.read(ExitRecord, record)
    ruled_out: list = []
    evidence: list = []
    code, sig = rec.exit_code, rec.signal
    if sig is None and code is not None and 128 < code < 160:
        sig = _signal_name(code - 128)  # bash reports a killed child as 128+N
    oom_level, oom_lines = _oom_evidence(ev, sig)
    xids = _xid_after_launch(ev)
    enospc, full = _disk_full(ev)
    kernel_readable = ev.get("kernel_readable", False)

    def out(verdict, confidence, lines, gotcha=None):
        # gotcha: the catalog entry (references/gotchas.toml) the verdict is an instance of, if any
        return {"verdict": verdict, "confidence": confidence, "evidence": evidence + lines,
                "ruled_out": ruled_out, "exit_code": code, "signal": sig, "gotcha": gotcha}

    if ev.get("boot_changed"):
        return out("reboot", "high", [f"boot_id was {ev.get('boot_id_then')} at launch, is {ev.get('boot_id_now')} now"
                                      f" (up {ev.get('uptime_s', 0):.0f}s)"], gotcha="U3")
    ruled_out.append({"cause": "reboot", "why": "boot_id is unchanged since launch"} if ev.get("boot_id_then")
                     else {"cause": "reboot", "why": "process started after the current boot"})
    if ev.get("job_id") and ev.get("meta") is None and not record:
        return out("unknown", "low", ["the launch never wrote the job's start record (meta.json): no process of it "
                                      "was recorded"])
    if ev.get("alive"):
        row = ev.get("status") or {}
        if row.get("state") == STALLED:
            return out("stalled", "high", [f"pid {ev.get('pid')} is alive, but {row.get('reason')}"], gotcha="U43")
        return out("running", "high", [f"pid {ev.get('pid')} is alive with its recorded start time"])
    if record and code == 0:
        return out("completed", "high", ["its recorded end: exit code 0"])
    if record and code is None and sig is None:
        # A record of what is known when the supervisor was lost (gpuops.onbox.run.wrapper): how the
        # job ended is not in it, so it is judged as one that vanished.
        evidence.append("exit record without an exit code or a signal: " + str(rec.error or "no reason"))
        record, rec = None, records.read(ExitRecord, None)
    elif record:
        evidence.append("its recorded end: " + (f"signal {sig}" if rec.signal else f"exit code {code}"))
    else:
        evidence.append(f"pid {ev.get('pid')} is gone and no exit record was written")

    # The run's own supervisor ended the attempt: its signal is gpuops', not someone else's.
    ended_by = rec.ended_by
    if ended_by == STALL:
        saved = rec.stall_evidence
        return out("stalled", "high", [f"no progress line for the run's --stall-after: gpuops stopped it with {sig} "
                                       "(class hang)" + (f"; evidence in {saved}" if saved else "")])
    if ended_by == MAX_RUNTIME:
        return out("timeout", "high", [f"the run reached its --max-runtime: gpuops stopped it with {sig}"])
    stopped = _stopped_by_gpuops((ev.get("job") or {}).get("stop"), record)
    if stopped:
        return out("stopped", "high", stopped)
    # The OOM killer sends SIGKILL only: a recorded HUP/TERM/INT came from someone else.
    if sig == "SIGHUP":
        return out("sighup", "high", ["the job got SIGHUP: a hangup (a closed terminal/SSH session) or kill -HUP"],
                   gotcha="U3")
    if sig in EXTERNAL - {"SIGKILL"}:
        return out("killed-by-signal", "high", [f"terminated by {sig} from outside"], gotcha="U3")
    if oom_level:
        return out("oom-kill", "high" if oom_level == "kernel" else "medium", oom_lines, gotcha="U9, U3")
    ruled_out.append({"cause": "oom-kill", "why": _oom_ruled_out_reason(ev, kernel_readable)})
    if xids:
        return out("gpu-fault", "high", [x["line"] for x in xids], gotcha="U22")
    ruled_out.append({"cause": "gpu-fault", "why": "no fatal Xid after launch" if kernel_readable
                      else "kernel log unreadable: Xid could not be checked"})
    if enospc and (full or not ev.get("disks")):
        return out("disk-full", "high" if full else "medium", [f"log says: {enospc}"] + _disk_lines(full),
                   gotcha="U6, U7" if _no_inodes(full) else "U6")
    if full and not record:
        return out("disk-full", "low", _disk_lines(full), gotcha="U6, U7" if _no_inodes(full) else "U6")
    ruled_out.append({"cause": "disk-full", "why": "no ENOSPC in the log and the job's filesystems have room"})
    crashed = crash.crash(ev, sig, record)
    if crashed:  # a native crash: a driver, CUDA or extension build that disagrees is the usual cause
        return out("crashed", *crashed, gotcha="U28")
    if sig == "SIGKILL":
        conf = "medium" if kernel_readable or ev.get("oom_kills_now") is not None else "low"
        return out("killed-by-signal", conf, [f"terminated by {sig} from outside, with no OOM evidence"], gotcha="U3")
    if record:
        # A core a child left (a DataLoader worker's segfault) is evidence the exit code hides.
        exited = f"the program exited with code {code}"
        said = (SHELL_CODES.get(code, exited) if code is not None else exited) if sig is None else \
            f"the program died of {sig}"
        return out("failed-exit", "high", [said] + ([f"log says: {ev['error_line']}"] if ev.get("error_line") else [])
                   + crash.dumps(ev.get("cores"), None)[0])
    return out("unknown", "low", ["no record, OOM, Xid, disk or reboot evidence explains the disappearance"],
               gotcha="U3")


def _stopped_by_gpuops(stop, record):
    """The evidence lines when `gpuops stop` signalled the job (its stop.json) before it ended;
    None when it never did, or the job had already ended when the stop was asked for."""
    rounds = [r for r in (stop or {}).get("signals") or [] if r.get("pids")]
    if not rounds:
        return None
    ended, asked = (record or {}).get("ended_at"), stop.get("requested_at")
    if ended is not None and asked is not None and ended < asked:
        return None
    when = datetime.fromtimestamp(asked, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if asked else "?"
    sent = ", then ".join(f"{r['signal']} to {len(r['pids'])} process(es)" for r in rounds)
    return [f"stopped by `gpuops stop` (stop.json): asked at {when}; {sent}"]


def _signal_name(num):
    import signal

    try:
        return signal.Signals(num).name
    except ValueError:
        return None


def triage_advice(triaged, ev, ruled_out):
    """The advice lines a log's triage adds to a verdict. A log that reads as a host OOM (torchrun
    prints a worker's SIGKILL, whoever sent it) is not repeated as one when the verdict has ruled
    the OOM killer out on both counts (the cgroup counter compared unchanged, a readable kernel
    log naming no victim): its memory advice would send the reader after the wrong cause."""
    if not triaged or not triaged.get("primary"):
        return []
    said = PLAIN.get(triaged["primary"], triaged["primary"])
    head = f"By its log's tail, triage finds {said} ({triaged['status']})."
    why = next((r["why"] for r in ruled_out if r["cause"] == "oom-kill"), None)
    before, now = ev.get("oom_kills_at_launch"), ev.get("oom_kills_now")
    proven = ev.get("kernel_readable") and now is not None and before == now
    if triaged["primary"] == "oom-host" and why and proven:
        return [f"The log's tail shows a kill that looks like a host OOM, but the OOM killer is ruled "
                f"out ({why}): something else sent the SIGKILL (a stop, a watchdog, a scheduler, a person)."]
    return [head] + list(triaged.get("advice") or [])[:3]


def gotcha_advice(v: dict) -> list:
    """Where the catalog explains the verdict: 'gpuops gotcha U3' for each id it cites."""
    ids = split_ids(v.get("gotcha") or "")
    return [f"The catalog's entry: gpuops gotcha {' / '.join(ids)}."] if ids else []


def _oom_ruled_out_reason(ev, kernel_readable):
    parts = []
    before, now = ev.get("oom_kills_at_launch"), ev.get("oom_kills_now")
    if now is not None:
        parts.append(f"cgroup OOM-kill counter unchanged ({before} -> {now})" if before is not None
                     else f"cgroup OOM-kill counter is {now} (no launch value to compare)")
    else:
        parts.append("no cgroup OOM counter exposed")
    parts.append("no kernel OOM-killer line names the process" if kernel_readable
                 else "kernel log unreadable (common in containers)")
    return "; ".join(parts)


# verdict -> (steps, advice). A step is (verb, extra words, why); `--host H` and, for a step about
# the job, `--job J` are added. Without a job (diagnose --pid), the job's steps are left out.
_JOB, _BOX = "job", "box"
NEXT = {
    "running": ([(_JOB, "wait", (), "returns when it ends, or at the timeout"), (_JOB, "logs", ("--tail", "50"), None)],
                []),
    "stalled": ([(_JOB, "triage", (), "where the steps stopped"), (_JOB, "logs", ("--tail", "200"), None),
                 (_JOB, "stop", (), "a dry run: shows what would be signalled")], []),
    "completed": ([], ["Pull the outputs you need (gpuops pull) before the box is stopped; teardown-check says "
                       "what its stop would delete."]),
    "reboot": ([(_BOX, "preflight", (), "the box after its reboot"), (_JOB, "retry", (), "runs the same command")],
               ["If the script can resume, retry with --resume-arg naming its last checkpoint."]),
    "oom-kill": ([(_BOX, "preflight", (), "memory headroom and the cgroup limit")],
                 ["Lower host-RAM use: fewer DataLoader workers, a smaller prefetch, no full-dataset preload."]),
    "gpu-fault": ([(_BOX, "preflight", (), "Xid, ECC and row-remap state")],
                  ["Move to another GPU or box; a fatal Xid needs a GPU reset."]),
    "disk-full": ([(_BOX, "preflight", (), "free bytes and inodes"), (_JOB, "retry", (), "once space is freed")],
                  ["Free bytes or inodes on the job's filesystem before retrying."]),
    "sighup": ([(_JOB, "retry", (), "relaunched detached: its own session survives hangups")], []),
    "stopped": ([(_JOB, "retry", (), "to run it again")], []),
    "killed-by-signal": ([(_JOB, "retry", (), "if the signal was not intended")],
                         ["Find who sent the signal: another user, a scheduler, the platform stopping the box."]),
    "failed-exit": ([(_JOB, "triage", (), "the failure class in its log"), (_JOB, "logs", ("--tail", "200"), None)],
                    []),
    "crashed": ([(_JOB, "logs", ("--tail", "200"), "what it printed before the crash"),
                 (_BOX, "preflight", (), "driver, CUDA and torch builds that disagree")],
                ["A crash in native code is a CUDA, driver or extension fault, not the script's own error: open the "
                 "core with gdb (`bt` names the library), and relaunch with --env PYTHONFAULTHANDLER=1 so the log "
                 "shows the Python stack at the crash."]),
    "unknown": ([(_JOB, "logs", ("--tail", "200"), None), (_BOX, "preflight", (), None)], []),
}


def next_steps(verdict, host, job, jobs_dir=None, ended=False):
    """(steps, advice) for a verdict: each step an exact argv (gpuops.envelope.step). A job that
    `ended` (a stalled attempt its run's --stall-after stopped) is not told to stop."""
    from ..envelope import step

    planned, advice = NEXT.get(verdict, ([], []))
    out = []
    for about, verb, extra, why in planned:
        if (about == _JOB and not job) or (verb == "stop" and ended):
            continue
        words = ["gpuops", verb, "--host", host or "local"] + (["--job", job] if about == _JOB else []) + list(extra)
        if about == _JOB and jobs_dir:
            words += ["--jobs-dir", jobs_dir]
        out.append(step(*words, why=why))
    return out, list(advice)
