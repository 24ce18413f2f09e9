"""`gpuops preflight` end to end: the real CLI, a real sshd per fake box (GPUOPS_ROOT + PATH via
SetEnv), and every way a host can fail to answer."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuops.envelope import SCHEMA_VERSION
from gpuops.ops import preflight as op
from gpuops.remote.targets import target_for
from tests.fixtures.fakegpu.boxes import compose
from tests.rig.sshd import keygen
from tests.sync.conftest import mount_tmpfs

ROOT = Path(__file__).resolve().parent.parent
FINDING_KEYS = {"id", "severity", "title", "evidence", "fix", "gotcha"}


@pytest.fixture(scope="module")
def boxes(rig, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("preflight-boxes")
    _, healthy_env = compose(tmp, "v2-healthy", "healthy")
    _, sick_env = compose(tmp, "v1-oom", "hw-slowdown")
    return {"healthy": rig.box("pf-healthy", env=healthy_env), "sick": rig.box("pf-sick", env=sick_env)}


def preflight_json(cli, *args, env=None):
    r = cli("preflight", "--json", *args, env=env)
    assert r.stderr == "" or r.returncode != 0, r.stderr
    return r.returncode, json.loads(r.stdout)


def by_id(doc, fid):
    return [f for f in doc["findings"] if f["id"] == fid]


def test_healthy_box_over_ssh(cli, boxes):
    box = boxes["healthy"]
    code, doc = preflight_json(cli, "--host", box.spec)
    assert doc["command"] == "preflight" and doc["host"] == box.spec and doc["schema_version"] == SCHEMA_VERSION
    assert doc["data"]["gpu"]["source"] == "nvidia-smi" and len(doc["data"]["gpu"]["devices"]) == 2
    assert doc["data"]["boot"]["boot_id"] == "7c1f0a52-93c4-4c8e-9a53-2f6d0c1e5b10"
    for fid in ("gpu.none", "gpu.xid", "gpu.throttle", "gpu.temperature", "gpu.ecc", "gpu.orphan-memory",
                "mem.oom-kills", "net.rendezvous-port", "detach.missing"):
        assert [f["severity"] for f in by_id(doc, fid)] == ["ok"], fid
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    # Only what is real on this machine can fail here: its disks and memory (a CI runner with a
    # nearly full disk), and its torch, which the suite installs as a CPU build (no CUDA wheel
    # exists for a fake GPU), so cuda.torch rightly says a CPU-only build sits on a GPU box.
    assert all(f["id"].startswith(("disk.", "mem.", "cuda.torch")) for f in fails), fails
    assert code == (1 if fails else 0) and doc["ok"] is (not fails)


def test_oom_killed_and_throttled_box_over_ssh(cli, boxes):
    code, doc = preflight_json(cli, "--host", boxes["sick"].spec)
    assert code == 1 and doc["ok"] is False and doc["summary"].startswith("NOT READY")
    [throttle] = by_id(doc, "gpu.throttle")
    assert (throttle["severity"], throttle["evidence"]["gpu"], throttle["gotcha"]) == ("fail", 0, "U23")
    assert throttle["evidence"]["reasons"] == "hw_slowdown,hw_thermal_slowdown"
    [oom] = by_id(doc, "mem.oom-kills")
    assert (oom["severity"], oom["evidence"]["cgroup_oom_kills"]) == ("warn", 3)
    assert oom["evidence"]["last_victim"] == "python3 (pid 7311, cgroup)"
    [headroom] = by_id(doc, "mem.headroom")
    assert headroom["severity"] == "warn" and headroom["evidence"]["scope"] == "cgroup"
    [boot] = by_id(doc, "boot.recent")
    assert boot["severity"] == "info" and boot["evidence"]["uptime_s"] == 240
    if os.cpu_count() > 1:  # the quota is 1 core: any box with more CPUs oversubscribes
        [threads] = by_id(doc, "cpu.threads")
        assert threads["severity"] == "warn" and threads["fix"] == "export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1"
    assert throttle["fix"] in doc["advice"]
    # the throttle's fix is another box: preflighting this one again would only say the same
    assert "rent another box" in throttle["fix"] and doc["next"] == []
    assert all(FINDING_KEYS <= set(f) for f in doc["findings"])


def test_one_preflight_is_exactly_one_exec_channel(cli, boxes, fresh_logins, quiet_of_ray):
    box = boxes["healthy"]
    before = box.exec_requests()
    cli("preflight", "--json", "--host", box.spec)
    assert box.exec_requests() - before == 1
    t = target_for(box.spec)
    try:
        op.preflight(t)
        op.preflight(t)
    finally:
        t.close()
    assert box.exec_requests() - before == 3 and t.channels_opened == 2


def test_human_output_is_doctor_style_worst_first_with_the_verdict_first_and_last(cli, boxes):
    r = cli("preflight", "--host", boxes["sick"].spec, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{boxes['sick'].spec}: NOT READY")
    assert "2x NVIDIA H100 80GB HBM3, driver 550.54.15 (CUDA <= 12.4)" in lines[1]
    severities = [line.split()[1] for line in lines if line[:2] in ("✗ ", "! ", "i ")]
    order = {"FAIL": 0, "WARN": 1, "INFO": 2}
    assert severities[0] == "FAIL" and severities == sorted(severities, key=order.get)
    assert any(line.startswith("✓ ") and line.endswith(" checks passed (--verbose: evidence and fixes; --all: every "
                                                       "check)") for line in lines)
    assert lines[-1].startswith(f"{boxes['sick'].spec}: NOT READY"), "the verdict is the last row too"
    assert not any(line.startswith("    ") for line in lines), "one line per finding: evidence is --verbose's"
    assert any(line.strip().startswith("advice: ") for line in lines)
    detailed = cli("preflight", "--host", boxes["sick"].spec, "--verbose", env={**os.environ, "COLUMNS": "200"}).stdout
    assert "    reasons: hw_slowdown,hw_thermal_slowdown" in detailed and "    fix: nvidia-smi" in detailed
    listed = cli("preflight", "--host", boxes["sick"].spec, "--all", env={**os.environ, "COLUMNS": "200"}).stdout
    passing = [f["id"] for f in preflight_json(cli, "--host", boxes["sick"].spec)[1]["findings"] if f["severity"] == "ok"]
    assert passing and all(any(line.startswith(f"✓ {fid} ") for line in listed.splitlines()) for fid in passing)


@pytest.mark.parametrize("size", ["abcG", "12x", "tb"])
def test_a_path_whose_size_is_not_one_is_refused_not_taken_for_part_of_the_path(cli, boxes, size):
    """`preflight --path /tmp:abcG` checked a directory named "/tmp:abcG" (missing, so NOT READY for
    the wrong reason) instead of saying the size is not one."""
    code, doc = preflight_json(cli, "--host", boxes["healthy"].spec, "--path", f"/tmp:{size}")
    assert code == 2 and doc["error"]["kind"] == "usage", doc
    assert f"'{size}' is not a size" in doc["error"]["message"]


def test_a_directory_whose_name_holds_a_colon_is_still_a_directory(cli, boxes, tmp_path):
    (tmp_path / "ckpt:v2").mkdir()
    code, doc = preflight_json(cli, "--host", boxes["healthy"].spec, "--path", str(tmp_path / "ckpt:v2"),
                               "--path", f"{tmp_path}:1G")
    disks = {d.get("asked") or d["path"]: d for d in doc["data"]["disks"]}
    assert disks[str(tmp_path / "ckpt:v2")]["exists"] is True and doc["data"]["path_floors"] == {str(tmp_path): 1.0}


def test_unreachable_host_exits_3(cli, rig):
    rig.alias("pf-down")
    code, doc = preflight_json(cli, "--host", "pf-down")
    assert code == 3 and doc["error"]["kind"] == "unreachable" and doc["host"] == "pf-down"


def test_wrong_key_is_auth_failed(cli, rig, boxes, tmp_path):
    stranger = keygen(tmp_path / "stranger")  # not in the box's authorized_keys
    rig.alias("pf-stranger", port=boxes["healthy"].port, IdentityFile=str(stranger))
    for transport in ("openssh", "paramiko"):
        code, doc = preflight_json(cli, "--host", "pf-stranger", env={**os.environ, "GPUOPS_TRANSPORT": transport})
        assert code == 3 and doc["error"]["kind"] == "auth-failed", (transport, doc)
    told = cli("preflight", "--host", "pf-stranger")
    assert told.returncode == 3 and "give its key with --identity FILE" in told.stderr, told.stderr


def test_changed_host_key_is_refused(cli, rig, tmp_path):
    box = rig.box("pf-rekeyed")
    assert cli("preflight", "--json", "--host", box.spec).returncode in (0, 1)  # first use records the key
    box.stop()
    box.host_key = keygen(tmp_path / "new_host_key")
    box.start()
    code, doc = preflight_json(cli, "--host", box.spec)
    assert code == 3 and doc["error"]["kind"] == "host-key-changed" and "ssh-keygen -R" in doc["error"]["message"]


def test_box_without_python3(cli, rig, tmp_path):
    # HOME without a shell rc, so the login shell keeps the PATH that SetEnv gives it, and a PATH
    # holding only what the transport needs: sh and timeout, no python3.
    home, tools = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    tools.mkdir()
    for name in ("sh", "timeout"):
        (tools / name).symlink_to(shutil.which(name))
    box = rig.box("pf-nopython", env={"HOME": str(home), "PATH": str(tools)})
    code, doc = preflight_json(cli, "--host", box.spec)
    assert code == 3 and doc["error"]["kind"] == "python3-missing"


def test_two_hosts_one_down_still_reports_the_good_one(cli, rig, boxes):
    rig.alias("pf-down2")
    code, doc = preflight_json(cli, "--host", f"{boxes['sick'].spec},pf-down2")
    assert code == 3 and doc["ok"] is False and "schema_version" in doc
    good, bad = doc["hosts"]
    assert good["host"] == boxes["sick"].spec and by_id(good, "gpu.throttle")[0]["severity"] == "fail"
    assert bad["host"] == "pf-down2" and bad["error"]["kind"] == "unreachable"
    assert doc["summary"] == "0/2 hosts ok; not ok: pf-sick, pf-down2"


def test_local_preflight_json_is_a_valid_envelope(cli, tmp_path):
    code, doc = preflight_json(cli, "--path", str(tmp_path))
    assert set(doc) == {"schema_version", "command", "ok", "summary", "host", "data", "findings", "next", "advice"}
    assert doc["host"] == "local" and isinstance(doc["summary"], str) and "\n" not in doc["summary"]
    assert all(FINDING_KEYS <= set(f) for f in doc["findings"]) and doc["findings"]
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert code == (1 if fails else 0) and doc["ok"] is (not fails)
    assert [d["path"] for d in doc["data"]["disks"] if d["role"] == "path"] == [str(tmp_path)]
    assert doc["data"]["thresholds"]["disk_min_free_gib"] == 20.0
    if not shutil.which("nvidia-smi"):
        assert by_id(doc, "gpu.none")[0]["severity"] == "fail"


def test_bad_flag_is_usage_exit_2(cli):
    r = cli("preflight", "--hots", "x")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_probe_timeout_is_enforced_on_the_box(cli, rig, tmp_path):
    # A fake nvidia-smi that hangs: the probe's own per-command deadline (15 s) is longer than the
    # --timeout, so the remote `timeout -k` must end it and the host is reported as timed out.
    fake = tmp_path / "hang"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 60\n")
    (fake / "nvidia-smi").chmod(0o755)
    box = rig.box("pf-hang", env={"PATH": f"{fake}:/usr/local/bin:/usr/bin:/bin"})
    code, doc = preflight_json(cli, "--host", box.spec, "--timeout", "2")
    assert code == 3 and doc["error"]["kind"] == "timed-out"


def test_profile_dirs_thresholds_and_inode_cap_reach_the_verdicts(cli, tmp_path):
    pytest.importorskip("gpuops.profiles")
    shipped = (ROOT / "profiles" / "local.toml").read_text()
    data, durable = tmp_path / "data", tmp_path / "durable"
    text = (shipped.replace('data_dir = "~"', f'data_dir = "{data}"')
            .replace('durable_dir = "~"', f'durable_dir = "{durable}"')
            + f'\n[[storage]]\nname = "capped"\npath = "{durable}"\nsurvives_pause = true\n'
              f'survives_destroy = true\ninode_cap = 100\n\n[preflight]\ndisk_min_free_gib = 1000000.0\n')
    profiles_dir = tmp_path / "profiles"
    profiles_dir.mkdir()
    (profiles_dir / "pf-test.toml").write_text(text)
    r = cli("preflight", "--json", "--profile", "pf-test", env={**os.environ, "GPUOPS_PROFILES_DIR": str(profiles_dir)})
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r.stderr
    assert [(d["role"], d["path"]) for d in doc["data"]["disks"] if d["role"] not in ("home", "cwd", "shm", "tmp")] \
        == [("data_dir", str(data)), ("durable_dir", str(durable))]
    assert doc["data"]["thresholds"]["disk_min_free_gib"] == 1000000.0 and doc["data"]["profile"] == "pf-test"
    space = [f for f in by_id(doc, "disk.space") if str(data) in f["evidence"]["for"]]
    assert space[0]["severity"] == "fail" and space[0]["evidence"]["floor_gib"] == 1000000.0
    inodes = [f for f in by_id(doc, "disk.inodes") if str(durable) in f["evidence"]["for"]]
    assert inodes[0]["severity"] == "fail" and inodes[0]["evidence"]["inode_cap"] == 100


@pytest.fixture
def small_disk(tmp_path):
    """A 2 GiB tmpfs (tmpfs reserves nothing up front), unmounted afterwards."""
    mount_tmpfs(tmp_path / "small", "2g", 200000)
    yield tmp_path / "small"
    subprocess.run(["umount", "-l", str(tmp_path / "small")], capture_output=True)


def space_for(doc, path):
    return [f for f in by_id(doc, "disk.space") if str(path) in f["evidence"]["for"]]


def test_small_config_dir_path_is_not_failed_on_the_20_gib_checkpoint_floor(cli, small_disk):
    config = small_disk / "config"
    _, doc = preflight_json(cli, "--path", str(config))
    [space] = space_for(doc, config)
    assert (space["severity"], space["evidence"]["floor_gib"]) == ("ok", 1.0), space
    _, doc = preflight_json(cli, "--path", f"{config}:100M", "--path", f"{small_disk / 'ckpt'}:10G")
    [space] = space_for(doc, small_disk)
    assert (space["severity"], space["evidence"]["floor_gib"]) == ("fail", 10.0), space
    assert space["evidence"]["floor_from"] == f"--path {small_disk / 'ckpt'}:SIZE"
    assert [d["path"] for d in doc["data"]["disks"] if d["role"] == "path"] == [str(config), str(small_disk / "ckpt")]


@pytest.mark.parametrize("arg,expected", [
    ("/data/ckpt:200G", ("/data/ckpt", 200.0)), ("/data:1.5T", ("/data", 1536.0)), ("/d:512M", ("/d", 0.5)),
    ("/d:300GiB", ("/d", 300.0)), ("/d:20", ("/d", 20.0)), ("/odd:name", ("/odd:name", None)),
    ("/plain", ("/plain", None)),
])
def test_path_size_suffix(arg, expected):
    assert op.sized_path(arg) == expected



def test_preflight_again_only_when_the_fix_is_made_on_this_box():
    from gpuops.findings import Finding

    fixable = Finding("cpu.threads", "warn", "t", fix="export OMP_NUM_THREADS=1")
    hardware = Finding("gpu.throttle", "fail", "t", fix="nvidia-smi -q   # ... stop this instance and rent another box")
    nxt, advice = op.next_steps([fixable], "box", None, [], True)
    assert nxt[0]["argv"] == ["gpuops", "preflight", "--host", "box"] and advice == [fixable.fix]
    nxt, advice = op.next_steps([fixable, hardware], "box", None, [], True)
    assert nxt == [] and advice == [fixable.fix, hardware.fix]
