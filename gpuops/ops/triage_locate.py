"""Where a job's log is, and what the scheduler or the box says about the job.

Local layout (the MaxText-on-Slurm harness): an outputs/ folder holds job directories named
`<slurm_id>-<config>` or `local_<timestamp>-<config>`, each with a `log` symlink to the sibling
`<dirname>.log`. Directories without a `log` link are shared checkpoint directories, not jobs.
Both the log and the job directory are resolved, because the directory holds ray_logs/,
prometheus/ and core files that the next steps point at.

A Slurm job id is read from a name only where a Slurm tool wrote that name: the harness's
`<id>-<config>` job directory (with its `log` link) and its sibling `<id>-<config>.log`, and
sbatch's default `slurm-<id>.out`. Any other leading number (`01-train.log`, `2025-03-02.log`)
is not a job id, and no `scontrol` is asked about it: on a login node an unrelated job's state
would decide the status.

A gpuops job's log on a box is read by the job's own on-box code (gpuops.onbox.jobs.job_facts,
`excerpt`), which knows where the records are.
"""

import glob
import os
import re
import shutil
import subprocess

from ..errors import NotFound, UsageError

SCONTROL_TIMEOUT_S = 10
_SLURM_ID = re.compile(r"^\d+(?:_\d+)?$")
_DIR_ID = re.compile(r"^(\d+(?:_\d+)?)-")
_SBATCH_OUT = re.compile(r"^slurm-(\d+(?:_\d+)?)\.(?:out|err)$")


class Located:
    def __init__(self, log, job_dir=None, slurm_id=None) -> None:
        self.log, self.job_dir, self.slurm_id = log, job_dir, slurm_id


def _slurm_id_of(job_dir):
    """The id in a harness job directory's name: `<id>-<config>` holding its `log` link."""
    if not job_dir or not os.path.lexists(os.path.join(job_dir, "log")):
        return None
    m = _DIR_ID.match(os.path.basename(job_dir.rstrip("/")))
    return m.group(1) if m else None


def from_log(path):
    if not os.path.isfile(path):
        raise NotFound(f"no log file at {path}")
    job_dir = path[:-len(".log")] if path.endswith(".log") else None
    if job_dir and not os.path.isdir(job_dir):
        job_dir = None
    sbatch = _SBATCH_OUT.match(os.path.basename(path))
    return Located(path, job_dir, sbatch.group(1) if sbatch else _slurm_id_of(job_dir))


def from_dir(path):
    if not os.path.isdir(path):
        raise NotFound(f"no job directory at {path}")
    link = os.path.join(path, "log")
    if os.path.isfile(link):
        return Located(os.path.realpath(link), path.rstrip("/"), _slurm_id_of(path))
    sibling = path.rstrip("/") + ".log"
    if os.path.isfile(sibling):
        return Located(sibling, path.rstrip("/"), _slurm_id_of(path))
    if os.path.islink(link):
        raise NotFound(f"{link} points at {os.readlink(link)}, which does not exist")
    raise NotFound(f"{path} has no `log` link and no sibling {os.path.basename(path.rstrip('/'))}.log "
                   "(a shared checkpoint directory is not a job)")


def from_slurm_id(slurm_id, outputs):
    slurm_id = str(slurm_id).strip()
    if not _SLURM_ID.match(slurm_id):
        raise UsageError(f"--slurm-id must be a Slurm job id such as 7877 or 7877_3, not {slurm_id!r}")
    if not os.path.isdir(outputs):
        raise NotFound(f"no outputs folder at {outputs} (set it with --outputs)")
    found = {}
    for entry in sorted(glob.glob(os.path.join(glob.escape(outputs), glob.escape(slurm_id) + "-*"))):
        if os.path.isdir(entry) and (os.path.isfile(os.path.join(entry, "log")) or os.path.isfile(entry + ".log")):
            loc = from_dir(entry)
        elif entry.endswith(".log") and os.path.isfile(entry):
            loc = from_log(entry)
        else:
            continue
        found.setdefault(os.path.realpath(loc.log), loc)
    if not found:
        raise NotFound(f"no job {slurm_id} in {outputs}: looked for {slurm_id}-*/log and {slurm_id}-*.log")
    if len(found) > 1:
        raise UsageError(f"several logs for job {slurm_id} in {outputs}: " + ", ".join(sorted(found)) + "; pass --log")
    loc = next(iter(found.values()))
    loc.slurm_id = slurm_id
    return loc


def ray_logs_restore(job_dir, max_files=64, max_bytes=1 << 20):
    """What the Ray workers said about restoring (RAY=1 jobs): 'fresh start: <file>',
    'restored from step N: <file>', or None when there are no such lines."""
    if not job_dir:
        return None
    pattern = os.path.join(glob.escape(job_dir), "ray_logs", "*", "worker*.out")
    for path in sorted(glob.glob(pattern))[:max_files]:
        try:
            with open(path, "rb") as fh:
                data = fh.read(max_bytes)
        except OSError:
            continue
        where = os.path.relpath(path, job_dir)
        step = re.search(rb"restoring from this run's directory step (\d+)", data)
        if step:
            return f"restored from step {int(step.group(1))}: {where}"
        if b"No existing checkpoints found, not restoring checkpoint" in data:
            return f"fresh start: {where}"
    return None


def scontrol_state(slurm_id):
    """JobState from `scontrol show job`, or None (no scontrol, unknown job, any error)."""
    if not slurm_id or not shutil.which("scontrol"):
        return None
    try:
        out = subprocess.run(["scontrol", "show", "job", str(slurm_id)], capture_output=True, text=True,
                             timeout=SCONTROL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_scontrol(out.stdout) if out.returncode == 0 else None


def parse_scontrol(text: str):
    m = re.search(r"\bJobState=(\S+)", text or "")
    return m.group(1) if m else None
