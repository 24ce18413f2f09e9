"""Where a job's log is, and what the scheduler or the box says about the job.

Local layout (the MaxText-on-Slurm harness): an outputs/ folder holds job directories named
`<slurm_id>-<config>` or `local_<timestamp>-<config>`, each with a `log` symlink to the sibling
`<dirname>.log`. Directories without a `log` link are shared checkpoint directories, not jobs.
Both the log and the job directory are resolved, because the directory holds ray_logs/,
prometheus/ and core files that the next steps point at.

Remote (gpuops jobs): `<jobs_dir>/<job_id>/log` on the box, jobs_dir being $GPUOPS_JOBS_DIR or
~/.gpuops/jobs. Only a bounded head and tail are read, in one exec channel; the line count of
the whole file (wc -l) places the tail's lines at their real line numbers.
"""

import glob
import os
import re
import shutil
import subprocess

from ..errors import NotFound, UsageError

HEAD_BYTES = 256 << 10
TAIL_BYTES = 4 << 20
SCONTROL_TIMEOUT_S = 10
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SLURM_ID = re.compile(r"^\d+(?:_\d+)?$")
_DIR_ID = re.compile(r"^(\d+(?:_\d+)?)-")
_MISSING = 44
_MARK = b"gpuops-triage "
STEP_TEXT = "completed step: "
STEP_LINES = 300


class Located:
    def __init__(self, log, job_dir=None, slurm_id=None):
        self.log, self.job_dir, self.slurm_id = log, job_dir, slurm_id


def _slurm_id_of(path):
    m = _DIR_ID.match(os.path.basename(path.rstrip("/")))
    return m.group(1) if m else None


def from_log(path):
    if not os.path.isfile(path):
        raise NotFound(f"no log file at {path}")
    job_dir = path[:-len(".log")] if path.endswith(".log") else None
    if job_dir and not os.path.isdir(job_dir):
        job_dir = None
    return Located(path, job_dir, _slurm_id_of(job_dir or path))


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


def parse_scontrol(text):
    m = re.search(r"\bJobState=(\S+)", text or "")
    return m.group(1) if m else None


# ---------------------------------------------------------------------- remote job logs


def check_job_id(job):
    if not job or not _JOB_ID.match(job) or job in (".", ".."):
        raise UsageError(f"--job must be a gpuops job id (letters, digits, . _ -), not {job!r}")
    return job


def remote_read_line(job, mark, head=HEAD_BYTES, tail=TAIL_BYTES):
    """The sh line that prints `gpuops-triage <size> <newlines>`, then the whole log when it is
    small, else its head, the first and the last STEP_LINES step lines (grep -nb: line, offset,
    text) between two `mark` lines, and its tail. The step lines keep the projection right when
    the first step is past the head (long config dumps) or a hung job printed more noise after
    its last step than the tail holds."""
    from ..remote import wrap

    script = (
        'd="${GPUOPS_JOBS_DIR:-$HOME/.gpuops/jobs}"; f="$d"/' + wrap.quote(job) + '/log; '
        f'if [ ! -r "$f" ]; then echo "$f" >&2; exit {_MISSING}; fi; '
        'size=$(wc -c < "$f"); n=$(wc -l < "$f"); '
        'printf "gpuops-triage %s %s\\n" $size $n; '
        f'if [ "$size" -le {head + tail} ]; then cat "$f"; else '
        f'head -c {head} "$f"; printf "\\n%s\\n" {mark}; '
        f'{{ LC_ALL=C grep -m 1 -a -n -b -F {wrap.quote(STEP_TEXT)} "$f"; '
        f'LC_ALL=C grep -a -n -b -F {wrap.quote(STEP_TEXT)} "$f" | tail -n {STEP_LINES}; }} 2>/dev/null; '
        f'printf "%s\\n" {mark}; tail -c {tail} "$f"; fi'
    )
    return wrap.with_timeout(["sh", "-c", script], 60)


def read_remote(target, job, head=HEAD_BYTES, tail=TAIL_BYTES):
    """[(first line number, bytes)] pieces of a gpuops job's log on `target`, plus its size."""
    import secrets

    mark = "gpuops-triage-steps-" + secrets.token_hex(8)
    res = target.run(remote_read_line(job, mark, head, tail), timeout_s=70)
    if res.exit == _MISSING:
        where = res.stderr.decode("utf-8", "replace").strip() or f"~/.gpuops/jobs/{job}/log"
        raise NotFound(f"{target.name}: job {job} has no readable log ({where})")
    out = res.stdout
    if res.exit != 0 or not out.startswith(_MARK):
        msg = res.stderr.decode("utf-8", "replace").strip()[-300:]
        from ..errors import HostError

        raise HostError(f"{target.name}: reading the log of job {job} failed (exit {res.exit}): {msg}")
    nl = out.index(b"\n")
    _, size, newlines = out[:nl].split()
    return split_pieces(out[nl + 1:], int(size), int(newlines), head, tail, mark.encode()), int(size)


def split_pieces(body, size, newlines, head, tail, mark=None):
    """Pieces, cut to whole lines, each with the line number of its first line: the whole log, or
    its head, the step lines between head and tail (from grep -nb), and its tail."""
    if size <= head + tail or len(body) <= head:
        return [(1, body)]
    first = body[:head]
    rest = body[head:]
    steps = b""
    if mark is not None:
        sep = b"\n" + mark + b"\n"
        if rest.startswith(sep) and (mark + b"\n") in rest[len(sep):]:
            rest = rest[len(sep):]
            cut = rest.index(mark + b"\n")
            steps, rest = rest[:cut], rest[cut + len(mark) + 1:]
    first = first[:first.rfind(b"\n") + 1]
    pieces = [(1, first)]
    tail_start = size - len(rest)
    head_lines = first.count(b"\n")
    between = {}
    for row in steps.splitlines():
        parts = row.split(b":", 2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            line_no, offset = int(parts[0]), int(parts[1])
            if line_no > head_lines and offset < tail_start:
                between[line_no] = parts[2] + b"\n"
    pieces += sorted(between.items())
    cut = rest.find(b"\n") + 1
    if cut:
        # The tail's first (partial) line is line newlines - tail_nl + 1; the first whole one follows it.
        pieces.append((newlines - rest.count(b"\n") + 2, rest[cut:]))
    return pieces


def remote_job_state(target, job):
    """(state, exit_record, box_now) from the gpuops job records; Nones when they cannot be read."""
    from .. import errors
    from ..ops import jobs

    try:
        doc = jobs.status(target, job=job, timeout_s=30.0)
    except errors.GpuopsError:
        return None, None, None
    rows = (doc.get("data") or {}).get("jobs") or []
    if doc.get("error") or not rows:
        return None, None, None
    row = rows[0]
    state = row.get("state")
    record = None
    if state in ("COMPLETED", "FAILED", "KILLED"):
        record = {"exit_code": row.get("exit_code"), "signal": row.get("signal")}
    return state, record, (doc.get("data") or {}).get("box_now")
