"""The checks are pure: fact documents in, findings out. Each rule is shown to fire and to stay
quiet, with the evidence and the fix it promises."""

import copy

import pytest

from gpuops import checks
from gpuops.checks.thresholds import DEFAULTS, merged
from gpuops.errors import UsageError

GIB = 2**30


def gpu(index, bus, **kw):
    d = {"index": index, "uuid": f"GPU-{index}", "name": "NVIDIA H100 80GB HBM3", "bus_id": bus, "minor": index,
         "compute_cap": "9.0", "memory_total_mib": 81559.0, "memory_used_mib": 1.0, "util_pct": 0.0, "temp_c": 35.0,
         "slowdown_temp_c": 87.0, "sm_clock_mhz": 345.0, "sm_clock_max_mhz": 1980.0, "power_w": 70.0,
         "power_limit_w": 700.0, "throttle_mask": 0x1, "ecc_dbe_volatile": 0, "retired_pages_dbe": None,
         "retired_pages_pending": None, "remap_failure": False, "remap_pending": False, "unavailable": {}}
    d.update(kw)
    return d


def disk(role, path, device, free_gib=500, total_gib=1000, free_inodes=10**7, total_inodes=2 * 10**7):
    return {"role": role, "path": path, "exists": True, "device": device, "mount": "/" if device == 1 else path,
            "total_bytes": total_gib * GIB, "free_bytes": free_gib * GIB,
            "total_inodes": total_inodes, "free_inodes": free_inodes}


def healthy():
    return {
        "probe_version": 2, "errors": {},
        "gpu": {"source": "nvidia-smi", "driver": "550.54.15", "cuda_max": "12.4", "error": None, "notes": [],
                "devices": [gpu(0, "00000000:1B:00.0"), gpu(1, "00000000:3B:00.0")], "processes": [],
                "device_nodes": ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"],
                "kernel_module": "NVRM version: 550.54.15", "holders": [], "holders_unreadable": 0},
        "host": {"python": "3.10.12", "python_executable": "/usr/bin/python3"},
        "boot": {"boot_id": "b", "uptime_s": 86400.0, "btime": 1, "now": 86401},
        "memory": {"host_total_bytes": 512 * GIB, "host_available_bytes": 400 * GIB},
        "cgroup": {"version": "v2", "memory": {"limit_bytes": 64 * GIB, "working_set_bytes": 8 * GIB, "oom_kills": 0,
                                               "counter_file": "/sys/fs/cgroup/job/memory.events"},
                   "cpu": {"quota_cores": 16.0}},
        "cpu": {"visible": 16, "host": 16, "quota_cores": 16.0},
        "env": {},
        "disks": [disk("home", "/root", 1), disk("cwd", "/root", 1), disk("shm", "/dev/shm", 2, 64, 64),
                  disk("tmp", "/tmp", 1)],
        "tools": {"tmux": True, "screen": False, "setsid": True, "nohup": True, "nvidia-smi": True},
        "listeners": [{"port": 22, "address": "0.0.0.0", "family": "ipv4", "inode": 1, "owners": []}],
        "kernlog": {"readable": True, "source": "dmesg", "tried": [], "xid": [], "fallen_off_bus": [],
                    "oom_kill_count": 0, "oom_kills": [], "lines_scanned": 900},
        "torch": {"installed": True, "version": "2.3.1+cu121", "cuda": "12.1",
                  "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]},
    }


def by_id(findings, fid, severity=None):
    return [f for f in findings if f.id == fid and (severity is None or f.severity == severity)]


def test_a_healthy_box_has_only_ok_findings_and_every_area_is_judged():
    findings = checks.evaluate(healthy())
    assert {f.severity for f in findings} == {"ok"}
    assert {f.id for f in findings} >= {"gpu.none", "gpu.xid", "gpu.throttle", "gpu.temperature", "gpu.ecc",
                                        "gpu.orphan-memory", "mem.oom-kills", "mem.headroom", "cpu.threads",
                                        "disk.space", "disk.inodes", "disk.shm", "cuda.torch", "boot.recent",
                                        "detach.missing", "net.rendezvous-port"}


def test_findings_come_worst_first_and_carry_gotcha_ids():
    f = healthy()
    f["kernlog"]["xid"] = [{"code": 79, "pci": "0000:3b:00", "count": 1, "last_line": "x"}]
    f["env"]["OMP_NUM_THREADS"] = "64"
    findings = checks.evaluate(f)
    assert [x.severity for x in findings[:2]] == ["fail", "warn"]
    assert all(x.gotcha for x in findings if x.severity in ("fail", "warn") and x.id != "net.rendezvous-port")


@pytest.mark.parametrize("change,fix_has", [
    # no driver and no device node: running nvidia-smi fixes nothing; checking the rented box does
    (lambda g, e: g.update(devices=[], error="nvidia-smi --query-gpu: not found on PATH", kernel_module=None,
                           device_nodes=[]), "gpuops preflight --host BOX"),
    (lambda g, e: (g.update(devices=[], device_nodes=[]), None), "--gpus all"),
    (lambda g, e: (g.update(devices=[]), e.update(CUDA_VISIBLE_DEVICES="")), "unset CUDA_VISIBLE_DEVICES"),
])
def test_no_gpu_visible_fails_with_the_likely_cause(change, fix_has):
    f = healthy()
    change(f["gpu"], f["env"])
    [finding] = by_id(checks.evaluate(f), "gpu.none")
    assert finding.severity == "fail" and finding.gotcha == "U31" and fix_has in finding.fix


def test_fatal_xid_on_a_hex_bus_id_fails_on_the_right_gpu():
    f = healthy()
    f["kernlog"]["xid"] = [{"code": 79, "pci": "0000:3b:00", "count": 2, "last_line": "NVRM: Xid ... 79"},
                           {"code": 13, "pci": "0000:1b:00", "count": 1, "last_line": "NVRM: Xid ... 13"}]
    findings = by_id(checks.evaluate(f), "gpu.xid")
    assert [(x.severity, x.evidence["xid"], x.evidence["gpu"]) for x in findings] == [("fail", 79, 1), ("warn", 13, 0)]
    assert "GPU 1 (00000000:3B:00.0)" in findings[0].title and findings[0].gotcha == "U22"


@pytest.mark.parametrize("code,severity", [(48, "fail"), (62, "fail"), (64, "fail"), (74, "fail"), (95, "fail"),
                                           (119, "fail"), (120, "fail"), (13, "warn"), (31, "warn"), (43, "warn"),
                                           (45, "warn"), (63, "warn"), (999, "warn")])
def test_xid_classes(code, severity):
    f = healthy()
    f["kernlog"]["xid"] = [{"code": code, "pci": "0000:1b:00", "count": 1, "last_line": ""}]
    assert by_id(checks.evaluate(f), "gpu.xid")[0].severity == severity


def test_fallen_off_the_bus_without_an_xid_line_counts_as_79():
    f = healthy()
    f["kernlog"]["fallen_off_bus"] = [{"pci": "0000:3b:00", "count": 1, "last_line": "fallen off the bus"}]
    [x] = by_id(checks.evaluate(f), "gpu.xid")
    assert (x.severity, x.evidence["xid"], x.evidence["gpu"]) == ("fail", 79, 1)


def test_xid_on_a_gpu_not_visible_here_warns_since_a_shared_host_logs_every_tenant():
    f = healthy()
    f["kernlog"]["xid"] = [{"code": 79, "pci": "0000:af:00", "count": 1, "last_line": "x"},
                           {"code": 13, "pci": "0000:b0:00", "count": 1, "last_line": "x"}]
    findings = by_id(checks.evaluate(f), "gpu.xid")
    assert [(x.severity, x.evidence["xid"], x.evidence["gpu"]) for x in findings] == [("warn", 79, None),
                                                                                     ("info", 13, None)]
    assert "not visible here" in findings[0].title and findings[0].fix.startswith("nvidia-smi -L")


def lost_box(node=True):
    """GPU 1 fell off the bus: the driver still has it, nvidia-smi lists only GPU 0."""
    f = healthy()
    f["gpu"]["devices"] = f["gpu"]["devices"][:1]
    f["gpu"]["driver_gpus"] = [{"bus_id": "0000:1b:00.0", "minor": 0, "node": True},
                               {"bus_id": "0000:3b:00.0", "minor": 1, "node": node}]
    f["kernlog"]["xid"] = [{"code": 79, "pci": "0000:3b:00", "count": 1,
                            "last_line": "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
                                         "GPU has fallen off the bus."}]
    return f


def test_xid79_on_a_gpu_the_driver_has_but_nvidia_smi_lost_fails_as_lost():
    findings = checks.evaluate(lost_box())
    [x] = by_id(findings, "gpu.lost")
    assert (x.severity, x.evidence["pci"], x.evidence["xid"], x.gotcha) == ("fail", "0000:3b:00", 79, "U22")
    assert "no longer lists it" in x.title and "reboot" in x.fix
    assert not by_id(findings, "gpu.xid", "warn"), "not downgraded to 'a GPU not visible here'"


def test_fallen_off_line_alone_on_a_lost_gpu_fails_too():
    f = lost_box()
    f["kernlog"]["xid"] = []
    f["kernlog"]["fallen_off_bus"] = [{"pci": "0000:3b:00", "count": 1,
                                       "last_line": "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."}]
    assert [x.severity for x in by_id(checks.evaluate(f), "gpu.lost")] == ["fail"]


def test_xid79_on_a_bus_id_whose_device_node_is_not_here_stays_another_tenants_warning():
    f = lost_box(node=False)
    findings = checks.evaluate(f)
    assert not by_id(findings, "gpu.lost")
    [x] = by_id(findings, "gpu.xid")
    assert x.severity == "warn" and "not visible here" in x.title


def test_xid79_on_a_bus_id_the_driver_does_not_list_here_stays_another_tenants_warning():
    f = lost_box()
    f["kernlog"]["xid"][0]["pci"] = "0000:5e:00"  # a shared host's log: a GPU this container was never given
    findings = checks.evaluate(f)
    assert not by_id(findings, "gpu.lost")
    [x] = by_id(findings, "gpu.xid")
    assert (x.severity, x.evidence["pci"]) == ("warn", "0000:5e:00") and "not visible here" in x.title


def test_unreadable_kernel_log_is_said_not_passed_as_clean():
    f = healthy()
    f["kernlog"] = {"readable": False, "source": None,
                    "tried": [{"source": "dmesg", "why": "Operation not permitted"}]}
    findings = checks.evaluate(f)
    [x] = by_id(findings, "kernlog.unreadable")
    assert x.severity == "info" and "Operation not permitted" in x.evidence["tried"]
    assert not by_id(findings, "gpu.xid"), "no Xid verdict without a log"


@pytest.mark.parametrize("mask,severity,reason", [(0x8, "fail", "hw_slowdown"), (0x40, "fail", "hw_thermal_slowdown"),
                                                  (0x80, "fail", "hw_power_brake"),
                                                  (0x20, "warn", "sw_thermal_slowdown")])
def test_throttle_reasons(mask, severity, reason):
    f = healthy()
    f["gpu"]["devices"][0]["throttle_mask"] = mask | 0x4
    [x] = by_id(checks.evaluate(f), "gpu.throttle")
    assert (x.severity, x.evidence["gpu"], x.gotcha) == (severity, 0, "U23")
    assert reason in x.evidence["reasons"] and x.evidence["mask"] == hex(mask | 0x4)


def test_power_cap_and_idle_bits_are_not_throttling():
    f = healthy()
    f["gpu"]["devices"][0]["throttle_mask"] = 0x1 | 0x4
    assert [x.severity for x in by_id(checks.evaluate(f), "gpu.throttle")] == ["ok"]


def test_near_slowdown_temperature_warns():
    f = healthy()
    f["gpu"]["devices"][1].update(temp_c=83.0)
    [x] = by_id(checks.evaluate(f), "gpu.temperature")
    assert x.severity == "warn" and x.evidence == {"gpu": 1, "temp_c": 83.0, "slowdown_temp_c": 87.0, "warn_at_c": 82.0}
    f["gpu"]["devices"][1].update(temp_c=81.0)
    assert by_id(checks.evaluate(f), "gpu.temperature")[0].severity == "ok"


def test_unknown_slowdown_point_falls_back_to_the_absolute_threshold():
    f = healthy()
    f["gpu"]["devices"][0].update(temp_c=84.0, slowdown_temp_c=None)
    [x] = by_id(checks.evaluate(f), "gpu.temperature")
    assert x.severity == "warn" and x.evidence["warn_at_c"] == DEFAULTS["temp_warn_c"]


@pytest.mark.parametrize("fields,severity", [({"ecc_dbe_volatile": 1}, "fail"), ({"remap_failure": True}, "fail"),
                                             ({"retired_pages_dbe": 63}, "fail"), ({"remap_pending": True}, "warn"),
                                             ({"retired_pages_dbe": 3}, "ok")])
def test_memory_errors(fields, severity):
    f = healthy()
    f["gpu"]["devices"][1].update(fields)
    findings = by_id(checks.evaluate(f), "gpu.ecc")
    assert findings[0].severity == severity
    if severity != "ok":
        assert findings[0].evidence["gpu"] == 1


def test_memory_held_with_no_listed_process_names_the_holders_from_proc():
    f = healthy()
    f["gpu"]["devices"][1]["memory_used_mib"] = 30412.0
    f["gpu"]["holders"] = [{"pid": 5150, "comm": "pt_data_worker", "devices": ["/dev/nvidia1", "/dev/nvidiactl"]},
                           {"pid": 6000, "comm": "nvtop", "devices": ["/dev/nvidiactl"]}]
    [x] = by_id(checks.evaluate(f), "gpu.orphan-memory")
    assert (x.severity, x.gotcha, x.evidence["gpu"], x.evidence["used_mib"]) == ("warn", "U11", 1, 30412)
    assert x.evidence["holders"] == "5150(pt_data_worker)" and "kill 5150" in x.fix


def test_memory_accounted_for_by_a_listed_process_is_fine_and_unseen_holders_say_so():
    f = healthy()
    f["gpu"]["devices"][0]["memory_used_mib"] = 20480.0
    f["gpu"]["processes"] = [{"pid": 1, "name": "python3", "used_mib": 20470.0, "bus_id": "00000000:1B:00.0"}]
    f["gpu"]["devices"][1]["memory_used_mib"] = 4096.0
    [x] = by_id(checks.evaluate(f), "gpu.orphan-memory")
    assert x.evidence["gpu"] == 1 and x.evidence["holders"] == "none visible" and "container" in x.fix


def test_oom_kill_counter_and_kernel_victims():
    f = healthy()
    f["cgroup"]["memory"]["oom_kills"] = 3
    f["kernlog"]["oom_kills"] = [{"pid": 7311, "comm": "python3", "kind": "cgroup", "line": "..."}]
    f["kernlog"]["oom_kill_count"] = 1
    [x] = by_id(checks.evaluate(f), "mem.oom-kills")
    assert (x.severity, x.gotcha, x.evidence["cgroup_oom_kills"]) == ("warn", "U41", 3)
    assert x.evidence["last_victim"] == "python3 (pid 7311, cgroup)" and "memory.events" in x.fix
    f["cgroup"]["memory"]["oom_kills"] = None  # no counter: the kernel log is all there is
    f["kernlog"]["oom_kills"][0]["kind"] = "global"
    [x] = by_id(checks.evaluate(f), "mem.oom-kills")
    assert (x.severity, x.gotcha) == ("warn", "U9")


SESSION_OOM = {"pid": 1234, "comm": "python", "kind": "cgroup", "at": 1772586031.0,
               "line": "Memory cgroup out of memory: Killed process 1234 (python) ...", "constraint": "CONSTRAINT_MEMCG",
               "oom_memcg": "/user.slice/user-0.slice/session-3.scope",
               "task_memcg": "/user.slice/user-0.slice/session-3.scope"}


def session_box(victim):
    f = healthy()
    f["cgroup"]["memory"].update(path="/user.slice/user-0.slice/session-7.scope", namespace_root="/", oom_kills=0,
                                 oom_counters=[{"scope": "session", "dir": "/sys/fs/cgroup/user.slice/user-0.slice/"
                                                "session-7.scope", "file": "/sys/fs/cgroup/user.slice/user-0.slice/"
                                                "session-7.scope/memory.events", "oom_kills": 0, "job_id": None}])
    f["kernlog"].update(oom_kills=[victim], oom_kill_count=1)
    return f


def test_ssh_session_cgroup_counter_at_zero_does_not_hide_an_oom_kill_in_the_kernel_log():
    [x] = by_id(checks.evaluate(session_box(dict(SESSION_OOM))), "mem.oom-kills")
    assert (x.severity, x.gotcha) == ("warn", "U41")
    assert "python (pid 1234) at 2026-03-04 01:00:31 UTC" in x.title
    assert "/user.slice/user-0.slice/session-3.scope" in x.title
    assert "session 0" in x.evidence["counters"] and "[unproven]" in x.evidence["victims"]


def test_a_victim_without_a_cgroup_on_its_line_is_not_assumed_to_be_a_neighbours():
    victim = {k: v for k, v in SESSION_OOM.items() if k not in ("oom_memcg", "task_memcg", "constraint", "at")}
    [x] = by_id(checks.evaluate(session_box(victim)), "mem.oom-kills")
    assert x.severity == "warn" and "names no cgroup" in x.title and "an unknown time" in x.title


def test_an_oom_victim_provably_in_another_container_is_ok_and_says_so():
    f = session_box(dict(SESSION_OOM, oom_memcg="/docker/aaa111", task_memcg="/docker/aaa111"))
    f["cgroup"]["memory"].update(path="/docker/5f2c0e", namespace_root="/docker/5f2c0e")
    [x] = by_id(checks.evaluate(f), "mem.oom-kills")
    assert x.severity == "ok" and "outside this container's /docker/5f2c0e" in x.title
    f["kernlog"]["oom_kills"][0].update(task_memcg="/docker/5f2c0e/train", oom_memcg="/docker/5f2c0e")
    [x] = by_id(checks.evaluate(f), "mem.oom-kills")
    assert x.severity == "warn" and "inside this container's /docker/5f2c0e" in x.title


def test_a_recorded_jobs_cgroup_counter_counts_though_the_session_reads_zero():
    f = session_box(dict(SESSION_OOM, oom_memcg="/docker/aaa111", task_memcg="/docker/aaa111"))
    f["cgroup"]["memory"].update(namespace_root="/docker/5f2c0e")
    f["cgroup"]["memory"]["oom_counters"].append(
        {"scope": "job", "dir": "/sys/fs/cgroup/train", "file": "/sys/fs/cgroup/train/memory.events",
         "oom_kills": 2, "job_id": "20261122-101500-a1b2c3"})
    [x] = by_id(checks.evaluate(f), "mem.oom-kills")
    assert (x.severity, x.gotcha) == ("warn", "U41") and "job 20261122-101500-a1b2c3" in x.title
    assert x.fix.startswith("grep oom_kill /sys/fs/cgroup/train/memory.events")


def test_headroom_judged_by_the_cgroup_not_the_host():
    f = healthy()
    f["cgroup"]["memory"].update(limit_bytes=16 * GIB, working_set_bytes=int(15.5 * GIB))
    [x] = by_id(checks.evaluate(f), "mem.headroom")
    assert (x.severity, x.evidence["scope"], x.evidence["free_gib"]) == ("warn", "cgroup", 0.5)


@pytest.mark.parametrize("cpu,env,severity,usable", [
    ({"visible": 64, "host": 64, "quota_cores": 12.5}, {}, "warn", 12),
    ({"visible": 8, "host": 64, "quota_cores": None}, {}, "warn", 8),
    ({"visible": 64, "host": 64, "quota_cores": 12.5}, {"OMP_NUM_THREADS": "12"}, "ok", 12),
    ({"visible": 64, "host": 64, "quota_cores": 4.0}, {"OMP_NUM_THREADS": "32"}, "warn", 4),
    ({"visible": 16, "host": 16, "quota_cores": None}, {}, "ok", 16),
])
def test_thread_caps(cpu, env, severity, usable):
    f = healthy()
    f["cpu"], f["env"] = cpu, env
    [x] = by_id(checks.evaluate(f), "cpu.threads")
    assert (x.severity, x.evidence["usable"]) == (severity, usable)
    if severity == "warn":
        assert x.fix == f"export OMP_NUM_THREADS={usable} MKL_NUM_THREADS={usable}" and x.gotcha == "U40"


def test_bytes_and_inodes_floors_per_filesystem():
    f = healthy()
    f["disks"].append(disk("checkpoint_dir", "/data", 3, free_gib=5, free_inodes=40000, total_inodes=10**6))
    f["disks"].append(disk("tmp", "/scratch", 4, free_gib=1, free_inodes=10))
    findings = checks.evaluate(f)
    space = {x.evidence["for"]: x for x in by_id(findings, "disk.space")}
    inodes = {x.evidence["for"]: x for x in by_id(findings, "disk.inodes")}
    assert (space["/data"].severity, space["/data"].gotcha, space["/data"].evidence["free_gib"]) == ("fail", "U6", 5.0)
    assert (inodes["/data"].severity, inodes["/data"].gotcha) == ("fail", "U7")
    assert "du --inodes" in inodes["/data"].fix
    assert space["tmp"].severity == "warn" and inodes["tmp"].severity == "warn", "/tmp alone only warns"
    assert space["home, cwd, tmp"].severity == "ok", "one filesystem, judged once under its strictest role"


def test_a_small_config_dir_passed_as_path_is_not_failed_on_the_checkpoint_floor():
    f = healthy()
    f["disks"].append(disk("path", "/etc/myrun", 3, free_gib=4, total_gib=8))
    [x] = [x for x in by_id(checks.evaluate(f), "disk.space") if x.evidence["for"] == "/etc/myrun"]
    assert (x.severity, x.evidence["floor_gib"]) == ("ok", DEFAULTS["path_min_free_gib"])
    assert "no :SIZE given" in x.evidence["floor_from"]
    f["disks"][-1]["free_bytes"] = int(0.5 * GIB)  # even a config dir needs room for its files
    [x] = [x for x in by_id(checks.evaluate(f), "disk.space") if x.evidence["for"] == "/etc/myrun"]
    assert x.severity == "fail"


def test_a_path_given_with_a_size_is_held_to_that_size():
    f = healthy()
    f["disks"].append(dict(disk("path", "/root/ckpt", 3, free_gib=150), asked="~/ckpt"))
    f["path_floors"] = {"~/ckpt": 200.0}
    [x] = [x for x in by_id(checks.evaluate(f), "disk.space") if x.evidence["for"] == "/root/ckpt"]
    assert (x.severity, x.evidence["floor_gib"], x.evidence["floor_from"]) == ("fail", 200.0, "--path ~/ckpt:SIZE")
    f["path_floors"] = {"~/ckpt": 100.0}
    assert [x.severity for x in by_id(checks.evaluate(f), "disk.space") if x.evidence["for"] == "/root/ckpt"] == ["ok"]


def test_profile_data_dir_keeps_the_run_floor_where_it_shares_a_disk_with_a_small_path():
    f = healthy()
    f["disks"] += [disk("data_dir", "/root/autodl-tmp", 3, free_gib=10), disk("path", "/root/autodl-tmp/cfg", 3,
                                                                              free_gib=10)]
    [x] = [x for x in by_id(checks.evaluate(f), "disk.space") if "/root/autodl-tmp" in x.evidence["for"]]
    assert (x.severity, x.evidence["floor_gib"]) == ("fail", DEFAULTS["disk_min_free_gib"])
    assert x.evidence["for"] == "/root/autodl-tmp, /root/autodl-tmp/cfg"


def test_profile_inode_cap_tightens_the_inode_count():
    f = healthy()
    f["disks"].append(disk("path", "/root/autodl-fs", 3, free_inodes=9 * 10**7, total_inodes=10**8))
    f["inode_caps"] = {"/root/autodl-fs": 200000}
    x = [x for x in by_id(checks.evaluate(f), "disk.inodes") if x.evidence["for"] == "/root/autodl-fs"][0]
    assert x.evidence["inode_cap"] == 200000 and x.evidence["free_inodes"] == 0 and x.severity == "fail"


def test_small_dev_shm_warns():
    f = healthy()
    f["disks"][2].update(total_bytes=64 * 2**20, free_bytes=64 * 2**20)
    [x] = by_id(checks.evaluate(f), "disk.shm")
    assert x.severity == "warn" and "--shm-size" in x.fix and x.evidence["size_gib"] == 0.06 and x.gotcha == "GEN9"


def test_data_on_nfs_warns_even_when_no_local_disk_is_known_to_copy_it_to():
    # It crashed (None.rstrip) until the coverage fixtures ran it: no disk here says its fstype.
    f = healthy()
    f["disks"].append(dict(disk("data_dir", "/mnt/data", 3), fstype="nfs4"))
    findings = checks.evaluate(f)
    [x] = by_id(findings, "disk.not-local")
    assert (x.severity, x.gotcha) == ("warn", "U8") and "local NVMe" in x.fix and not by_id(findings, "check.crashed")


@pytest.mark.parametrize("torch_cuda,driver_cuda,severity,wheel", [
    ("12.1", "11.8", "fail", "cu118"), ("12.4", "12.2", "warn", "cu121"), ("12.1", "12.4", "ok", None),
])
def test_torch_cuda_build_against_the_driver(torch_cuda, driver_cuda, severity, wheel):
    f = healthy()
    f["torch"]["cuda"], f["gpu"]["cuda_max"] = torch_cuda, driver_cuda
    [x] = by_id(checks.evaluate(f), "cuda.torch")
    assert x.severity == severity
    if wheel:
        assert x.fix.endswith(f"/whl/{wheel}") and x.gotcha == "U28"


def test_gpu_arch_missing_from_torch_fails_and_minor_versions_are_binary_compatible():
    f = healthy()
    f["gpu"]["devices"][0]["compute_cap"] = "12.0"
    f["gpu"]["devices"][1]["compute_cap"] = "8.9"  # sm_86 kernels run on 8.9
    [x] = by_id(checks.evaluate(f), "cuda.arch")
    assert (x.severity, x.evidence["compute_cap"], x.gotcha) == ("fail", "12.0", "U28")


def test_cpu_only_torch_on_a_gpu_box_fails_and_missing_torch_is_only_info():
    f = healthy()
    f["torch"].update(version="2.3.1+cpu", cuda=None, arch_list=[])
    assert by_id(checks.evaluate(f), "cuda.torch")[0].severity == "fail"
    f["torch"] = {"installed": False}
    assert by_id(checks.evaluate(f), "cuda.torch")[0].severity == "info"


def test_recent_boot_no_detach_and_busy_rendezvous_port():
    f = healthy()
    f["boot"]["uptime_s"] = 120.0
    f["tools"] = {"tmux": False, "screen": False, "setsid": False, "nohup": False}
    f["listeners"].append({"port": 29500, "address": "0.0.0.0", "family": "ipv4", "inode": 9,
                           "owners": [{"pid": 812, "comm": "torchrun"}]})
    findings = checks.evaluate(f)
    assert by_id(findings, "boot.recent")[0].severity == "info" and by_id(findings, "boot.recent")[0].gotcha == "U3"
    assert by_id(findings, "detach.missing")[0].severity == "warn" and by_id(findings, "detach.missing")[0].gotcha == "GEN2"
    [port] = by_id(findings, "net.rendezvous-port")
    assert port.severity == "warn" and port.evidence["held_by"] == "812(torchrun)"
    assert port.fix.startswith("torchrun --master-port=29501") and "kill 812" in port.fix


def test_thresholds_change_verdicts():
    f = healthy()
    t = merged({"disk_min_free_gib": 600, "rendezvous_ports": [22]})
    findings = checks.evaluate(f, t)
    assert by_id(findings, "disk.space")[0].severity == "fail"
    assert by_id(findings, "net.rendezvous-port")[0].evidence["port"] == 22


def test_merged_rejects_unknown_names_and_wrong_types_and_leaves_defaults_alone():
    with pytest.raises(UsageError, match="unknown preflight threshold 'disk_min_gib'"):
        merged({"disk_min_gib": 1})
    with pytest.raises(UsageError, match="must be a number"):
        merged({"disk_min_free_gib": "20"})
    with pytest.raises(UsageError, match="list of TCP ports"):
        merged({"rendezvous_ports": [70000]})
    before = copy.deepcopy(DEFAULTS)
    merged({"rendezvous_ports": [1234]})["rendezvous_ports"].append(5)
    assert DEFAULTS == before


def test_facts_from_an_odd_box_never_crash_the_verdicts():
    findings = checks.evaluate({"probe_version": 2, "errors": {"disks": "OSError: boom"}, "gpu": None})
    assert not by_id(findings, "check.crashed")
    assert by_id(findings, "probe.partial")[0].evidence == {"disks": "OSError: boom"}
    assert by_id(findings, "gpu.none")[0].severity == "fail"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_merged_rejects_nan_and_inf_which_no_comparison_catches(value):
    # Found in review: nan slipped past `< 0`, and every verdict compared against it was False.
    with pytest.raises(UsageError, match="'disk_min_free_gib' must be a finite number"):
        merged({"disk_min_free_gib": value})
