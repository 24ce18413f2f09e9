"""What push, pull and verify share: options, engine choice, budget, transfer, verification, result.

push (gpuops.ops.push), pull (gpuops.ops.pull) and verify (gpuops.ops.verify) plan from two
manifests, check the budget, transfer, then prove it.

The steps of push and pull are the same with the ends swapped:

  1. walk the source with its rules (.git, .gpuopsignore, --exclude) and the destination with the
     same rules; the remote end answers in one round trip, with its free bytes and inodes;
  2. hash the files whose sizes agree on both ends (any other difference already decides);
  3. refuse before sending anything when the payload does not fit (exit 5, with the numbers);
  4. create the destination directory, transfer the differing paths (rsync when both ends have
     it, else SFTP), hashing the local copies meanwhile;
  5. hash what was sent on both ends and compare; repair mismatches once; the exit status is
     the verification result.

A verified pull also writes its manifest next to the data (`.NAME.gpuops-manifest.json` beside
the directory NAME, outside its tree) and records the pull in the
local pull index, which is the evidence `teardown-check` relies on.
"""

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from .. import errors
from ..envelope import envelope, step
from ..findings import Finding, worst_first
from ..onbox.host import plans
from ..remote import wrap
from ..sync import diskfit, link, plan, stripes, tree
from ..sync.outcome import DISK_FULL, FATAL, TRANSPORT, Outcome, merge
from ..sync.progress import Silent
from ..sync.retry import Backoff
from ..units import human_bytes

ENGINES = ("auto", "rsync", "sftp")
LIST_LIMIT = 200


@dataclass
class Options:
    excludes: tuple = ()
    include_git: bool = False
    delete: bool = False
    yes: bool = False
    fix_crlf: bool = False
    engine: str = "auto"
    check_budget: bool = True
    io_timeout: float = 30.0
    retry_for: float = 300.0
    profile: Optional[str] = None
    rehash: bool = False
    plan: Optional[str] = None  # with delete and yes: the plan_id the dry run showed
    compress: bool = False
    streams: Optional[int] = None  # None: as many as the measured link pays for (gpuops.sync.stripes)
    progress: Silent = field(default_factory=Silent)

    def backoff(self) -> Backoff:
        return Backoff(budget_s=self.retry_for)

    @property
    def cache(self) -> str:
        return tree.cache_mode(self.rehash)


def local_root(path, role, must_exist):
    if not path:
        raise errors.UsageError(f"{role} is required")
    root = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(root) and not os.path.isdir(root):
        raise errors.UsageError(f"{role} {path!r} is a file; give a directory")
    if must_exist and not os.path.isdir(root):
        raise errors.NotFound(f"{role} {path!r} does not exist")
    above = os.path.dirname(root)
    while not os.path.lexists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):  # it could never be created: say so before anything is walked or locked
        raise errors.UsageError(f"{role} {path!r} is under {above!r}, which is a file; give a directory")
    return root


def check_remote_root(doc, role, path, must_exist, host: str):
    if doc["exists"] and not doc["is_dir"]:
        raise errors.UsageError(f"{role} {host}:{path} is a file; give a directory")
    if must_exist and not doc["exists"]:
        raise errors.NotFound(f"{role} {host}:{path} does not exist")


def choose_engine(requested, target, remote_rsync, findings, compress=False):
    from ..sync import rsync as rs

    if requested not in ENGINES:
        raise errors.UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {requested!r}")
    local_version = rs.version()
    if target.is_local:
        if requested == "sftp":
            raise errors.UsageError("--engine sftp needs a remote --host")
        if not local_version:
            raise errors.UsageError("a local sync needs rsync on this machine")
        return "rsync", local_version
    missing = [w for w, ok in (("this machine", local_version), (target.name, remote_rsync)) if not ok]
    if requested == "rsync" and missing:
        raise errors.UsageError(f"--engine rsync: rsync is not installed on {' and '.join(missing)}")
    if requested == "sftp" or missing:
        if requested == "sftp" and compress:
            raise errors.UsageError("--compress needs the rsync engine: SFTP sends the bytes as they are")
        if requested == "auto":
            findings.append(Finding("sync.engine", "info", f"rsync is missing on {' and '.join(missing)}: using SFTP "
                                    "(per-file resume, no delta transfer" + (", no --compress)" if compress else ")"),
                                    fix="install rsync on both ends for delta transfers"))
        return "sftp", local_version
    return "rsync", local_version


def measure_early(early, target, src_map, opts) -> None:
    """push: start measuring the link (gpuops.sync.striped.Early) once this end's tree is walked,
    while the box lists the destination, when what may be sent is worth several streams."""
    nbytes = sum(e.size for e in src_map.values() if e.kind == "f")
    if opts.streams is None and opts.engine != "sftp" and not target.is_local and nbytes >= stripes.MIN_BYTES:
        early.start()


def make_engine(name: str, version, target, direction, local_root, remote_root, src_map, opts, backoff, make_root=False,
                early=None):
    if name == "rsync":
        from ..sync.rsync import RsyncEngine

        from ..sync.striped import StripedEngine

        single = RsyncEngine(direction, local_root, remote_root, target=None if target.is_local else target,
                             io_timeout=opts.io_timeout, backoff=backoff, progress=opts.progress,
                             rsync_version=version, make_root=make_root, compress=opts.compress)
        return single if target.is_local else StripedEngine(single, target, direction, src_map, opts.streams, early)
    from ..sync.sftp import SftpEngine

    return SftpEngine(target, direction, local_root, remote_root, src_map, io_timeout=opts.io_timeout,
                      backoff=backoff, progress=opts.progress,
                      remote_free=lambda: tree.free_space(target, remote_root, backoff))


def check_budget(src_map, dst_map, send, space, root_exists, where, opts, findings):
    needed = diskfit.need(src_map, dst_map, send, root_exists)
    verdict = diskfit.check(needed, space or {})
    if not verdict["fits"]:
        if opts.check_budget:
            raise errors.Refused(diskfit.refusal(verdict, where))
        findings.append(Finding("sync.budget", "warn", "the payload may not fit; sending anyway (--no-budget)",
                                evidence=verdict, gotcha="U7"))
    return verdict


def check_small_files(src_map, send, opts, findings) -> None:
    """A payload of many small files is slow to send and slow to read: a finding of the report,
    said once, after the verdict (a line above the bar said it first, and the report again)."""
    evidence = diskfit.small_files(src_map, send)
    if evidence:
        title = (f"{evidence['files']:,} files of median size {evidence['median_size']}: per-file costs will "
                 "dominate the transfer and the reads that follow")
        findings.append(Finding("sync.small-files", "warn", title, evidence=evidence, gotcha="U25",
                                fix="tar -cf shard-000.tar <dir>   # pack into shards of a few hundred MB, "
                                    "send those, read them with WebDataset-style loaders"))


def command(verb, host: str, src, dst, opts) -> list:
    """The argv that runs this sync again, with the options that decide what it sends (and, with
    --delete, what it lists for deletion: a plan is the same plan only for the same selection)."""
    argv = ["gpuops", verb, "--host", host, "--src", src, "--dst", dst]
    for pattern in opts.excludes:
        argv += ["--exclude", pattern]
    for flag, on in (("--include-git", opts.include_git), ("--fix-crlf", opts.fix_crlf), ("--delete", opts.delete)):
        argv += [flag] if on else []
    if opts.engine != "auto":
        argv += ["--engine", opts.engine]
    if opts.profile:
        argv += ["--profile", opts.profile]
    if opts.compress:
        argv.append("--compress")
    if opts.streams is not None:
        argv += ["--streams", str(opts.streams)]
    return argv


def cut(items):
    return items[:LIST_LIMIT]


def full_by_measure(outcome, free_bytes, src_map, sent) -> None:
    """rsync can exit 11 (file I/O error) with its "No space left" message lost on the way back;
    then the destination's free space decides: too little for the biggest file sent means full."""
    failure = outcome.failure
    if not failure or failure["kind"] != FATAL or not outcome.attempts or outcome.attempts[-1].exit != 11:
        return
    biggest = max((src_map[r].size for r in sent if src_map[r].kind == "f"), default=0)
    try:
        free = free_bytes()
    except errors.GpuopsError:
        return
    if free is not None and free < biggest:
        outcome.fail(DISK_FULL, f"the destination filled up: {free} B free, the biggest file is {biggest} B "
                                f"({failure['message']})")


def _offer_compression(measured, outcome, local_root, src_map, sent, rerun, findings) -> None:
    """A slow link carrying data that compresses (U15): said with the rate seen and the flag."""
    if outcome.compressed or measured is None or measured["bytes_per_s"] >= link.SLOW_BYTES_S:
        return
    ratio = link.sample_ratio(local_root, [(r, src_map[r].size) for r in sent if src_map[r].kind == "f"])
    saved = link.offer(measured, ratio)
    if saved is None:
        return
    findings.append(Finding(
        "sync.slow-link", "info",
        f"the link carried {human_bytes(measured['bytes_per_s'])}/s over {measured['seconds']:.0f}s, and a sample of "
        f"the data compresses to {ratio:.0%}: --compress would have sent about {1 - ratio:.0%} less (~{saved:.0f}s)",
        evidence={**measured, "sample_ratio": round(ratio, 3), "saved_s": round(saved, 1)},
        fix=wrap.join(rerun + ["--compress"]), gotcha="U15"))


def engine_failure(outcome, verb) -> str:
    kind = outcome.failure["kind"]
    message = outcome.failure["message"]
    if kind == DISK_FULL:
        return f"{verb} failed: {message}; files already complete are intact, nothing half-written carries a final name"
    return f"{verb} failed: {message}"


def check_plan(extras, opts):
    """With --plan: Refused, naming the new plan, unless `extras` are still exactly the plan's
    paths. Checked before anything moves, and again right before deleting."""
    if opts.plan is None:
        return
    expires = plans.expiry(opts.plan)
    if expires is None:
        raise errors.UsageError(f"--plan {opts.plan!r} is not a plan id (a dry run of --delete shows one)")
    if plans.plan_id("delete", None, extras, expires) != opts.plan or expires < time.time():
        raise errors.Refused(f"plan {opts.plan} no longer matches the {len(extras)} path(s) that exist only at the "
                             f"destination (or has expired); nothing was deleted; new plan {_plan(extras)[0]}")


def _plan(extras):
    expires = plans.expires_at()
    return plans.plan_id("delete", None, extras, expires), expires


def may_delete(extras, opts, findings) -> bool:
    """Deleting is destructive: without --yes the extras are only listed, with the plan_id that
    --yes --plan takes; with a plan, only that plan's paths are deleted (check_plan)."""
    check_plan(extras, opts)
    if extras and not opts.yes:
        plan_id, expires = _plan(extras)
        findings.append(Finding("sync.would-delete", "info", f"{len(extras)} path(s) exist only at the destination; "
                                "--delete removes them only with --yes", evidence={
                                    "paths": cut(extras), "plan_id": plan_id, "expires_at": expires}))
    return bool(extras) and opts.yes


class Idle:
    ready = threading.Event()
    ready.set()

    def join(self, timeout=None) -> None:
        pass

    def settle(self, target, wait_s) -> None:
        pass


def transfer(target, engine, send, src_map, progress, verb):
    files = [r for r in send if src_map[r].kind == "f"]
    if not send:
        return Outcome(engine.name)
    progress.start(sum(src_map[r].size for r in files), f"{verb} ({engine.name})", files=len(files))
    try:
        outcome = engine.run(send)
    finally:
        progress.close()
    if any(a.outcome == "retry" for a in outcome.attempts):
        # Whatever cut or froze the transfer's link most likely took gpuops' own connection
        # with it: verify over a fresh one rather than wait for keepalives to declare it dead.
        target.close()
    return outcome


def verify_and_repair(sent, src_map, dst_map, check, engine, outcome, progress, src_name: str, dst_name: str):
    """Re-read what was sent on both ends and compare; send mismatches once more, forced."""
    if not sent:
        return []
    check(sent)
    mism = plan.mismatches(src_map, dst_map, [r for r in sent if r in src_map], src_name, dst_name)
    if mism and outcome.failure is None:
        again = [m["path"] for m in mism]
        progress.stage(f"{len(again)} path(s) differ after the transfer; sending them again")
        repaired = engine.run(again, force=True)
        merge(outcome, repaired)
        check(again)
        mism = plan.mismatches(src_map, dst_map, [r for r in sent if r in src_map], src_name, dst_name)
    return mism


def mismatch_finding(mism, verb, again):
    """What verify_and_repair left different after its forced resend: the sync is not verified."""
    return Finding("sync.mismatch", "fail", f"{len(mism)} path(s) differ after the {verb}",
                   evidence={"paths": [m["path"] for m in mism[:20]]}, fix=again, gotcha="U33")


def moved_and_kept(verb, src_map, p, outcome) -> str:
    """'sent 12 files, 20.0 MiB; 202 files, 280.0 MiB were already on the box, and 15.9 MiB of
    partial files resumed': what crossed the link in the verb's direction, and what the
    destination already held: complete files (an earlier run's, an interrupted one's) counted as
    files, partial ones as the bytes a resume kept. A resumed push said only the partial bytes."""
    moved = "sent" if verb == "push" else "received"
    sent = sum(1 for rel in p.send if rel in src_map and src_map[rel].kind == "f")
    text = f"{moved} {sent} files, {human_bytes(outcome.bytes_sent)}"
    kept = [src_map[rel] for rel in p.equal if rel in src_map and src_map[rel].kind == "f"]
    there = "on the box" if verb == "push" else "here"
    if kept:
        text += f"; {len(kept)} files, {human_bytes(sum(e.size for e in kept))} were already {there}"
    if outcome.bytes_reused:
        text += f"{', and' if kept else ';'} {human_bytes(outcome.bytes_reused)} of partial files resumed"
    return text


def failure_finding(kind, summary, again):
    """A transfer that failed for good: the destination filled up (U7) or the link kept dropping
    until the retry budget ran out (U12)."""
    return Finding(f"sync.{kind}", "fail", summary, fix=again, gotcha="U7" if kind == DISK_FULL else "U12")


def result(verb, target, local_root, remote_root, engine_name: str, src_map, p, outcome, mism, verdict, vanished,
            deleted, findings, backoff, tally, rerun):
    files = [e for e in src_map.values() if e.kind == "f"]
    bad = {m["path"] for m in mism}
    verified = [e for e in files if e.rel not in bad]
    data = {
        "direction": verb,
        "engine": engine_name,
        "local": local_root,
        "remote": remote_root,
        "files": len(files),
        "dirs": sum(1 for e in src_map.values() if e.kind == "d"),
        "symlinks": sum(1 for e in src_map.values() if e.kind == "l"),
        "payload_bytes": sum(e.size for e in files),
        "sent_paths": len(p.send),
        "already_equal": len(p.equal),
        "bytes_sent": outcome.bytes_sent,
        "bytes_reused": outcome.bytes_reused,
        "wire_bytes": outcome.wire_bytes,
        "bytes_verified": sum(e.size for e in verified),
        "files_verified": len(verified),
        "retries": backoff.retries,
        "attempts": [a.__dict__ for a in outcome.attempts],
        "mismatches": cut(mism),
        "mismatch_count": len(mism),
        "extras": cut(p.extras),
        "extra_count": len(p.extras),
        "deleted": cut(deleted),
        "vanished": cut(vanished),
        "skipped_special": cut(p.skipped),
        "budget": verdict,
        "hashing": tally.sides,
        "link": link.measure(outcome),
        "verified": not mism and outcome.failure is None,
    }
    if outcome.failure is None:
        _offer_compression(data["link"], outcome, local_root, src_map, p.send, rerun, findings)
    if outcome.file_errors:
        data["file_errors"] = cut(outcome.file_errors)
    if vanished:
        findings.append(Finding("sync.vanished", "warn", f"{len(vanished)} source file(s) disappeared during the sync",
                                evidence={"paths": cut(vanished)}))
    if p.skipped:
        findings.append(Finding("sync.special", "info", f"{len(p.skipped)} socket/fifo/device file(s) not synced",
                                evidence={"paths": cut(p.skipped)}))
    again = wrap.join(rerun)
    if mism:
        findings.append(mismatch_finding(mism, verb, again))
    error = None
    if outcome.failure:
        summary = engine_failure(outcome, verb)
        findings.append(failure_finding(outcome.failure["kind"], summary, again))
        if outcome.failure["kind"] == TRANSPORT:
            error = {"kind": errors.Unreachable.kind, "message": f"{target.name}: {summary}"}
        summary += f" ({len(verified)} of {len(files)} files verified)"
    elif mism:
        summary = (f"{verb} NOT verified: {len(mism)} path(s) differ ({', '.join(m['path'] for m in mism[:3])}"
                   f"{', ...' if len(mism) > 3 else ''})")
    else:
        summary = (f"{verb} verified: {len(files)} files, {human_bytes(data['payload_bytes'])} "
                   f"({moved_and_kept(verb, src_map, p, outcome)}; {data['retries']} retries)")
    ok = data["verified"]
    nxt = [] if ok else [step(*rerun, why="resumes: partial files are kept")]
    listed = next((f for f in findings if f.id == "sync.would-delete"), None)
    if listed is not None:
        nxt.append(step(*rerun, "--yes", "--plan", listed.evidence["plan_id"],
                        why="deletes exactly the paths listed, or refuses if they changed"))
    return envelope(verb, ok=ok, summary=summary, host=target.name, data=data, findings=worst_first(findings),
                    next=nxt, error=error)
