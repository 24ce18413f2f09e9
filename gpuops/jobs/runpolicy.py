"""A run's policy from what a person or an agent asked for (launch's --max-retries, --retry-on,
--checkpoint-dir, --resume-arg, --stall-after, --max-runtime, --keep-checkpoints, --keep-best,
--share-checkpoint-dir, --notify; MCP
job_launch's fields of the same names), checked here before anything is sent, into the document
the box's supervisor enforces (gpuops.onbox.run.boxpolicy, which checks it again against the box: a
checkpoint directory the job cannot write).

A policy that cannot work is a usage error (exit 2) before anything starts: a --resume-arg without
{checkpoint}, a duration that does not parse, --max-retries above the cap, an unknown or
never-retried failure class, a glob that reaches outside the checkpoint directory.
"""

from .. import xid
from ..errors import UsageError
from ..onbox.run import checkpoints
from ..onbox.triage import retrypolicy
from ..onbox.run import boxpolicy as onbox_policy
from ..units import parse_duration

DAY = 86400.0
# The policy's fields the run loop enforces (gpuops.onbox.run.runloop), for an engine that runs it
# (gpuops.engines.base Engine.policy_fields)
ENFORCED = ("max_retries", "retry_on", "checkpoint_dir", "checkpoint_glob", "resume_arg", "stall_after_s",
            "max_runtime_s", "keep_checkpoints", "keep_best", "share_checkpoint_dir", "notify", "checkpoint_every_s",
            "grace_s", "backoff_s")
# launch's flags and MCP job_launch's fields (gpuops.surface.jobs RUN_POLICY)
FLAGS = ("max_retries", "retry_on", "checkpoint_dir", "checkpoint_glob", "resume_arg", "stall_after", "max_runtime",
         "keep_checkpoints", "keep_best", "share_checkpoint_dir", "notify")


def _duration(flag, value, low=1.0, high=onbox_policy.MAX_S):
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as e:
        raise UsageError(f"{flag}: {e}") from None
    if not low <= seconds <= high:
        raise UsageError(f"{flag} takes from {low:g}s to {high / DAY:g} days, not {str(value)[:40]!r}")
    return seconds


def _whole(flag, value, low, high):
    if value is None:
        return None
    text = str(value).strip()
    if not text.isdigit() or not low <= int(text) <= high:
        raise UsageError(f"{flag} takes a whole number from {low} to {high}, not {text[:40]!r}")
    return int(text)


def build(max_retries=None, retry_on=None, checkpoint_dir=None, resume_arg=None, stall_after=None,
          max_runtime=None, keep_checkpoints=None, notify=None, keep_best=None, share_checkpoint_dir=None,
          checkpoint_glob=None, **extra):
    """The policy document, or None when nothing of a run was asked for (a plain job). `extra` are
    the document's own keys passed through (checkpoint_every_s)."""
    asked = dict(max_retries=max_retries, retry_on=retry_on, checkpoint_dir=checkpoint_dir, resume_arg=resume_arg,
                 stall_after=stall_after, max_runtime=max_runtime, keep_checkpoints=keep_checkpoints, notify=notify,
                 keep_best=keep_best, share_checkpoint_dir=share_checkpoint_dir or None,
                 checkpoint_glob=checkpoint_glob)
    if all(v in (None, "") for v in asked.values()) and not extra:
        return None
    max_retries = None if max_retries is None else str(max_retries)
    keep_checkpoints = None if keep_checkpoints is None else str(keep_checkpoints)
    from ..onbox.triage.signatures import CLASS_NAMES

    policy = {"max_retries": _whole("--max-retries", max_retries, 0, retrypolicy.MAX_RETRIES) or 0}
    if retry_on:
        try:
            policy["retry_on"] = sorted(retrypolicy.parse_retry_on(retry_on, known=CLASS_NAMES))
        except ValueError as e:
            raise UsageError(str(e)) from None
    directory, glob = split_checkpoint_dir(checkpoint_dir)
    if checkpoint_glob:
        if glob:
            raise UsageError("give the glob once: --checkpoint-dir DIR:GLOB or --checkpoint-glob GLOB")
        glob = _glob("--checkpoint-glob", checkpoint_glob)
    if resume_arg is not None:
        _resume_words(resume_arg)
    if (resume_arg or keep_checkpoints or keep_best or share_checkpoint_dir or glob) and not directory:
        raise UsageError("--resume-arg, --keep-checkpoints, --keep-best, --share-checkpoint-dir and --checkpoint-glob "
                         "need --checkpoint-dir DIR[:GLOB]: where the job writes its checkpoints")
    if keep_best:
        _glob("--keep-best", keep_best)
    if notify is not None and not str(notify).strip():
        raise UsageError("--notify takes a command line run on the box with each event on its stdin, e.g. "
                         "'curl -d @- https://ntfy.sh/TOPIC'")
    policy.update(checkpoint_dir=directory, checkpoint_glob=glob, resume_arg=resume_arg,
                  stall_after_s=_duration("--stall-after", stall_after),
                  max_runtime_s=_duration("--max-runtime", max_runtime),
                  keep_checkpoints=_whole("--keep-checkpoints", keep_checkpoints, 1, onbox_policy.MAX_KEEP),
                  keep_best=keep_best or None, share_checkpoint_dir=True if share_checkpoint_dir else None,
                  notify=notify, xid_kinds={str(code): x.kind for code, x in xid.TABLE.items() if x.kind != xid.OTHER})
    policy.update(extra)
    return {k: v for k, v in policy.items() if v is not None}


def _glob(flag, pattern: str):
    try:
        return checkpoints.check_glob(pattern)
    except ValueError as e:
        raise UsageError(f"{flag}: {e}") from None


def split_checkpoint_dir(text):
    """(directory, glob or None) of `DIR[:GLOB]` (a part after the last colon that holds a slash
    is the directory's own); UsageError for a glob that names more than the directory's entries."""
    if not text:
        return None, None
    text = str(text)
    directory, colon, glob = text.rpartition(":")
    if not colon or "/" in glob:
        return text, None
    if not glob:
        return directory or None, None
    try:
        checkpoints.check_glob(glob)
    except ValueError as e:
        raise UsageError(f"--checkpoint-dir {text!r}: {e}") from None
    return directory or ".", glob


def check_command(kind, command, policy):
    """UsageError when the policy's --resume-arg cannot reach the command's program (appended after a
    pipe, into a comment ...: gpuops.onbox.run.cmdtail); the box checks the same again."""
    try:
        onbox_policy.placed(kind, command, None, (policy or {}).get("resume_arg"))
    except onbox_policy.JobError as e:
        raise UsageError(str(e)) from None


def _resume_words(text: str):
    try:
        onbox_policy.resume_words(text, "/")
    except onbox_policy.JobError as e:
        raise UsageError(str(e)) from None


def summary(policy):
    """One line a person reads of what the policy does."""
    if not policy:
        return ""
    parts = [f"up to {policy.get('max_retries', 0)} retries"]
    if policy.get("checkpoint_dir"):
        parts.append(f"resuming from the newest complete checkpoint in {policy['checkpoint_dir']}")
    for key, said in (("stall_after_s", "stall kill after"), ("max_runtime_s", "max runtime")):
        if policy.get(key):
            parts.append(f"{said} {policy[key]:g}s")
    if policy.get("keep_checkpoints"):
        parts.append(f"keeping {policy['keep_checkpoints']} checkpoints")
    if policy.get("notify"):
        parts.append("notifying on events")
    return ", ".join(parts)
