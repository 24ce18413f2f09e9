"""Data and checkpoint directories on a network, FUSE or overlay filesystem (gotcha U8): the mount
table read through the sysroot seam, in /proc/self/mountinfo's own line format, and the verdict."""

from gpuops.checks import disk as checks
from gpuops.onbox.host import disk
from gpuops.ops import preflight as op
from gpuops.remote.local import LocalTarget
from tests.fixtures.fakegpu.boxes import compose

ROOT_LINE = "22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/root rw\n"


def _mountinfo(root, lines):
    with open(root / "proc" / "self" / "mountinfo", "a") as f:
        f.write("".join(lines))


def test_mountinfo_lines_are_read_with_escapes_overmounts_and_the_deepest_mount(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "proc" / "self").mkdir(parents=True)
    _mountinfo(root, [
        ROOT_LINE,
        "40 22 0:50 / /mnt/my\\040data rw,relatime shared:20 - nfs4 10.0.0.5:/export rw,vers=4.2,addr=10.0.0.5\n",
        "41 22 0:51 / /workspace rw,nosuid,nodev,relatime - fuse.juicefs JuiceFS:jfs rw,user_id=0,group_id=0\n",
        "42 41 259:3 / /workspace rw,relatime master:7 - xfs /dev/nvme1n1 rw,attr2\n",
        "43 22 0:52 / /proc rw - proc proc rw\n",
        "not a mountinfo line\n",
    ])
    monkeypatch.setenv("GPUOPS_ROOT", str(root))
    table = disk.mounts()
    assert ("/mnt/my data", "nfs4", "10.0.0.5:/export") in table
    assert disk.filesystem("/mnt/my data/train/shard-0.tar", table)[1] == "nfs4"
    assert disk.filesystem("/workspace/ckpt", table) == ("/workspace", "xfs", "/dev/nvme1n1"), "the later mount hides"
    assert disk.filesystem("/mnt/my database", table)[1] == "ext4", "a name that only starts like the mount point"
    assert disk.filesystem("/", table)[1] == "ext4"


def test_preflight_warns_for_each_data_dir_not_on_local_disk(tmp_path, monkeypatch):
    root, env = compose(tmp_path, "v2-healthy")
    dirs = {name: tmp_path / name for name in ("nfs", "fuse", "overlay", "local")}
    for d in dirs.values():
        d.mkdir()
    _mountinfo(root, [
        f"50 22 0:60 / {dirs['nfs']} rw,relatime shared:30 - nfs4 10.1.2.3:/datasets rw,vers=4.2\n",
        f"51 22 0:61 / {dirs['fuse']} rw,nosuid,nodev,relatime shared:31 - fuse.s3fs s3fs rw,user_id=0\n",
        f"52 22 0:62 / {dirs['overlay']} rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n",
        f"53 22 259:1 / {dirs['local']} rw,relatime shared:33 - ext4 /dev/nvme0n1p1 rw\n",
    ])
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    doc = op.preflight(LocalTarget(), paths=[str(d / "sub") for d in dirs.values()])
    found = {f["evidence"]["path"]: f for f in doc["findings"] if f["id"] == "disk.not-local" and f["severity"] == "warn"}
    assert set(found) == {str(dirs[n] / "sub") for n in ("nfs", "fuse", "overlay")}
    nfs = found[str(dirs["nfs"] / "sub")]
    assert nfs["gotcha"] == "U8" and nfs["evidence"]["fstype"] == "nfs4" and nfs["evidence"]["source"] == "10.1.2.3:/datasets"
    assert "network filesystem (nfs4 from 10.1.2.3:/datasets)" in nfs["title"]
    assert "FUSE" in found[str(dirs["fuse"] / "sub")]["title"] and "overlay" in found[str(dirs["overlay"] / "sub")]["title"]


def _disk(role, path, fstype, source="src"):
    return {"role": role, "path": path, "exists": True, "device": 9, "mount": path, "total_bytes": 1, "free_bytes": 1,
            "total_inodes": 1, "free_inodes": 1, "fstype": fstype, "fs_source": source, "fs_mount": path}


def test_only_data_and_checkpoint_dirs_are_judged_and_the_fix_names_a_local_disk():
    facts = {"disks": [_disk("home", "/root", "ext4"), _disk("durable_dir", "/root/autodl-fs", "fuse.juicefs"),
                       _disk("tmp", "/tmp", "overlay"), _disk("data_dir", "/data", "nfs"),
                       _disk("checkpoint_dir", "/ckpt", "cifs")]}
    found = {f.evidence["path"]: f for f in checks.storage(facts, {}) if f.severity == "warn"}
    assert set(found) == {"/data", "/ckpt"}, "a durable tier is remote by design, /tmp is scratch"
    assert found["/data"].fix.startswith("rsync -a /data/ /root/data/")
    assert "checkpoints to local disk" in found["/ckpt"].fix
    ok = checks.storage({"disks": [_disk("path", "/data", "xfs")]}, {})
    assert [(f.id, f.severity) for f in ok] == [("disk.not-local", "ok")]
    assert checks.storage({"disks": [_disk("home", "/root", "nfs")]}, {}) == []
