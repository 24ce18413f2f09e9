"""The triage operation: resolve the input, scan, classify, and build the envelope."""

import base64
import os
from datetime import datetime

from .. import engines
from ..envelope import envelope
from ..errors import BadAnswer, UsageError
from ..jobs import rows
from . import triage_locate
from ..onbox.triage.logtriage import triage_file, triage_pieces
from typing import Optional

_OK_STATUSES = ("completed", "running")


def parse_now(text):
    """`--now` as a datetime. Here, not in gpuops.onbox.triage.timestamps: datetime.fromisoformat is
    Python 3.7, and that module is shipped to the box (gpuops.onbox), where it may be 3.6."""
    if text is None:
        return None
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--now must be an ISO 8601 time such as 2025-01-15T10:30:00Z, not {text!r}") from None


def check_inputs(log, dir, slurm_id, host, job):
    given = [name for name, value in (("--log", log), ("--dir", dir), ("--slurm-id", slurm_id), ("--job", job))
             if value not in (None, "")]
    if len(given) != 1:
        raise UsageError("give exactly one of --log FILE, --dir JOBDIR, --slurm-id ID or --job J (with --host H)"
                         + (f"; got {', '.join(given)}" if given else ""))
    if host and not job:
        raise UsageError("--host needs --job: triage reads a gpuops job's log on that host")


def build(result, host: Optional[str]=None, more=(), run=None):
    """The envelope: what to do next leaves `data` for the envelope's own `next` and `advice`;
    `more` findings (a job's telemetry) follow the log's, and a run's attempt is named."""
    data = {k: v for k, v in result.data.items() if k not in ("next", "advice")}
    summary = result.summary
    if run:
        data["run"] = run
        summary += rows.run_tag(run)
    return envelope("triage", ok=data["status"] in _OK_STATUSES, summary=summary, host=host, data=data,
                    findings=list(result.findings) + list(more), next=result.data["next"],
                    advice=result.data["advice"])


def triage_local(*, log=None, dir=None, slurm_id=None, outputs="outputs", slurm_state=None, now=None):
    if log:
        loc = triage_locate.from_log(log)
    elif dir:
        loc = triage_locate.from_dir(dir)
    else:
        loc = triage_locate.from_slurm_id(slurm_id, outputs)
    state = slurm_state if slurm_state is not None else triage_locate.scontrol_state(loc.slurm_id)
    context = {"log": loc.log, "job_dir": loc.job_dir, "slurm_id": loc.slurm_id,
               "restore_confirmed": triage_locate.ray_logs_restore(loc.job_dir)}
    try:
        result = triage_file(loc.log, now=now, slurm_state=state, context=context)
    except IsADirectoryError:
        raise UsageError(f"{loc.log} is a directory: pass it with --dir") from None
    except PermissionError as e:
        raise UsageError(f"cannot read {loc.log}: {e.strerror}") from None
    return build(result)


def read_excerpt(target, job, jobs_dir=None, head=None, tail=None, attempt=None):
    """(job facts, [(first line number, bytes)] pieces, log size, box clock, telemetry judgements)
    from one round trip."""
    from ..jobs import runtelemetry
    from .jobs import call

    doc = call(target, "excerpt", {"job": job, "jobs_dir": jobs_dir, "head": head, "tail": tail, "attempt": attempt})
    return (doc["job"], [_piece(p, target.name) for p in doc["pieces"]], doc["size"], doc["now"],
            runtelemetry.checked(doc.get("telemetry"), target.name))


def _piece(piece, host: str):
    """(first line number, bytes) of one piece of a log excerpt from the box."""
    try:
        first, data = piece
        if isinstance(first, int) and not isinstance(first, bool) and first >= 1:
            return first, base64.b64decode(data.encode("ascii"), validate=True)
    except (TypeError, ValueError, AttributeError, UnicodeEncodeError):
        pass
    raise BadAnswer(f"{host}: the box's log excerpt is not gpuops's: a piece {str(piece)[:80]!r}")


def triage_remote(target, *, job, jobs_dir=None, profile=None, slurm_state=None, now=None, attempt=None):
    from ..engines import platform
    from ..jobs import curves, runtelemetry
    from ..engines import statusrow

    jobs_dir, _ = platform.records_dir(profile, jobs_dir)
    facts, pieces, size, box_now, judged = read_excerpt(target, job, jobs_dir, attempt=attempt)
    row = statusrow.derive(facts)
    if now is None and box_now:
        now = datetime.fromtimestamp(float(box_now))
    meta = facts.get("meta") or {}
    context = {"host": target.name, "job": row["job_id"], "jobs_dir": jobs_dir, "log_bytes_total": size,
               "job_dir": os.path.dirname(meta["log"]) if meta.get("log") else None}
    said, rec = engines.of_record(row, target.name).triage_inputs(row, facts)  # a scheduler's job: its own word
    said = slurm_state or said
    # The stall is judged on the facts status reads: when the supervisor saw each step line written.
    result = triage_pieces(pieces, now=now, slurm_state=said, exit_record=rec, context=context,
                           progress=statusrow.dated_progress(row))
    more = runtelemetry.findings(judged) + curves.findings(facts.get("trackers"))  # checked with the facts
    doc = build(result, host=target.name, more=more, run=row.get("run"))
    # diagnose's own next is this triage: a step back to it is a loop, at the CLI as through MCP
    doc["next"] = [s for s in doc["next"] if s.get("argv", [])[:2] != ["gpuops", "diagnose"]]
    return doc
