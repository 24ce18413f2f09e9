"""push: send a local tree to the box and prove it arrived (see gpuops.ops.sync for the steps)."""

import os
import threading

from .. import errors
from ..findings import Finding
from ..sync import crlf, lock, plan, rules, tree
from ..sync.striped import Early
from . import sync as S

# Entries the box is given time to walk for the first manifest before the wait for it gives up; it
# is asked for before the local walk has counted them.
_WALK_BOUND = 1_000_000


def push(target, src, dst, opts: S.Options) -> dict:
    if not dst:
        raise errors.UsageError("--dst (the directory on the box) is required")
    local_root = S.local_root(src, "--src", must_exist=True)
    profile = _load_profile(opts.profile)
    request = {**rules.request(opts.excludes, opts.include_git, read_ignore_file=True), "cache": opts.cache}
    # One writer per destination: asked for now, on its own channel, held until verification ends.
    # The box needs only the source's rule lines, known before the walk, to say what is there: the
    # lock's channel answers that too, once the lock is held (so no other transfer is changing it),
    # with the digests its cache holds and how much room is left, while the local walk runs.
    held = lock.OnBox(target, dst, "push", listing={**rules.fixed(tree.rule_lines(local_root, request)),
                                                    "root": dst, "hash": "cached", "space": True,
                                                    "cache": opts.cache})
    early = Early(target)  # the link's measurement, started once the local tree is walked
    try:
        return _push(target, src, dst, local_root, profile, held, request, opts, early)
    finally:
        early.close()
        held.release()


def _push(target, src, dst, local_root, profile, held, request, opts, early):
    findings = []
    backoff = opts.backoff()
    tally = tree.Tally()
    progress = opts.progress
    progress.stage(f"walking the source; asking {target.name} what is at {dst}")
    scan = tree.local(local_root, request)
    lmap = scan.entries  # live: the hasher fills in digests as it goes
    S.measure_early(early, target, lmap, opts)
    _crlf(scan, opts, findings)
    # Every local file's digest is needed sooner or later (to compare, or to verify what was
    # sent), so hashing starts now and overlaps the round trip and the transfer.
    hasher = tree.Hasher(scan)
    held.acquire()
    rdoc = held.listing(tree.budget_s(nentries=_WALK_BOUND))
    tally.add("remote", rdoc.get("hashing"))
    S.check_remote_root(rdoc, "--dst", dst, False, target.name)
    remote_root = rdoc["root"]
    rmap = plan.by_path(rdoc["entries"], target.name)
    same = plan.same_size_files(lmap, rmap)
    _hash_uncached(target, remote_root, rmap, same, opts, tally)
    hasher.wait(same)
    p = plan.make(lmap, rmap)
    if opts.delete:
        S.check_plan(p.extras, opts)  # a plan that no longer holds refuses before anything moves
    _profile(profile, remote_root, findings)
    verdict = S.check_budget(lmap, rmap, p.send, rdoc["space"], rdoc["exists"], f"{target.name}:{remote_root}",
                             opts, findings)
    S.check_small_files(lmap, p.send, opts, findings)
    engine_name, version = S.choose_engine(opts.engine, target, rdoc.get("rsync"), findings, opts.compress)
    # A missing destination is created by the engine on its way in (rsync over ssh runs mkdir
    # first, SFTP makes every parent); only a local rsync or an empty payload needs a separate call.
    engine_makes_root = bool(p.send) and not target.is_local
    if not rdoc["exists"] and not engine_makes_root:
        _mkdir_remote(target, remote_root)
    engine = S.make_engine(engine_name, version, target, "push", local_root, remote_root, lmap, opts, backoff,
                           make_root=not rdoc["exists"], early=early)
    landing = _follow_landing(target, remote_root, p.send, lmap, rdoc["now_ns"], opts, tally)
    # The verifying manifest's channel opens as the transfer starts: the box's login rc and
    # interpreter start-up happen behind the transfer instead of after it.
    with tree.Early(target, remote_root, _FOLLOW_LIMIT_S, tally, needed=bool(p.send)) as early:
        outcome = S.transfer(target, engine, p.send, lmap, progress, "push")
        S.full_by_measure(outcome, lambda: tree.free_space(target, remote_root)[0], lmap, p.send)
        vanished = _vanished(local_root, lmap, p.send)
        scan.drop(vanished)
        deleted = _delete_remote(target, remote_root, p.extras, opts, findings) if opts.delete else []
        sent = [r for r in p.send if r in lmap]

        def remote_check(rels):
            nbytes = sum(lmap[r].size for r in rels if lmap[r].kind == "f")
            landing.ready.wait(_FOLLOW_WAIT_S)
            request = {"paths": list(rels) + deleted, "hash": "all", "cache": opts.cache}
            budget = tree.budget_s(nbytes, len(rels))
            doc = early.ask(request, budget)  # None: asked before, or its channel died with a cut link
            if doc is None:
                doc = tree.remote(target, remote_root, request, timeout_s=budget, backoff=backoff, tally=tally)
            found = plan.by_path(doc["entries"], target.name)
            for r in list(rels) + deleted:
                rmap.pop(r, None)
            rmap.update(found)
            # The local digests were computed on a thread meanwhile; by now they are usually done.
            hasher.wait()

        progress.stage("verifying on the box")
        mism = S.verify_and_repair(sent, lmap, rmap, remote_check, engine, outcome, progress, "local", "remote")
    held.release()
    held.check()
    landing.settle(target, _FOLLOW_WAIT_S if sent else 0)
    hasher.wait()
    hasher.finish(tally)
    return S.result("push", target, local_root, remote_root, engine_name, lmap, p, outcome, mism, verdict,
                    vanished, deleted, findings, backoff, tally, rerun=S.command("push", target.name, src, dst, opts))


def _vanished(root, src_map, rels):
    """Source files that were listed but are gone now (a job deleted them mid-sync). Asked of the
    filesystem, not of the digest: a cached digest does not prove the file is still there."""
    return [r for r in rels if src_map[r].kind == "f"
            and not os.path.lexists(os.path.join(os.fsencode(root), r.encode("utf-8", "surrogateescape")))]


def _hash_uncached(target, root, rmap, same, opts, tally):
    """Hash on the box the same-size files its cache had no digest for (none, on a re-sync of an
    unchanged tree), and put their digests into `rmap`."""
    todo = [rel for rel in same if rmap[rel].sha256 is None]
    if not todo:
        return
    doc = tree.remote(target, root, {"paths": todo, "hash": "all", "cache": opts.cache},
                      timeout_s=tree.budget_s(sum(same[r] for r in todo), len(todo)), tally=tally)
    rmap.update(plan.by_path(doc["entries"], target.name))


def _crlf(scan, opts, findings):
    found = crlf.scan(scan.root, scan.entries.values())
    if not found:
        return
    paths = [f["path"] for f in found]
    if opts.fix_crlf:
        fixed = crlf.fix(scan.root, paths)
        # Rewritten files have a new stat: look again, so no digest of the old bytes is reused.
        scan.restat(fixed)
        findings.append(Finding("sync.crlf-fixed", "info", f"converted {len(fixed)} shell script(s) from CRLF to LF "
                                "before sending", evidence={"files": S.cut(fixed)}, gotcha="U26"))
        return
    findings.append(Finding("sync.crlf", "warn", f"{len(found)} shell script(s) have CRLF line endings and will "
                            "fail on the box", evidence={"files": S.cut(paths)},
                            fix="re-run with --fix-crlf, and add '*.sh text eol=lf' to .gitattributes", gotcha="U26"))


def _load_profile(name):
    """The named platform profile, loaded before anything is sent (a typo fails fast)."""
    if not name:
        return None
    from .. import profiles

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


def _delete_remote(target, root, extras, opts, findings):
    from ..remote import wrap

    if not S.may_delete(extras, opts, findings):
        return []
    payload = b"\0".join(r.encode("utf-8", "surrogateescape") for r in extras) + b"\0"
    result = target.run(f"cd -- {wrap.quote(root)} && xargs -0 rm -rf --", stdin=payload, timeout_s=600)
    if result.exit != 0:
        raise errors.HostError(f"{target.name}: deleting extra paths failed: {result.err_text.strip()[:300]}")
    findings.append(Finding("sync.deleted", "info", f"deleted {len(extras)} path(s) that exist only at the destination",
                            evidence={"paths": S.cut(extras)}))
    return extras


class _Landing(threading.Thread):
    """Push: hashes each file on the box as the transfer puts it in place (gpuops.onbox.sync.landing)
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
        except Exception:  # noqa: BLE001 - a head start; a Ctrl-C's shutdown even refuses its new threads
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


# A follower ends when verification asks it to (or when every file is in); this only bounds a
# box-side process whose client vanished without closing the connection.
_FOLLOW_LIMIT_S = 6 * 3600
# How long verification waits for a follower to start watching, and then for its answer.
_FOLLOW_WAIT_S = 10


def _follow_landing(target, root, rels, src_map, since_ns, opts, tally):
    expect = {r: src_map[r].size for r in rels if src_map[r].kind == "f"}
    if not expect or opts.rehash:  # a re-hash reads everything after the transfer anyway
        return S.Idle()
    return _Landing(target, root, expect, since_ns, tally)
