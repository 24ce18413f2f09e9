"""verify: compare a local tree with its copy on the box by sha256, copying nothing (deploy drift)."""

from .. import errors
from ..envelope import envelope, step
from ..findings import Finding, worst_first
from ..remote import wrap
from ..sync import plan, rules, tree
from ..units import human_bytes
from . import sync as S


def verify(target, local, remote, opts: S.Options) -> dict:
    if not remote:
        raise errors.UsageError("--dst (the directory on the box) is required")
    tally = tree.Tally()
    local_root = S.local_root(local, "--src", must_exist=True)
    progress = opts.progress  # both ends hash at once: this end's bar, then the wait for the box's
    progress.stage(f"hashing {local_root} here and {remote} on {target.name}")
    try:
        scan = tree.local(local_root, {**rules.request(opts.excludes, opts.include_git, read_ignore_file=True),
                                       "cache": opts.cache})
        lmap = scan.entries  # live: the hasher fills in digests
        hasher = tree.Hasher(scan)
        nbytes = sum(e.size for e in lmap.values() if e.kind == "f")
        pending = tree.Pending(target, remote, {**rules.fixed(scan.doc["rules"]), "hash": "all",
                                                "cache": opts.cache},
                               timeout_s=tree.budget_s(nbytes, len(lmap)), tally=tally)
        if hasher.total_files:
            progress.start(hasher.total_bytes, "verifying", files=hasher.total_files)
            hasher.watch(progress.update, until=pending.failed)
        progress.stage(f"waiting for {target.name} to finish hashing")
        rdoc = pending.result()
        progress.stage("comparing the digests")
        hasher.wait()
    finally:
        progress.close()
    hasher.finish(tally)
    S.check_remote_root(rdoc, "--dst", remote, True, target.name)
    rmap = plan.by_path(rdoc["entries"], target.name)
    checked = sorted(lmap)
    mism = plan.mismatches(lmap, rmap, checked, "local", "remote")
    extras = plan.extras(lmap, rmap)
    files = [e for e in lmap.values() if e.kind == "f"]
    bad = {m["path"] for m in mism}
    findings, nxt = [], []
    if mism:
        push = S.command("push", target.name, local, remote, opts)
        findings.append(Finding("verify.drift", "fail", f"{len(mism)} path(s) on the box differ from {local_root}",
                                evidence={"paths": [m["path"] for m in mism[:20]]}, fix=wrap.join(push), gotcha="U42"))
        nxt.append(step(*push, why="sends what differs, and verifies it"))
    if extras:
        findings.append(Finding("verify.extra", "warn", f"{len(extras)} path(s) exist only on the box",
                                evidence={"paths": S.cut(extras)}))
    data = {
        "local": local_root, "remote": rdoc["root"], "files": len(files),
        "bytes_verified": sum(e.size for e in files if e.rel not in bad),
        "files_verified": sum(1 for e in files if e.rel not in bad),
        "mismatches": S.cut(mism), "mismatch_count": len(mism),
        "extras": S.cut(extras), "extra_count": len(extras), "hashing": tally.sides, "verified": not mism,
    }
    if mism:
        summary = (f"drift: {len(mism)} of {len(checked)} path(s) differ on the box "
                   f"({', '.join(m['path'] for m in mism[:3])}{', ...' if len(mism) > 3 else ''})")
    else:
        summary = f"verified: {len(files)} files, {human_bytes(nbytes)} identical on the box"
    return envelope("verify", ok=not mism, summary=summary, host=target.name, data=data,
                    findings=worst_first(findings), next=nxt)
