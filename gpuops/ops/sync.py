"""push, pull and verify: plan from two manifests, check the budget, transfer, then prove it.

The steps of push and pull are the same with the ends swapped:

  1. walk the source with its rules (.git, .gpuopsignore, --exclude) and the destination with the
     same rules; the remote end answers in one round trip, with its free bytes and inodes;
  2. hash the files whose sizes agree on both ends (any other difference already decides);
  3. refuse before sending anything when the payload does not fit (exit 5, with the numbers);
  4. create the destination directory, transfer the differing paths (rsync when both ends have
     it, else SFTP), hashing the local copies meanwhile;
  5. hash what was sent on both ends and compare; repair mismatches once; the exit status is
     the verification result.

A verified pull also writes `.gpuops-manifest.json` next to the data and records the pull in the
local pull index, which is the evidence `teardown-check` relies on.
"""

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from .. import errors, pullindex
from ..envelope import envelope
from ..findings import Finding, worst_first
from ..onbox.ignorerules import Rules
from ..sync import budget, crlf, plan, rules, tree
from ..sync.outcome import DISK_FULL, FATAL, TRANSPORT, Outcome
from ..sync.progress import Silent
from ..sync.retry import Backoff

# Entries the first manifest request is given time to walk before the box's timeout stops it;
# it is sent before the local walk has counted them.
_WALK_BOUND = 1_000_000

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
    progress: object = field(default_factory=Silent)

    def backoff(self) -> Backoff:
        return Backoff(budget_s=self.retry_for)

    @property
    def cache(self) -> str:
        return tree.cache_mode(self.rehash)


# ---------------------------------------------------------------------------------------------
# shared steps


def _local_root(path, role, must_exist):
    if not path:
        raise errors.UsageError(f"{role} is required")
    root = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(root) and not os.path.isdir(root):
        raise errors.UsageError(f"{role} {path!r} is a file; give a directory")
    if must_exist and not os.path.isdir(root):
        raise errors.NotFound(f"{role} {path!r} does not exist")
    return root


def _check_remote_root(doc, role, path, must_exist, host):
    if doc["exists"] and not doc["is_dir"]:
        raise errors.UsageError(f"{role} {host}:{path} is a file; give a directory")
    if must_exist and not doc["exists"]:
        raise errors.NotFound(f"{role} {host}:{path} does not exist")


def _choose_engine(requested, target, remote_rsync, findings):
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
        if requested == "auto":
            findings.append(Finding("sync.engine", "info", f"rsync is missing on {' and '.join(missing)}: using SFTP "
                                    "(per-file resume, no delta transfer)",
                                    fix="install rsync on both ends for delta transfers"))
        return "sftp", local_version
    return "rsync", local_version


def _engine(name, version, target, direction, local_root, remote_root, src_map, opts, backoff, make_root=False):
    if name == "rsync":
        from ..sync.rsync import RsyncEngine

        return RsyncEngine(direction, local_root, remote_root, spec=None if target.is_local else target.spec,
                           io_timeout=opts.io_timeout, backoff=backoff, progress=opts.progress,
                           rsync_version=version, make_root=make_root)
    from ..sync.sftp import SftpEngine

    return SftpEngine(target, direction, local_root, remote_root, src_map, io_timeout=opts.io_timeout,
                      backoff=backoff, progress=opts.progress,
                      remote_free=lambda: tree.free_space(target, remote_root, backoff))


def _merge(total: Outcome, more: Outcome):
    total.attempts += more.attempts
    total.bytes_sent += more.bytes_sent
    total.bytes_reused += more.bytes_reused
    total.wire_bytes += more.wire_bytes
    total.vanished += more.vanished
    total.file_errors += more.file_errors
    total.failure = more.failure or total.failure


def _budget(src_map, dst_map, send, space, root_exists, where, opts, findings):
    needed = budget.need(src_map, dst_map, send, root_exists)
    verdict = budget.check(needed, space or {})
    if not verdict["fits"]:
        if opts.check_budget:
            raise errors.Refused(budget.refusal(verdict, where))
        findings.append(Finding("sync.budget", "warn", "the payload may not fit; sending anyway (--no-budget)",
                                evidence=verdict, gotcha="U7"))
    return verdict


def _vanished(root, src_map, rels):
    """Source files that were listed but are gone now (a job deleted them mid-sync). Asked of the
    filesystem, not of the digest: a cached digest does not prove the file is still there."""
    gone = [r for r in rels if src_map[r][1] == "f"
            and not os.path.lexists(os.path.join(os.fsencode(root), r.encode("utf-8", "surrogateescape")))]
    for r in gone:
        del src_map[r]
    return gone


def _command(verb, host, src, dst) -> str:
    """A command line to suggest, quoted so it can be pasted."""
    from ..remote import wrap

    return f"gpuops {verb} --host {wrap.quote(host)} --src {wrap.quote(src)} --dst {wrap.quote(dst)}"


def _cut(items):
    return items[:LIST_LIMIT]


def _full_by_measure(outcome, free_bytes, src_map, sent):
    """rsync can exit 11 (file I/O error) with its "No space left" message lost on the way back;
    then the destination's free space decides: too little for the biggest file sent means full."""
    failure = outcome.failure
    if not failure or failure["kind"] != FATAL or not outcome.attempts or outcome.attempts[-1].exit != 11:
        return
    biggest = max((src_map[r][2] for r in sent if src_map[r][1] == "f"), default=0)
    try:
        free = free_bytes()
    except errors.GpuopsError:
        return
    if free is not None and free < biggest:
        outcome.fail(DISK_FULL, f"the destination filled up: {free} B free, the biggest file is {biggest} B "
                                f"({failure['message']})")


def _engine_failure(outcome, verb):
    kind = outcome.failure["kind"]
    message = outcome.failure["message"]
    if kind == DISK_FULL:
        return f"{verb} failed: {message}; files already complete are intact, nothing half-written carries a final name"
    return f"{verb} failed: {message}"


# ---------------------------------------------------------------------------------------------
# push


def push(target, src, dst, opts: Options) -> dict:
    if not dst:
        raise errors.UsageError("--dst (the directory on the box) is required")
    findings = []
    backoff = opts.backoff()
    tally = tree.Tally()
    local_root = _local_root(src, "--src", must_exist=True)
    profile = _load_profile(opts.profile, findings)
    progress = opts.progress
    progress.stage(f"walking the source; asking {target.name} what is at {dst}")
    request = {**rules.request(opts.excludes, opts.include_git, read_ignore_file=True), "cache": opts.cache}
    # The box needs only the source's rule lines, known before the walk: one round trip, sent
    # now so that it (and the box's own walk) overlaps the local walk, answers what is there with
    # the digests its cache holds, and how much room is left. First contact fails fast: retries
    # are for a box that answered once and then dropped.
    asked = tree.Pending(target, dst, {**rules.fixed(tree.rule_lines(local_root, request)), "hash": "cached",
                                       "space": True, "cache": opts.cache},
                         timeout_s=tree.budget_s(nentries=_WALK_BOUND), tally=tally)
    scan = tree.local(local_root, request)
    lmap = plan.by_path(scan.doc["entries"])
    _crlf(scan, lmap, opts, findings)
    # Every local file's digest is needed sooner or later (to compare, or to verify what was
    # sent), so hashing starts now and overlaps the round trip and the transfer.
    hasher = tree.Hasher(scan)
    rdoc = asked.result()
    _check_remote_root(rdoc, "--dst", dst, False, target.name)
    remote_root = rdoc["root"]
    rmap = plan.by_path(rdoc["entries"])
    same = plan.same_size_files(lmap, rmap)
    _hash_uncached(target, remote_root, rmap, same, opts, tally)
    hasher.wait(same)
    p = plan.make(lmap, rmap)
    _profile(profile, remote_root, findings)
    verdict = _budget(lmap, rmap, p.send, rdoc["space"], rdoc["exists"], f"{target.name}:{remote_root}", opts,
                      findings)
    engine_name, version = _choose_engine(opts.engine, target, rdoc.get("rsync"), findings)
    # A missing destination is created by the engine on its way in (rsync over ssh runs mkdir
    # first, SFTP makes every parent); only a local rsync or an empty payload needs a separate call.
    engine_makes_root = bool(p.send) and not target.is_local
    if not rdoc["exists"] and not engine_makes_root:
        _mkdir_remote(target, remote_root)
    engine = _engine(engine_name, version, target, "push", local_root, remote_root, lmap, opts, backoff,
                     make_root=not rdoc["exists"])
    landing = _follow_landing(target, remote_root, p.send, lmap, rdoc["now_ns"], opts, tally)
    outcome = _transfer(target, engine, p.send, lmap, progress, "push")
    _full_by_measure(outcome, lambda: tree.free_space(target, remote_root)[0], lmap, p.send)
    vanished = _vanished(local_root, lmap, p.send)
    deleted = _delete_remote(target, remote_root, p.extras, opts, findings) if opts.delete else []
    sent = [r for r in p.send if r in lmap]

    def remote_check(rels):
        nbytes = sum(lmap[r][2] for r in rels if lmap[r][1] == "f")
        landing.ready.wait(_FOLLOW_WAIT_S)
        doc = tree.remote(target, remote_root, {"paths": list(rels) + deleted, "hash": "all", "cache": opts.cache},
                          timeout_s=tree.budget_s(nbytes, len(rels)), backoff=backoff, tally=tally)
        found = plan.by_path(doc["entries"])
        for r in list(rels) + deleted:
            rmap.pop(r, None)
        rmap.update(found)
        # The local digests were computed on a thread meanwhile; by now they are usually done.
        hasher.wait()

    progress.stage("verifying on the box")
    mism = _verify_and_repair(sent, lmap, rmap, remote_check, engine, outcome, progress, "local", "remote")
    landing.settle(target, _FOLLOW_WAIT_S if sent else 0)
    hasher.wait()
    hasher.finish(tally)
    return _result("push", target, local_root, remote_root, engine_name, lmap, p, outcome, mism, verdict,
                   vanished, deleted, findings, backoff, tally, rerun=_command("push", target.name, src, dst))


def _hash_uncached(target, root, rmap, same, opts, tally):
    """Hash on the box the same-size files its cache had no digest for (none, on a re-sync of an
    unchanged tree), and put their digests into `rmap`."""
    todo = [rel for rel in same if rmap[rel][3] is None]
    if not todo:
        return
    doc = tree.remote(target, root, {"paths": todo, "hash": "all", "cache": opts.cache},
                      timeout_s=tree.budget_s(sum(same[r] for r in todo), len(todo)), tally=tally)
    rmap.update(plan.by_path(doc["entries"]))


def _crlf(scan, lmap, opts, findings):
    found = crlf.scan(scan.root, lmap.values())
    if not found:
        return
    paths = [f["path"] for f in found]
    if opts.fix_crlf:
        fixed = crlf.fix(scan.root, paths)
        # Rewritten files have a new stat: look again, so no digest of the old bytes is reused.
        scan.restat(fixed)
        findings.append(Finding("sync.crlf-fixed", "info", f"converted {len(fixed)} shell script(s) from CRLF to LF "
                                "before sending", evidence={"files": _cut(fixed)}, gotcha="U26"))
        return
    findings.append(Finding("sync.crlf", "warn", f"{len(found)} shell script(s) have CRLF line endings and will "
                            "fail on the box", evidence={"files": _cut(paths)},
                            fix="re-run with --fix-crlf, and add '*.sh text eol=lf' to .gitattributes", gotcha="U26"))


def _load_profile(name, findings):
    """The named platform profile, loaded before anything is sent (a typo fails fast)."""
    if not name:
        return None
    try:
        from .. import profiles
    except ImportError:
        findings.append(Finding("sync.profile", "info", "platform profiles are not available in this build; "
                                "could not check whether the destination survives a stop"))
        return None
    return profiles.load(name)


def _profile(profile, remote_root, findings):
    if profile is None:
        return
    from .. import profiles

    survives, reason = profiles.destination_survives(profile, remote_root, verb="stop")
    if not survives:
        findings.append(Finding("sync.destination-lost-on-stop", "warn",
                                f"what you push to {remote_root} is deleted when the box is stopped", evidence={
                                    "profile": profile.name, "reason": reason},
                                fix="push to a tier that survives the platform's stop verb", gotcha="U20"))


def _mkdir_remote(target, path):
    from ..remote import wrap

    result = target.run("mkdir -p -- " + wrap.quote(path), timeout_s=60)
    if result.exit != 0:
        raise errors.HostError(f"{target.name}: could not create {path}: {result.err_text.strip()[:300]}")


def _may_delete(extras, opts, findings) -> bool:
    """Deleting is destructive: without --yes the extras are only listed."""
    if extras and not opts.yes:
        findings.append(Finding("sync.would-delete", "info", f"{len(extras)} path(s) exist only at the destination; "
                                "--delete removes them only with --yes", evidence={"paths": _cut(extras)}))
    return bool(extras) and opts.yes


def _delete_remote(target, root, extras, opts, findings):
    from ..remote import wrap

    if not _may_delete(extras, opts, findings):
        return []
    payload = b"\0".join(r.encode("utf-8", "surrogateescape") for r in extras) + b"\0"
    result = target.run(f"cd -- {wrap.quote(root)} && xargs -0 rm -rf --", stdin=payload, timeout_s=600)
    if result.exit != 0:
        raise errors.HostError(f"{target.name}: deleting extra paths failed: {result.err_text.strip()[:300]}")
    findings.append(Finding("sync.deleted", "info", f"deleted {len(extras)} path(s) that exist only at the destination",
                            evidence={"paths": _cut(extras)}))
    return extras


# ---------------------------------------------------------------------------------------------
# pull


def pull(target, src, dst, opts: Options) -> dict:
    if not src:
        raise errors.UsageError("--src (the directory on the box) is required")
    findings = []
    backoff = opts.backoff()
    tally = tree.Tally()
    progress = opts.progress
    local_root = _local_root(dst, "--dst", must_exist=False)
    local_req = {**rules.request(opts.excludes, opts.include_git, read_ignore_file=False), "cache": opts.cache}
    scan = tree.local(local_root, local_req)
    lmap = plan.by_path(scan.doc["entries"])
    files = {rel: e[2] for rel, e in lmap.items() if e[1] == "f"}
    hasher = tree.Hasher(scan)
    progress.stage(f"walking {target.name}:{src}")
    rdoc = tree.remote(target, src, {**rules.request(opts.excludes, opts.include_git), "hash": "want",
                                     "want": files, "cache": opts.cache},
                       timeout_s=tree.budget_s(sum(files.values()), len(files)), tally=tally)
    _check_remote_root(rdoc, "--src", src, True, target.name)
    remote_root = rdoc["root"]
    source_rules = Rules(rdoc["rules"])
    lmap = {r: e for r, e in lmap.items() if not source_rules.excluded(r, e[1] == "d")}
    rmap = plan.by_path(rdoc["entries"])
    hasher.wait(plan.same_size_files(rmap, lmap))
    hasher.stop()  # the other local files are about to be replaced or deleted: their digests do not matter
    hasher.finish(tally)
    p = plan.make(rmap, lmap)
    from ..onbox import disk

    verdict = _budget(rmap, lmap, p.send, disk.measure("destination", local_root), os.path.isdir(local_root),
                      local_root, opts, findings)
    engine_name, version = _choose_engine(opts.engine, target, rdoc.get("rsync"), findings)
    os.makedirs(local_root, exist_ok=True)
    engine = _engine(engine_name, version, target, "pull", local_root, remote_root, rmap, opts, backoff)
    warming = _warm_sources(target, remote_root, [r for r in p.send if rmap[r][1] == "f"], rmap, opts, tally)
    outcome = _transfer(target, engine, p.send, rmap, progress, "pull")
    _full_by_measure(outcome, lambda: disk.measure("destination", local_root).get("free_bytes"), rmap, p.send)
    warming.join()
    deleted = _delete_local(local_root, p.extras, opts, findings) if opts.delete else []

    def both_check(rels):
        nbytes = sum(rmap[r][2] for r in rels if rmap[r][1] == "f")
        # The local copies are hashed on a thread while the box re-reads the sources.
        fresh = tree.local(local_root, {"paths": list(rels) + deleted, "cache": opts.cache})
        local_hasher = tree.Hasher(fresh)
        doc = tree.remote(target, remote_root, {"paths": list(rels), "hash": "all", "cache": opts.cache},
                          timeout_s=tree.budget_s(nbytes, len(rels)), backoff=backoff, tally=tally)
        local_hasher.wait()
        local_hasher.finish(tally)
        for r in list(rels) + deleted:
            lmap.pop(r, None)
            rmap.pop(r, None)
        lmap.update(plan.by_path(fresh.doc["entries"]))
        rmap.update(plan.by_path(doc["entries"]))

    progress.stage("verifying both copies")
    mism = _verify_and_repair(p.send, rmap, lmap, both_check, engine, outcome, progress, "remote", "local")
    vanished = [r for r in p.send if r not in rmap]
    doc = _result("pull", target, local_root, remote_root, engine_name, rmap, p, outcome, mism, verdict, vanished,
                  deleted, findings, backoff, tally, rerun=_command("pull", target.name, src, dst))
    if doc["ok"]:
        doc["data"]["manifest"] = _record_pull(target.name, remote_root, local_root, rmap)
    return doc


class _Warming(threading.Thread):
    """Pull: hashes the sources on the box while they are sent (its disk and CPU are idle
    meanwhile) into the box's digest cache, so the verification round trip after the transfer
    only stats them. Verification still stats and compares every file exactly as before; it
    just finds the digests of unchanged files ready. A failure costs only the head start."""

    def __init__(self, target, root, rels, nbytes, cache, tally):
        super().__init__(daemon=True)
        self._args = (target, root, {"paths": rels, "hash": "all", "cache": cache}, tree.budget_s(nbytes, len(rels)),
                      tally)
        self.start()

    def run(self):
        target, root, request, timeout_s, tally = self._args
        try:
            tree.remote(target, root, request, timeout_s=timeout_s, tally=tally)
        except errors.GpuopsError:
            pass


class _Landing(threading.Thread):
    """Push: hashes each file on the box as the transfer puts it in place (gpuops.onbox.landing)
    instead of reading the whole payload there after the transfer; its connection also opens the
    multiplexed session that verification then reuses. Verification is the same as without it: it
    stats every file sent and reuses a digest only for an unchanged stat. The first manifest of
    verification tells the follower to stop, so it must not start before the follower watches:
    `ready` is set by the follower's first output (or by its end)."""

    def __init__(self, target, root, expect, since_ns, tally):
        super().__init__(daemon=True)
        self.ready = threading.Event()
        self._args = (target, root, {"expect": expect, "since_ns": since_ns}, tally)
        self.start()

    def run(self):
        target, root, request, tally = self._args
        try:
            tree.follow(target, root, request, _FOLLOW_LIMIT_S, lambda chunk: self.ready.set(), tally)
        except errors.GpuopsError:
            pass
        finally:
            self.ready.set()

    def settle(self, target, wait_s):
        """After verification: collect the follower's answer, or end its connection when it is
        still waiting for files that never came (verification started before it did)."""
        self.join(wait_s)
        if self.is_alive():
            target.close()
            self.join()


class _Idle:
    ready = threading.Event()
    ready.set()

    def join(self, timeout=None):
        pass

    def settle(self, target, wait_s):
        pass


# A follower ends when verification asks it to (or when every file is in); this only bounds a
# box-side process whose client vanished without closing the connection.
_FOLLOW_LIMIT_S = 6 * 3600
# How long verification waits for a follower to start watching, and then for its answer.
_FOLLOW_WAIT_S = 10


def _warm_sources(target, root, rels, src_map, opts, tally):
    if not rels or opts.rehash:  # a re-hash reads everything after the transfer anyway
        return _Idle()
    return _Warming(target, root, rels, sum(src_map[r][2] for r in rels), opts.cache, tally)


def _follow_landing(target, root, rels, src_map, since_ns, opts, tally):
    expect = {r: src_map[r][2] for r in rels if src_map[r][1] == "f"}
    if not expect or opts.rehash:  # a re-hash reads everything after the transfer anyway
        return _Idle()
    return _Landing(target, root, expect, since_ns, tally)


def _delete_local(root, extras, opts, findings):
    import shutil

    if not _may_delete(extras, opts, findings):
        return []
    base = os.fsencode(root)
    for rel in extras:
        path = os.path.join(base, rel.encode("utf-8", "surrogateescape"))
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    findings.append(Finding("sync.deleted", "info", f"deleted {len(extras)} local path(s) that are not on the box",
                            evidence={"paths": _cut(extras)}))
    return extras


def _record_pull(host, remote_root, local_root, rmap):
    """Write the verified manifest next to the data and add the pull to the index."""
    verified_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    files = [{"path": e[0], "size": e[2], "sha256": e[3]} for e in sorted(rmap.values()) if e[1] == "f"]
    manifest_path = os.path.join(local_root, pullindex.MANIFEST_NAME)
    doc = {"schema": 1, "host": host, "remote": remote_root, "local": local_root, "verified_at": verified_at,
           "files": files}
    tmp = manifest_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    os.replace(tmp, manifest_path)
    pullindex.record({"host": host, "remote": remote_root, "local": local_root, "manifest": manifest_path,
                      "files": len(files), "bytes": sum(f["size"] for f in files), "verified_at": verified_at})
    return manifest_path


# ---------------------------------------------------------------------------------------------
# transfer, verify, result


def _transfer(target, engine, send, src_map, progress, verb):
    total = sum(src_map[r][2] for r in send if src_map[r][1] == "f")
    if not send:
        return Outcome(engine.name)
    progress.start(total, f"{verb} ({engine.name})")
    try:
        outcome = engine.run(send)
    finally:
        progress.close()
    if any(a.outcome == "retry" for a in outcome.attempts):
        # Whatever cut or froze the transfer's link most likely took gpuops' own connection
        # with it: verify over a fresh one rather than wait for keepalives to declare it dead.
        target.close()
    return outcome


def _verify_and_repair(sent, src_map, dst_map, check, engine, outcome, progress, src_name, dst_name):
    """Re-read what was sent on both ends and compare; send mismatches once more, forced."""
    if not sent:
        return []
    check(sent)
    mism = plan.mismatches(src_map, dst_map, [r for r in sent if r in src_map], src_name, dst_name)
    if mism and outcome.failure is None:
        again = [m["path"] for m in mism]
        progress.stage(f"{len(again)} path(s) differ after the transfer; sending them again")
        repaired = engine.run(again, force=True)
        _merge(outcome, repaired)
        check(again)
        mism = plan.mismatches(src_map, dst_map, [r for r in sent if r in src_map], src_name, dst_name)
    return mism


def _result(verb, target, local_root, remote_root, engine_name, src_map, p, outcome, mism, verdict, vanished,
            deleted, findings, backoff, tally, rerun):
    files = [e for e in src_map.values() if e[1] == "f"]
    bad = {m["path"] for m in mism}
    verified = [e for e in files if e[0] not in bad]
    data = {
        "direction": verb,
        "engine": engine_name,
        "local": local_root,
        "remote": remote_root,
        "files": len(files),
        "dirs": sum(1 for e in src_map.values() if e[1] == "d"),
        "symlinks": sum(1 for e in src_map.values() if e[1] == "l"),
        "payload_bytes": sum(e[2] for e in files),
        "sent_paths": len(p.send),
        "already_equal": len(p.equal),
        "bytes_sent": outcome.bytes_sent,
        "bytes_reused": outcome.bytes_reused,
        "wire_bytes": outcome.wire_bytes,
        "bytes_verified": sum(e[2] for e in verified),
        "files_verified": len(verified),
        "retries": backoff.retries,
        "attempts": [a.__dict__ for a in outcome.attempts],
        "mismatches": _cut(mism),
        "mismatch_count": len(mism),
        "extras": _cut(p.extras),
        "extra_count": len(p.extras),
        "deleted": _cut(deleted),
        "vanished": _cut(vanished),
        "skipped_special": _cut(p.skipped),
        "budget": verdict,
        "hashing": tally.sides,
        "verified": not mism and outcome.failure is None,
    }
    if outcome.file_errors:
        data["file_errors"] = _cut(outcome.file_errors)
    if vanished:
        findings.append(Finding("sync.vanished", "warn", f"{len(vanished)} source file(s) disappeared during the sync",
                                evidence={"paths": _cut(vanished)}))
    if p.skipped:
        findings.append(Finding("sync.special", "info", f"{len(p.skipped)} socket/fifo/device file(s) not synced",
                                evidence={"paths": _cut(p.skipped)}))
    if mism:
        findings.append(Finding("sync.mismatch", "fail", f"{len(mism)} path(s) differ after the {verb}",
                                evidence={"paths": [m["path"] for m in mism[:20]]}, fix=rerun, gotcha="U33"))
    error = None
    if outcome.failure:
        summary = _engine_failure(outcome, verb)
        findings.append(Finding(f"sync.{outcome.failure['kind']}", "fail", summary, fix=rerun,
                                gotcha="U7" if outcome.failure["kind"] == DISK_FULL else "U12"))
        if outcome.failure["kind"] == TRANSPORT:
            error = {"kind": errors.Unreachable.kind, "message": f"{target.name}: {summary}"}
        summary += f" ({len(verified)} of {len(files)} files verified)"
    elif mism:
        summary = (f"{verb} NOT verified: {len(mism)} path(s) differ ({', '.join(m['path'] for m in mism[:3])}"
                   f"{', ...' if len(mism) > 3 else ''})")
    else:
        summary = (f"{verb} verified: {len(files)} files, {budget.human_bytes(data['payload_bytes'])} "
                   f"(sent {len(p.send)} path(s), {budget.human_bytes(outcome.bytes_sent)}; "
                   f"{data['retries']} retries)")
    ok = data["verified"]
    return envelope(verb, ok=ok, summary=summary, host=target.name, data=data, findings=worst_first(findings),
                    next=[] if ok else [rerun + "   # resumes: partial files are kept"], error=error)


# ---------------------------------------------------------------------------------------------
# verify


def verify(target, local, remote, opts: Options) -> dict:
    if not remote:
        raise errors.UsageError("--remote (the directory on the box) is required")
    tally = tree.Tally()
    local_root = _local_root(local, "--local", must_exist=True)
    scan = tree.local(local_root, {**rules.request(opts.excludes, opts.include_git, read_ignore_file=True),
                                   "cache": opts.cache})
    lmap = plan.by_path(scan.doc["entries"])
    hasher = tree.Hasher(scan)
    nbytes = sum(e[2] for e in lmap.values() if e[1] == "f")
    rdoc = tree.remote(target, remote, {**rules.fixed(scan.doc["rules"]), "hash": "all", "cache": opts.cache},
                       timeout_s=tree.budget_s(nbytes, len(lmap)), tally=tally)
    hasher.wait()
    hasher.finish(tally)
    _check_remote_root(rdoc, "--remote", remote, True, target.name)
    rmap = plan.by_path(rdoc["entries"])
    checked = sorted(lmap)
    mism = plan.mismatches(lmap, rmap, checked, "local", "remote")
    extras = plan.extras(lmap, rmap)
    files = [e for e in lmap.values() if e[1] == "f"]
    bad = {m["path"] for m in mism}
    findings = []
    if mism:
        findings.append(Finding("verify.drift", "fail", f"{len(mism)} path(s) on the box differ from {local_root}",
                                evidence={"paths": [m["path"] for m in mism[:20]]},
                                fix=_command("push", target.name, local, remote), gotcha="U42"))
    if extras:
        findings.append(Finding("verify.extra", "warn", f"{len(extras)} path(s) exist only on the box",
                                evidence={"paths": _cut(extras)}))
    data = {
        "local": local_root, "remote": rdoc["root"], "files": len(files),
        "bytes_verified": sum(e[2] for e in files if e[0] not in bad),
        "files_verified": sum(1 for e in files if e[0] not in bad),
        "mismatches": _cut(mism), "mismatch_count": len(mism),
        "extras": _cut(extras), "extra_count": len(extras), "hashing": tally.sides, "verified": not mism,
    }
    if mism:
        summary = (f"drift: {len(mism)} of {len(checked)} path(s) differ on the box "
                   f"({', '.join(m['path'] for m in mism[:3])}{', ...' if len(mism) > 3 else ''})")
    else:
        summary = f"verified: {len(files)} files, {budget.human_bytes(nbytes)} identical on the box"
    return envelope("verify", ok=not mism, summary=summary, host=target.name, data=data,
                    findings=worst_first(findings))


# ---------------------------------------------------------------------------------------------
# people


def render(doc, con):
    from rich.table import Table

    from ..render import findings_table, summary_line

    data = doc.get("data") or {}
    mism = data.get("mismatches") or []
    if mism:
        table = Table(title="paths that differ", expand=False)
        table.add_column("path")
        table.add_column("problem", no_wrap=True)
        for m in mism[:20]:
            table.add_row(m["path"], m["problem"])
        con.print(table)
    shown = [f for f in doc.get("findings") or [] if f["id"] != "sync.mismatch"]
    if shown:
        con.print(findings_table(shown, title=f"{doc['command']} {doc.get('host') or ''}".strip()))
    summary_line(doc, con)
