"""`pause` and `resume`: checkpoint a job and give its resources back, then continue it.

One call each, on the box (gpuops.onbox.job_pause). Pause sends the checkpoint signal and waits
there for the job's checkpoint marker (a log line matching `ckpt_regex`, or `ckpt_file` written)
before it stops anything: a Slurm job is requeued and held, a supervised job stopped and kept as
PAUSED. No marker by the timeout: nothing is stopped and the exit code is 6, as for any wait that
ran out of time. Resume releases the held Slurm job (the same job, started again from its script,
which finds its checkpoint) or starts the supervised job again as a child with `resume_arg`.
"""

from .. import errors
from ..envelope import CODE_KEY, envelope, step
from ..jobs import states, statusrow
from .jobs import call

MARGIN_S = 60.0  # the signal, the stop ladder and Slurm's requeue around the marker wait


def pause(target, *, job, ckpt_regex=None, ckpt_file=None, signal=None, timeout_s=300.0, grace=10.0, jobs_dir=None):
    from ..jobs import spec

    if not ckpt_regex and not ckpt_file:
        raise errors.UsageError("pause needs the job's checkpoint marker: --ckpt-regex (a log line the job prints "
                                "once its checkpoint is written) or --ckpt-file (a file it writes then)")
    opts = {"job": job, "marker_regex": ckpt_regex, "marker_file": ckpt_file, "timeout": float(timeout_s),
            "grace": float(grace), "signal": spec.checkpoint_signal(signal)[0], "jobs_dir": jobs_dir}
    doc = call(target, "pause", opts, timeout_s=float(timeout_s) + float(grace) + MARGIN_S)
    row = statusrow.derive(doc["after"])
    jid = row["job_id"]
    data = {"job_id": jid, "engine": doc["engine"], "state": row["state"], "paused": bool(doc.get("paused")),
            "marker": doc.get("marker"), "job": row}
    resume = step("gpuops", "resume", "--host", target.name, "--job", jid, *(["--jobs-dir", jobs_dir] if jobs_dir
                                                                               else []))
    if doc.get("already"):
        return envelope("pause", ok=True, summary=f"{jid} is already paused", data=data, next=[resume])
    if not doc.get("paused") and doc.get("marker") is None:
        out = envelope("pause", ok=False, summary=f"{jid}: no checkpoint marker within {float(timeout_s):g}s of the "
                                                  f"signal; nothing was stopped ({row['state']})", data=data)
        out[CODE_KEY] = errors.WAIT_TIMED_OUT
        return out
    seen = doc.get("marker") or {}
    how = f"checkpoint seen ({seen.get('log') or seen.get('file')}); " if seen else ""
    return envelope("pause", ok=row["state"] == states.PAUSED,
                    summary=f"paused {jid}: {how}{row['state']}" + (f": {row['reason']}" if row.get("reason") else ""),
                    data=data, next=[resume])


def resume(target, *, job, resume_arg=None, env=None, secrets=None, key=None, jobs_dir=None, timeout_s=60.0):
    opts = {"job": job, "resume_arg": resume_arg, "env": env or {}, "secrets": secrets or {}, "key": key,
            "jobs_dir": jobs_dir}
    doc = call(target, "resume", opts, timeout_s=timeout_s)
    row = statusrow.derive(doc["after"])
    jid = row["job_id"]
    data = {"job_id": jid, "engine": doc["engine"], "state": row["state"], "job": row}
    if doc.get("child") is not None:
        child = statusrow.derive(doc["child"])
        data["child"] = child
        summary = f"resumed {jid} as {child['job_id']} ({child['state']})"
        watched = child["job_id"]
    else:
        summary = f"resumed {jid}: {row['state']}" + (f" ({row['reason']})" if row.get("reason") else "")
        watched = jid
    more = ["--jobs-dir", jobs_dir] if jobs_dir else []
    return envelope("resume", ok=True, summary=summary, data=data,
                    next=[step("gpuops", "status", "--host", target.name, "--job", watched, *more)])
