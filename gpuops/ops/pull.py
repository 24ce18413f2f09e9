"""pull: fetch a tree from the box, verify both copies, and record the verified pull (the evidence
`teardown-check` relies on).

Every name written under --dst comes from the box: the SFTP engine, the deletion of extras and the
manifest left next to the data all write through gpuops.contained, never out of --dst. One pull
at a time writes a destination (gpuops.sync.lock).
"""

import json
import os
import threading
import time

from .. import contained, errors, pullindex
from ..findings import Finding
from ..onbox.sync.ignorerules import Rules
from ..sync import lock, plan, rules, tree
from . import sync as S


def pull(target, src, dst, opts: S.Options) -> dict:
    if not src:
        raise errors.UsageError("--src (the directory on the box) is required")
    local_root = S.local_root(dst, "--dst", must_exist=False)
    held = lock.Here(local_root, "pull")
    try:
        return _pull(target, src, dst, local_root, opts)
    finally:
        held.release()


def _pull(target, src, dst, local_root, opts):
    findings = []
    backoff = opts.backoff()
    tally = tree.Tally()
    progress = opts.progress
    local_req = {**rules.request(opts.excludes, opts.include_git, read_ignore_file=False), "cache": opts.cache}
    scan = tree.local(local_root, local_req)
    files = {rel: e.size for rel, e in scan.entries.items() if e.kind == "f"}
    hasher = tree.Hasher(scan)
    progress.stage(f"walking {target.name}:{src}")
    rdoc = tree.remote(target, src, {**rules.request(opts.excludes, opts.include_git), "hash": "want",
                                     "want": files, "cache": opts.cache},
                       timeout_s=tree.budget_s(sum(files.values()), len(files)), tally=tally)
    S.check_remote_root(rdoc, "--src", src, True, target.name)
    remote_root = rdoc["root"]
    source_rules = Rules(rdoc["rules"])
    rmap = plan.by_path(rdoc["entries"], target.name)
    hasher.wait(plan.same_size_files(rmap, scan.entries))
    hasher.stop()  # the other local files are about to be replaced or deleted: their digests do not matter
    hasher.finish(tally)
    lmap = {r: e for r, e in scan.entries.items() if not source_rules.excluded(r, e.kind == "d")}
    p = plan.make(rmap, lmap)
    if opts.delete:
        S.check_plan(p.extras, opts)  # a plan that no longer holds refuses before anything moves
    from ..onbox.host import disk

    verdict = S.check_budget(rmap, lmap, p.send, disk.measure("destination", local_root), os.path.isdir(local_root),
                             local_root, opts, findings)
    S.check_small_files(rmap, p.send, opts, findings)
    engine_name, version = S.choose_engine(opts.engine, target, rdoc.get("rsync"), findings, opts.compress)
    os.makedirs(local_root, exist_ok=True)
    engine = S.make_engine(engine_name, version, target, "pull", local_root, remote_root, rmap, opts, backoff)
    warming = _warm_sources(target, remote_root, [r for r in p.send if rmap[r].kind == "f"], rmap, opts, tally)
    outcome = S.transfer(target, engine, p.send, rmap, progress, "pull")
    S.full_by_measure(outcome, lambda: disk.measure("destination", local_root).get("free_bytes"), rmap, p.send)
    warming.join()
    deleted = _delete_local(local_root, p.extras, opts, findings) if opts.delete else []

    def both_check(rels) -> None:
        nbytes = sum(rmap[r].size for r in rels if rmap[r].kind == "f")
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
        lmap.update(fresh.entries)
        rmap.update(plan.by_path(doc["entries"], target.name))

    progress.stage("verifying both copies")
    mism = S.verify_and_repair(p.send, rmap, lmap, both_check, engine, outcome, progress, "remote", "local")
    vanished = [r for r in p.send if r not in rmap]
    doc = S.result("pull", target, local_root, remote_root, engine_name, rmap, p, outcome, mism, verdict, vanished,
                   deleted, findings, backoff, tally, rerun=S.command("pull", target.name, src, dst, opts))
    if doc["ok"]:
        doc["data"]["manifest"] = _record_pull(target.name, remote_root, local_root, rmap)
    return doc


class _Warming(threading.Thread):
    """Pull: hashes the sources on the box while they are sent (its disk and CPU are idle
    meanwhile) into the box's digest cache, so the verification round trip after the transfer
    only stats them. Verification still stats and compares every file exactly as before; it
    just finds the digests of unchanged files ready. A failure costs only the head start."""

    def __init__(self, target, root, rels, nbytes, cache, tally) -> None:
        super().__init__(daemon=True)
        self._args = (target, root, {"paths": rels, "hash": "all", "cache": cache}, tree.budget_s(nbytes, len(rels)),
                      tally)
        self.start()

    def run(self) -> None:
        target, root, request, timeout_s, tally = self._args
        try:
            tree.remote(target, root, request, timeout_s=timeout_s, tally=tally)
        except Exception:  # noqa: BLE001 - a head start; a Ctrl-C's shutdown even refuses its new threads
            pass


def _warm_sources(target, root, rels, src_map, opts, tally):
    if not rels or opts.rehash:  # a re-hash reads everything after the transfer anyway
        return S.Idle()
    return _Warming(target, root, rels, sum(src_map[r].size for r in rels), opts.cache, tally)


def _delete_local(root, extras, opts, findings):
    if not S.may_delete(extras, opts, findings):
        return []
    inside = contained.Root(root)
    for rel in extras:
        inside.remove(rel)
    findings.append(Finding("sync.deleted", "info", f"deleted {len(extras)} local path(s) that are not on the box",
                            evidence={"paths": S.cut(extras)}))
    return extras


def _record_pull(host: str, remote_root, local_root, rmap):
    """Write the verified manifest next to the data and add the pull to the index."""
    verified_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    files = [{"path": e.rel, "size": e.size, "sha256": e.sha256} for e in sorted(rmap.values()) if e.kind == "f"]
    manifest_path = pullindex.manifest_for(local_root)
    doc = {"schema": 1, "host": host, "remote": remote_root, "local": local_root, "verified_at": verified_at,
           "files": files}
    # ASCII JSON: a name that is not UTF-8 is kept as its \udcXX escape, which reads back as the
    # same bytes. The temporary name is a partial file's, which no walk lists if a crash leaves it.
    contained.Root(os.path.dirname(manifest_path)).write_atomic(
        os.path.basename(manifest_path), json.dumps(doc).encode("ascii"), temp_suffix=rules.PART_SUFFIX)
    pullindex.record({"host": host, "remote": remote_root, "local": local_root, "manifest": manifest_path,
                      "files": len(files), "bytes": sum(f["size"] for f in files), "verified_at": verified_at})
    return manifest_path
