"""Disk verdicts: free bytes AND free inodes where a run writes (U6, U7), /dev/shm's size, and
data or checkpoint directories on a network, FUSE or overlay filesystem instead of local disk (U8).

Several directories often share one filesystem; each filesystem is judged once, under the
strictest floor among the directories on it (a run's own directories fail, /tmp only warns). The
20 GiB run floor is for home and a profile's data and checkpoint dirs; an extra --path is held to
the size it was given (`--path DIR:SIZE`), else to a small floor, since a config dir needs little.
"""

import posixpath
import shlex

from ..findings import Finding
from ..units import GIB, gib

RUN_ROLES = ("home", "cwd", "path", "data_dir", "durable_dir", "checkpoint_dir")
_BY_NAME = ("home", "cwd", "tmp")  # named by role in titles; the others by their path


def _filesystems(facts):
    """[(entries on one filesystem)] in first-seen order, /dev/shm left out."""
    groups = {}
    for d in facts.get("disks") or []:
        if d.get("role") == "shm" or "error" in d:
            continue
        groups.setdefault(d.get("device"), []).append(d)
    return list(groups.values())


def _names(entries):
    return ", ".join(dict.fromkeys(e["role"] if e["role"] in _BY_NAME else e["path"] for e in entries))


def _floor(entry, facts, t):
    """(GiB, severity below it, what sets it) for one directory: the run floor where a run keeps its
    data, home and checkpoints, scratch's for /tmp, and for an extra --path the size it was given
    (`--path DIR:SIZE`), else the small floor of a directory whose use nobody said."""
    role = entry["role"]
    if role == "tmp":
        return t["tmp_min_free_gib"], "warn", "tmp_min_free_gib"
    if role == "path":
        sized = (facts.get("path_floors") or {}).get(entry.get("asked", entry["path"]))
        if sized is not None:
            return sized, "fail", "--path %s:SIZE" % entry.get("asked", entry["path"])
        return t["path_min_free_gib"], "fail", "path_min_free_gib (no :SIZE given)"
    return t["disk_min_free_gib"], "fail", "disk_min_free_gib (%s)" % role


def space(facts, t):
    out = []
    for entries in _filesystems(facts):
        first = entries[0]
        free = first["free_bytes"]
        floors = [_floor(e, facts, t) for e in entries]
        below = [f for f in floors if free < f[0] * GIB]
        # The worst verdict any directory on it earns, at the highest floor that earns it.
        floor, severity, source = max(below or floors, key=lambda f: (f[1] == "fail", f[0]))
        evidence = {"mount": first.get("mount"), "for": _names(entries), "free_gib": gib(free),
                    "total_gib": gib(first["total_bytes"]), "floor_gib": floor, "floor_from": source}
        if below:
            out.append(Finding(
                "disk.space", severity,
                f"{gib(free)} GiB free on {first.get('mount')} ({_names(entries)}): below {floor:g} GiB",
                evidence,
                f"du -xh --max-depth=2 {shlex.quote(first.get('mount') or '/')} | sort -rh | head -20   # then delete finished "
                "checkpoints/caches, or point the run at a bigger disk", "U6"))
        else:
            out.append(Finding("disk.space", "ok", f"{gib(free)} GiB free on {first.get('mount')} ({_names(entries)})",
                               evidence))
    out += [Finding("disk.unreadable", "warn", f"cannot measure {d['path']}: {d['error']}",
                    {"path": d["path"], "role": d["role"]}, f"ls -ld {shlex.quote(d['path'])}")
            for d in facts.get("disks") or [] if "error" in d]
    return out


def inodes(facts, t):
    """Free inodes per filesystem; a profile's inode cap (facts["inode_caps"]) tightens the count."""
    caps = facts.get("inode_caps") or {}
    out = []
    for entries in _filesystems(facts):
        first = entries[0]
        total, free = first.get("total_inodes") or 0, first.get("free_inodes")
        if not total or free is None:
            continue  # filesystems without an inode table (btrfs, some overlays) report 0
        cap = min((caps[e["path"]] for e in entries if e["path"] in caps), default=0)
        if cap and cap < total:
            # A platform quota below what the filesystem reports: judge against the quota.
            free, total = max(0, min(free, cap - (total - free))), cap
        pct = 100.0 * free / total
        for_run = any(e["role"] in RUN_ROLES for e in entries)
        evidence = {"mount": first.get("mount"), "for": _names(entries), "free_inodes": free,
                    "total_inodes": total, "free_pct": round(pct, 2), "floor": t["disk_min_free_inodes"]}
        if cap:
            evidence["inode_cap"] = cap
        if free < t["disk_min_free_inodes"] or pct < t["disk_min_free_inodes_pct"]:
            out.append(Finding(
                "disk.inodes", "fail" if for_run else "warn",
                f"only {free} inodes free on {first.get('mount')} ({round(pct, 2)}%): file creation will fail "
                "with bytes to spare", evidence,
                f"du --inodes -x --max-depth=2 {shlex.quote(first.get('mount') or '/')} | sort -rn | head -20   # then remove or "
                "tar-shard the many small files", "U7"))
        else:
            out.append(Finding("disk.inodes", "ok", f"{free} inodes free on {first.get('mount')}", evidence))
    return out


def shm(facts, t):
    d = next((d for d in facts.get("disks") or [] if d.get("role") == "shm" and "error" not in d), None)
    if d is None:
        return []
    size = d["total_bytes"]
    evidence = {"size_gib": gib(size), "free_gib": gib(d["free_bytes"]), "floor_gib": t["shm_min_gib"]}
    if size < t["shm_min_gib"] * GIB:
        return [Finding("disk.shm", "warn",
                        f"/dev/shm is {gib(size)} GiB: DataLoader workers die with 'bus error' on big batches",
                        evidence, "docker run --shm-size=16g ...   # or --ipc=host; until then DataLoader(num_workers=0)",
                        "GEN9")]
    return [Finding("disk.shm", "ok", f"/dev/shm is {gib(size)} GiB", evidence)]


# Filesystem types that are not a local disk, by what they are (U8). FUSE is "fuse", "fuseblk"
# or "fuse.<helper>" (sshfs, s3fs, gcsfuse, juicefs, rclone ...).
NETWORK_FS = frozenset(("nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs", "beegfs",
                        "9p", "afs", "davfs", "orangefs", "ncpfs"))
OVERLAY_FS = frozenset(("overlay", "aufs"))
DATA_ROLES = ("path", "data_dir", "checkpoint_dir")
_WHY = {
    "network": "every read crosses the network: random reads of a dataset there are often ~35x slower than "
               "local NVMe, and the GPU waits between batches",
    "FUSE": "every read goes through a user-space filesystem (often backed by the network or object storage): "
            "far slower than local disk, and the GPU waits between batches",
    "overlay": "it is the container's copy-on-write layer, not a mounted volume: slower than a local disk and "
               "gone with the container",
}


def fs_kind(fstype):
    """"network", "FUSE" or "overlay" for a filesystem type that is not a local disk, else None."""
    if fstype in NETWORK_FS:
        return "network"
    if fstype in ("fuse", "fuseblk") or fstype.startswith("fuse."):
        return "FUSE"
    return "overlay" if fstype in OVERLAY_FS else None


def storage(facts, t):
    disks = [d for d in facts.get("disks") or [] if d.get("fstype") and "error" not in d]
    local = next((d["path"] for d in disks if d["role"] in ("data_dir", "home") and fs_kind(d["fstype"]) is None),
                 None)
    out = []
    for d in disks:
        kind = fs_kind(d["fstype"])
        if d["role"] not in DATA_ROLES or kind is None:
            continue
        what = "checkpoints" if d["role"] == "checkpoint_dir" else "data"
        evidence = {"path": d["path"], "role": d["role"], "fstype": d["fstype"], "source": d.get("fs_source"),
                    "mount": d.get("fs_mount")}
        if what == "data":
            # Without a known local data or home disk there is no copy to name (and no path to build one).
            copy = local and f"{local.rstrip('/')}/{posixpath.basename(d['path'].rstrip('/')) or 'data'}"
            fix = (f"rsync -a {shlex.quote(d['path'])}/ {shlex.quote(copy)}/   # at job start; train from the local "
                   "copy" if local else "copy the working set to the box's local NVMe at job start and train "
                   "from there (a profile's paths.data_dir names it)")
        else:
            fix = ("write checkpoints to local disk and copy each finished one here in the background "
                   "(a slow checkpoint write blocks training)")
        out.append(Finding("disk.not-local", "warn",
                           f"{d['path']} ({d['role']}) is on a {kind} filesystem ({d['fstype']}"
                           + (f" from {d['fs_source']}" if d.get("fs_source") else "") + f"): {_WHY[kind]}",
                           evidence, fix, "U8"))
    checked = [d for d in disks if d["role"] in DATA_ROLES]
    if checked and not out:
        out.append(Finding("disk.not-local", "ok", "data and checkpoint directories are on local filesystems",
                           {"filesystems": {d["path"]: d["fstype"] for d in checked}}))
    return out


CHECKS = (space, inodes, shm, storage)
