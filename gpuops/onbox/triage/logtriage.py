"""The entry points of job log triage: status, failure class, progress projection and what to do
next, from a job's log.

Pure entry points (no I/O beyond reading the given file):

    classify_bytes(data, now=None, slurm_state=None, exit_record=None, first_line=1) -> dict
    classify_file(path, now=None, slurm_state=None, exit_record=None) -> dict

Both return the `data` dict of `gpuops triage --json`, whose keys are exactly
signatures.DATA_KEYS: status, primary, also, stage, evidence, progress, next (runnable steps,
gpuops.envelope.step), advice (prose). `now` is a datetime
(naive means local time; log times without a zone are read in the zone of `now`), `slurm_state`
a Slurm job state (RUNNING, CANCELLED, ...; None when unknown), `exit_record` a gpuops job exit
record ({"exit_code": int | None, "signal": "SIGKILL" | None}) that stands in for a JOB SUMMARY, and
`first_line` the line number of data's first line when data is a tail (evidence then points at
the real file; data should start at a line start), and `progress` what a job's own record says of
its last step line ({"at": epoch written, "step_time_s": ...}, gpuops.engines.statusrow.dated_progress):
the stall is then judged on the facts `status` uses.

`triage_bytes` / `triage_file` return the full `classify.Result` (data, findings, context).
"""

from .classify import classify as _classify
from .readers import scan_file, scan_pieces
from .signatures import CLASS_NAMES, DATA_KEYS, PROGRESS_KEYS, STATUSES

__all__ = ["classify_bytes", "classify_file", "triage_bytes", "triage_file", "triage_pieces",
           "CLASS_NAMES", "DATA_KEYS", "PROGRESS_KEYS", "STATUSES"]


def triage_bytes(data, now=None, slurm_state=None, exit_record=None, context=None, first_line=1, progress=None):
    return _classify(scan_pieces([(first_line, bytes(data))]), now, slurm_state, exit_record, context, progress)


def triage_file(path, now=None, slurm_state=None, exit_record=None, context=None, engine=None):
    return _classify(scan_file(path, engine), now, slurm_state, exit_record, context)


def triage_pieces(pieces, now=None, slurm_state=None, exit_record=None, context=None, progress=None):
    return _classify(scan_pieces(pieces), now, slurm_state, exit_record, context, progress)


def classify_bytes(data, now=None, slurm_state=None, exit_record=None, first_line=1, progress=None):
    return triage_bytes(data, now, slurm_state, exit_record, first_line=first_line, progress=progress).data


def classify_file(path, now=None, slurm_state=None, exit_record=None):
    return triage_file(path, now, slurm_state, exit_record).data
