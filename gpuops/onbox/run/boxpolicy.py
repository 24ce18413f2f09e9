"""A run's policy as its supervisor receives it, checked on the box before anything starts, and
what it makes of an attempt's command: the resume argument with the checkpoint it resumes from.

The policy (the workstation checks the same rules first; gpuops.jobs.runpolicy writes it):

    max_retries       attempts after the first, 0 to retrypolicy.MAX_RETRIES
    retry_on          failure classes retried (triage's names; default: retrypolicy.TRANSIENT)
    checkpoint_dir    where the job writes checkpoints (relative to its workdir), with
    checkpoint_glob   the names that are checkpoints in it (default: the names the libraries
                      write, gpuops.onbox.run.ckptnames)
    resume_arg        text with {checkpoint}, added to the command of each attempt that resumes
    stall_after_s     no progress line for this long ends the attempt (class hang)
    max_runtime_s     the whole run's wall clock, retries included: then TIMEOUT, never retried
    keep_checkpoints  complete checkpoints kept (older ones pruned; never the newest complete,
                      never the best: gpuops.onbox.run.retention)
    keep_best         a glob of checkpoint names retention never deletes
    share_checkpoint_dir  true: another live run may use the same checkpoint directory (refused
                      at launch otherwise: each run's retention would prune the other's)
    notify            a command run on the box with each event as JSON on its stdin
    xid_kinds         {Xid code: fatal | application | other}, from the workstation's table
    grace_s           seconds between SIGTERM and SIGKILL when the supervisor ends an attempt
    backoff_s         the first backoff before a retry (retrypolicy.BACKOFF_BASE_S); it doubles with
                      each failure in a row that made no new step
    checkpoint_every_s  how often the checkpoint directory is looked at (runwatch.CHECKPOINT_EVERY_S)
    gang              a gang node's place: {node, nodes, token, bind (node 0: the address it listens
                      on) or head and port (the others: where node 0's supervisor listens)}
                      (gpuops.onbox.gang.ganglink)

A checkpoint's name comes from the box's disk and is untrusted: it reaches the command as one
quoted word (shlex.quote, in a command line bash reads) or one argv word (a script's arguments),
never through a shell unquoted; checkpoints.unsafe names are never returned at all.
"""

import os
import shlex

from . import checkpoints, cmdtail
from ..triage import retrypolicy
from ..host.jobrecord import JobError

PLACEHOLDER = "{checkpoint}"
RESUME_ENV = "GPUOPS_RESUME_FROM"
MAX_S = 366 * 86400.0
MAX_KEEP = 100000
NOTIFY_MAX = 4096
GRACE_S = 10.0
_DURATIONS = ("stall_after_s", "max_runtime_s", "grace_s", "backoff_s", "checkpoint_every_s")


def _usage(message):
    return JobError("usage", message)


def _number(policy, key, low, high, integer=False):
    value = policy.get(key)
    if value is None:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not low <= value <= high:
        raise _usage("run policy: %s takes %s from %g to %g, not %r" % (
            key, "a whole number" if integer else "seconds", low, high, value))
    return value


def writable_dir(path):
    """Why the job could not write checkpoints under `path` (it may not exist yet: its nearest
    existing ancestor must then be a directory the job can create it in), or None."""
    probe = path
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        return "%s is not a directory" % probe
    if not os.access(probe, os.W_OK | os.X_OK):
        return "%s is not writable by the job's user" % probe
    return None


def check(policy, workdir):
    """The policy with its checkpoint directory made absolute (against the job's working
    directory), or JobError("usage") for one that cannot work. None stays None."""
    if policy is None:
        return None
    if not isinstance(policy, dict):
        raise _usage("run policy: not an object")
    out = dict(policy)
    try:
        out["max_retries"] = retrypolicy.check_max_retries(policy.get("max_retries") or 0)
        if policy.get("retry_on") is not None:
            out["retry_on"] = sorted(retrypolicy.parse_retry_on(",".join(map(str, policy["retry_on"]))))
        for key in ("checkpoint_glob", "keep_best"):
            if policy.get(key) is not None:
                checkpoints.check_glob(policy[key])
    except (ValueError, TypeError) as e:
        raise _usage(str(e))
    for key in _DURATIONS:
        _number(policy, key, 0.001, MAX_S)
    _number(policy, "keep_checkpoints", 1, MAX_KEEP, integer=True)
    resume = policy.get("resume_arg")
    if resume is not None:
        resume_words(resume, "/")  # refuses a text without the placeholder, or one bash cannot split
    if (resume is not None or policy.get("keep_checkpoints")) and not policy.get("checkpoint_dir"):
        raise _usage("--resume-arg and --keep-checkpoints need --checkpoint-dir: where the job writes checkpoints")
    notify = policy.get("notify")
    if notify is not None and (not isinstance(notify, str) or not notify.strip() or len(notify) > NOTIFY_MAX
                               or "\0" in notify):
        raise _usage("--notify takes a command line of at most %d characters" % NOTIFY_MAX)
    if policy.get("gang") is not None:
        out["gang"] = check_gang(policy["gang"])
    if not isinstance(policy.get("share_checkpoint_dir", False), bool):
        raise _usage("run policy: share_checkpoint_dir is true or false")
    where = policy.get("checkpoint_dir")
    if where is not None:
        if not isinstance(where, str) or not where or "\0" in where:
            raise _usage("--checkpoint-dir takes a directory")
        where = os.path.abspath(os.path.join(workdir or os.path.expanduser("~"), os.path.expanduser(where)))
        why = writable_dir(where)
        if why:
            raise _usage("--checkpoint-dir %s: the job cannot write checkpoints there (%s)" % (where, why))
        out["checkpoint_dir"] = where
    return out


def check_sharing(policy, live):
    """JobError("usage") when a live run of `live` [(run id, its policy)] has this policy's checkpoint
    directory, one holding it or one inside it, unless both runs said they share it. The nodes of
    one gang (the same gang token) are one run: they share it by design."""
    mine = (policy or {}).get("checkpoint_dir")
    if not mine:
        return
    gang = (policy.get("gang") or {}).get("token")
    for run_id, other in live:
        theirs = (other or {}).get("checkpoint_dir")
        if not theirs or (policy.get("share_checkpoint_dir") and other.get("share_checkpoint_dir")):
            continue
        if gang and (other.get("gang") or {}).get("token") == gang:
            continue
        inside = os.path.commonpath([mine, theirs]) in (mine, theirs)
        if inside:
            raise _usage("--checkpoint-dir %s: run %s is using %s, and each run's resume and retention would take "
                         "the other's checkpoints for its own; give this run a directory of its own, or pass "
                         "--share-checkpoint-dir to both" % (mine, run_id, theirs))


def _gang_value(gang, key, kind, ok):
    value = gang.get(key)
    if isinstance(value, bool) or not isinstance(value, kind) or not ok(value):
        raise _usage("run policy: gang %s is missing or not one gpuops writes: %r" % (key, value))
    return value


def check_gang(gang):
    """A gang node's place in the policy, checked (JobError("usage") for one gpuops did not write)."""
    if not isinstance(gang, dict):
        raise _usage("run policy: gang is not an object")
    nodes = _gang_value(gang, "nodes", int, lambda v: 2 <= v <= 64)
    node = _gang_value(gang, "node", int, lambda v: 0 <= v < nodes)
    _gang_value(gang, "token", str, lambda v: len(v) == 32 and all(c in "0123456789abcdef" for c in v))
    out = {"node": node, "nodes": nodes, "token": gang["token"]}
    host = (lambda v: 0 < len(v) <= 253 and all(c.isalnum() or c in ".:-" for c in v))
    if node == 0:
        out["bind"] = _gang_value(gang, "bind", str, host)
    else:
        out["head"] = _gang_value(gang, "head", str, host)
        out["port"] = _gang_value(gang, "port", int, lambda v: 0 < v < 65536)
    return out


def resume_words(text: str, checkpoint):
    """The words of a --resume-arg with {checkpoint} replaced by the checkpoint's path in each word
    that holds it (`--resume={checkpoint}` stays one word). JobError("usage") for a text without
    the placeholder, or one that cannot be split into words."""
    if not isinstance(text, str) or PLACEHOLDER not in text:
        raise _usage("--resume-arg must say where the checkpoint goes with %s, e.g. '--resume %s'" % (
            PLACEHOLDER, PLACEHOLDER))
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise _usage("--resume-arg %r cannot be split into words: %s" % (text, e))
    return [w.replace(PLACEHOLDER, checkpoint) for w in words]


def placed(kind, command, args, resume_arg):
    """JobError("usage") when a run's resume cannot reach its program: --resume-arg appended to a
    command line whose end is not its program's (gpuops.onbox.run.cmdtail), unless --cmd says where
    with {checkpoint}."""
    if not resume_arg:
        return
    if kind == "script" or PLACEHOLDER in (command or ""):
        return
    why = cmdtail.problem(command or "")
    if why:
        raise _usage("--resume-arg cannot be added to the end of --cmd: %s. Put %s in --cmd where the resume "
                     "argument goes, e.g. 'python3 train.py %s | tee out.log'" % (why, PLACEHOLDER, PLACEHOLDER))


def resumed(kind, body, args, command, resume_arg, checkpoint):
    """(body, args, command) of an attempt that resumes from `checkpoint` (None: one that starts
    fresh). Where a command line holds {checkpoint}, that is where it goes: the --resume-arg's words
    (none on a fresh start), or without one the checkpoint's path ('' on a fresh start, so
    `--resume {checkpoint}` stays two words). Elsewhere the --resume-arg's words go at the end of
    a command line, or after a script's arguments. Each word reaches bash quoted (one word,
    whatever the name holds)."""
    if resume_arg:
        words = resume_words(resume_arg, checkpoint) if checkpoint else []
    else:
        words = [checkpoint or ""]
    if kind == "script":  # a script's own text is the user's file: its arguments take the words
        return body, list(args or []) + (words if resume_arg else []), command
    text = " ".join(shlex.quote(w) for w in words)
    if PLACEHOLDER.encode() in body:
        placed = body.replace(PLACEHOLDER.encode(), text.encode("utf-8"))
        return placed, args, (command or "").replace(PLACEHOLDER, text)
    if not (resume_arg and checkpoint):
        return body, args, command
    return body.rstrip(b"\n") + b" " + text.encode("utf-8") + b"\n", args, (command or "").rstrip("\n") + " " + text
