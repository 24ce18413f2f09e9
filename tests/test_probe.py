"""The on-box probe, run for real: on this machine, under fixture sysroots with fake nvidia-smi
scenarios (GPUOPS_ROOT + PATH), with real processes holding fixture device files, and under the
oldest python3 it promises to support."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuops.remote.local import LocalTarget
from tests.fixtures.fakegpu.boxes import SYSTEM_PATH, compose


def run_probe(*args):
    return LocalTarget().run_onbox("probe", list(args))


@pytest.fixture
def box(tmp_path, monkeypatch):
    """Point this process's environment (inherited by the probe) at a composed fake box."""
    def make(sysroot, scenario=None):
        root, env = compose(tmp_path, sysroot, scenario)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        return root
    return make


def test_probe_on_this_machine_degrades_to_facts_without_a_gpu(monkeypatch):
    monkeypatch.delenv("GPUOPS_ROOT", raising=False)
    monkeypatch.setenv("PATH", SYSTEM_PATH)  # no nvidia-smi anywhere on it
    facts = run_probe()
    assert facts["errors"] == {}
    g = facts["gpu"]
    assert g["devices"] == [] and "nvidia-smi" in g["error"]
    assert facts["boot"]["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert facts["cpu"]["visible"] == len(os.sched_getaffinity(0))
    assert facts["cgroup"]["version"] in ("v1", "v2", "none")
    assert {d["role"] for d in facts["disks"]} >= {"home", "cwd", "shm", "tmp"}
    log = facts["kernlog"]
    assert log["readable"] or log["tried"], "an unreadable kernel log must say what was tried"


def test_paths_get_bytes_and_inodes_even_before_they_exist(tmp_path):
    target = tmp_path / "ckpt" / "run1"
    before = os.statvfs(tmp_path)
    facts = run_probe("--path", str(target), "--path", str(tmp_path))
    after = os.statvfs(tmp_path)
    pending, present = [d for d in facts["disks"] if d["role"] == "path"]
    assert pending["exists"] is False and pending["measured_at"] == str(tmp_path)
    assert present["exists"] is True
    assert present["total_inodes"] == after.f_files
    # The disk is shared with whatever else runs: the probe's reading lies between the two taken
    # around it (a fixed tolerance failed once when another process wrote 190 MB meanwhile).
    free = sorted(st.f_bavail * st.f_frsize for st in (before, after))
    assert free[0] - 8 * 2**20 <= present["free_bytes"] <= free[1] + 8 * 2**20


def test_cgroup_v2_box_with_healthy_gpus(box):
    box("v2-healthy", "healthy")
    facts = run_probe()
    assert facts["errors"] == {}
    cg = facts["cgroup"]
    assert (cg["version"], cg["memory"]["limit_bytes"], cg["cpu"]["quota_cores"]) == ("v2", 64 * 2**30, 16.0)
    assert cg["memory"]["oom_kills"] == 0
    g = facts["gpu"]
    assert (g["source"], g["driver"], g["cuda_max"]) == ("nvidia-smi", "550.54.15", "12.4")
    assert [(d["index"], d["minor"], d["slowdown_temp_c"], d["throttle_mask"]) for d in g["devices"]] == [
        (0, 0, 87.0, 1), (1, 1, 87.0, 1)]
    assert {"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"} <= set(g["device_nodes"])
    log = facts["kernlog"]
    assert log["readable"] and log["source"] == "kern.log (GPUOPS_ROOT)"
    assert log["xid"] == [], "the Xid 79 before the last boot banner belongs to a previous boot"
    assert facts["boot"]["boot_id"] == "7c1f0a52-93c4-4c8e-9a53-2f6d0c1e5b10"
    assert facts["boot"]["uptime_s"] == 86400.52


def test_cgroup_v1_container_that_was_oom_killed(box):
    box("v1-oom", "healthy")
    facts = run_probe()
    mem = facts["cgroup"]["memory"]
    assert (facts["cgroup"]["version"], mem["oom_kills"], mem["limit_bytes"]) == ("v1", 3, 16 * 2**30)
    assert facts["cgroup"]["cpu"]["quota_cores"] == 1.0
    [victim] = facts["kernlog"]["oom_kills"]
    assert {k: victim[k] for k in ("pid", "comm", "kind", "constraint", "oom_memcg", "task_memcg")} == {
        "pid": 7311, "comm": "python3", "kind": "cgroup", "constraint": "CONSTRAINT_MEMCG",
        "oom_memcg": "/docker/5f2c0e", "task_memcg": "/docker/5f2c0e"}
    assert "Memory cgroup out of memory" in victim["line"] and victim["at"] is not None
    assert mem["namespace_root"] == "/docker/5f2c0e"
    assert [(c["scope"], c["oom_kills"]) for c in mem["oom_counters"]] == [("root", 3)]


def test_xid79_with_a_hex_bus_id_is_read_and_lost_values_are_null(box):
    box("v2-healthy", "xid79")
    facts = run_probe()
    xids = {(x["code"], x["pci"]) for x in facts["kernlog"]["xid"]}
    assert xids == {(13, "0000:1b:00"), (79, "0000:3b:00")}, "Xid 48 was logged before this boot"
    assert facts["kernlog"]["fallen_off_bus"][0]["pci"] == "0000:3b:00"
    lost = facts["gpu"]["devices"][1]
    assert lost["bus_id"] == "00000000:3B:00.0"
    assert (lost["util_pct"], lost["temp_c"], lost["power_w"]) == (None, None, None)


def test_old_driver_that_rejects_a_field_still_reports_the_core_set(box):
    box("v2-healthy", "old-driver")
    g = run_probe()["gpu"]
    assert len(g["devices"]) == 2 and g["error"] is None
    assert g["devices"][0]["compute_cap"] is None and g["devices"][0]["memory_total_mib"] == 81559.0
    assert g["cuda_max"] == "11.4"
    assert any("core set" in n for n in g["notes"])


def test_overlay_never_runs_dmesg_and_says_when_it_has_no_log(box, tmp_path, monkeypatch):
    root = box("v2-healthy", "healthy")
    (root / "var" / "log" / "kern.log").unlink()
    spy = tmp_path / "spybin"
    spy.mkdir()
    marker = tmp_path / "dmesg-ran"
    for tool in ("dmesg", "journalctl"):
        (spy / tool).write_text(f"#!/bin/sh\ntouch {marker}\necho 'NVRM: Xid (PCI:0000:3b:00): 79, x'\n")
        (spy / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{spy}:{os.environ['PATH']}")
    log = run_probe()["kernlog"]
    assert not marker.exists(), "under GPUOPS_ROOT the kernel log comes from the overlay only"
    assert log["readable"] is False and "kern.log" in log["tried"][0]["source"]


def test_device_holders_are_real_processes_and_our_own_chain_is_left_out(box):
    root = box("v2-healthy", "orphan-memory")
    with open(root / "dev" / "nvidia0", "rb"):  # held by pytest, an ancestor of the probe
        holder = subprocess.Popen(["sleep", "30"], stdin=open(root / "dev" / "nvidia1", "rb"))
        try:
            g = run_probe()["gpu"]
        finally:
            holder.kill()
            holder.wait()
    held = {h["pid"]: h for h in g["holders"]}
    assert held[holder.pid]["devices"] == ["/dev/nvidia1"] and held[holder.pid]["comm"] == "sleep"
    assert os.getpid() not in held


def test_listener_is_reported_with_its_owner(monkeypatch):
    monkeypatch.delenv("GPUOPS_ROOT", raising=False)
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import socket, sys, time
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
        print(s.getsockname()[1], flush=True); time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        listeners = {l["port"]: l for l in run_probe()["listeners"]}
    finally:
        server.kill()
        server.wait()
    assert listeners[port]["address"] == "127.0.0.1"
    assert [o["pid"] for o in listeners[port]["owners"]] == [server.pid]


def test_a_broken_pynvml_falls_back_to_nvidia_smi_and_leaves_no_bytecode(box, tmp_path, monkeypatch):
    box("v2-healthy", "healthy")
    lib = tmp_path / "site"
    lib.mkdir()
    (lib / "pynvml.py").write_text(textwrap.dedent("""
        class NVMLError(Exception):
            pass
        def nvmlInit():
            raise NVMLError("Driver Not Loaded")
    """))
    monkeypatch.setenv("PYTHONPATH", str(lib))
    monkeypatch.delenv("GPUOPS_ROOT")  # under the overlay NVML is never asked; the fake nvidia-smi stays on PATH
    g = run_probe()["gpu"]
    assert g["nvml"] == "Driver Not Loaded" and g["source"] == "nvidia-smi" and len(g["devices"]) == 2
    assert not (lib / "__pycache__").exists(), "the probe must not write bytecode on the box"


def _python36():
    for candidate in (shutil.which("python3.6"), os.path.expanduser("~/.pyenv/versions/3.6.15/bin/python3")):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


@pytest.mark.skipif(_python36() is None, reason="no python3.6 on this machine")
def test_probe_runs_on_python36(box, tmp_path, monkeypatch):
    box("v1-oom", "hw-slowdown")
    bin_dir = tmp_path / "py36"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(_python36())
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    facts = run_probe("--path", str(tmp_path))
    assert facts["host"]["python"].startswith("3.6.")
    assert facts["errors"] == {}
    assert facts["gpu"]["devices"][0]["throttle_mask"] == 0x48
