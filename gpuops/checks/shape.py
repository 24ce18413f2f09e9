"""The shape of the facts the probe (gpuops.onbox.facts.probe) returns and the checks read.

Every key the probe may answer with is declared here, nested as it comes: a dict of keys, `[...]`
for a list of such items, and "*" for a map whose keys are data (a tool or a variable name).
A leaf says what the value is. tests/test_probe_shape.py holds both sides to it: the probe never
answers with an undeclared key, and no check reads one (a typo would read None forever).
"""

_PROC = {"pid": "int", "comm": "str", "state": "str", "ppid": "int", "uid": "int", "age_s": "seconds"}

_LOGDIR = {"path": "path", "exists": "bool", "events": "int: files named *tfevents*", "capped": "bool: walk cut short"}

DEVICE = {
    "index": "int", "uuid": "str", "name": "str", "bus_id": "PCI address", "minor": "int", "compute_cap": "'9.0'",
    "memory_total_mib": "MiB", "memory_used_mib": "MiB", "util_pct": "%", "temp_c": "C", "slowdown_temp_c": "C",
    "sm_clock_mhz": "MHz", "sm_clock_max_mhz": "MHz", "power_w": "W", "power_limit_w": "W",
    "throttle_mask": "clock-event reason bits", "ecc_dbe_volatile": "int", "retired_pages_dbe": "int",
    "retired_pages_pending": "bool", "remap_failure": "bool", "remap_pending": "bool",
    "unavailable": {"*": "why a value could not be read"},
}

FACTS = {
    "probe_version": "int",
    "errors": {"*": "why a fact area could not be gathered"},
    "host": {"hostname": "str", "kernel": "str", "python": "str", "python_executable": "path", "uid": "int",
             "user": "str"},
    "boot": {"boot_id": "str", "uptime_s": "seconds", "btime": "epoch", "now": "epoch"},
    "memory": {"host_total_bytes": "bytes", "host_available_bytes": "bytes"},
    "cgroup": {
        "version": "v1|v2|none",
        "memory": {"dir": "path", "path": "cgroup path as /proc/self/cgroup shows it",
                   "namespace_root": "where this namespace's tree sits in the host's ('/' when unknown)",
                   "limit_bytes": "bytes", "usage_bytes": "bytes", "working_set_bytes": "bytes",
                   "oom_kills": "int", "oom_events": "int", "counter_file": "path", "failcnt": "int",
                   "oom_counters": [{"scope": "session|ancestor|root|job", "dir": "path", "file": "path",
                                     "oom_kills": "int", "job_id": "str"}]},
        "cpu": {"dir": "path", "quota_cores": "float"},
        "pids": {"limit": "int", "current": "int"},
    },
    "cpu": {"visible": "int", "host": "int", "quota_cores": "float"},
    "env": {"*": "the value of a thread or device variable"},
    "disks": [{"role": "home|cwd|shm|tmp|path|data_dir|durable_dir|checkpoint_dir", "path": "path",
               "asked": "the path as the caller gave it, when expanding changed it", "exists": "bool", "measured_at": "path",
               "device": "int", "mount": "path", "total_bytes": "bytes", "free_bytes": "bytes",
               "total_inodes": "int", "free_inodes": "int", "error": "str",
               "fs_mount": "path: its mount in /proc/self/mountinfo", "fstype": "str", "fs_source": "str"}],
    "tools": {"*": "bool"},
    "listeners": [{"port": "int", "address": "str", "family": "ipv4|ipv6", "inode": "int", "owners": [_PROC]}],
    "kernlog": {
        "readable": "bool", "source": "str", "tried": [{"source": "str", "why": "str"}],
        "xid": [{"code": "int", "pci": "PCI address", "count": "int", "last_line": "str"}],
        "fallen_off_bus": [{"pci": "PCI address", "count": "int", "last_line": "str"}],
        "oom_kill_count": "int",
        "oom_kills": [{"pid": "int", "comm": "str", "kind": "cgroup|global", "line": "str", "at": "epoch",
                       "constraint": "CONSTRAINT_*", "oom_memcg": "host cgroup path", "task_memcg": "host cgroup path"}],
        "lines_scanned": "int",
    },
    "gpu": {
        "source": "nvml|nvidia-smi", "driver": "str", "cuda_max": "'12.4'", "error": "str", "nvml": "str",
        "notes": ["str"], "devices": [DEVICE],
        "processes": [{"pid": "int", "name": "str", "used_mib": "MiB", "bus_id": "PCI address"}],
        "device_nodes": ["path"], "kernel_module": "str",
        "driver_gpus": [{"bus_id": "PCI address", "minor": "int", "node": "bool: /dev/nvidia<minor> exists here"}],
        "holders": [dict(_PROC, devices=["path"])], "holders_unreadable": "int",
    },
    "links": {
        "devices": [{"index": "int", "bus_id": "PCI address", "gen_current": "int", "gen_max": "int: GPU and host",
                     "gen_gpumax": "int", "gen_hostmax": "int", "width_current": "lanes", "width_max": "lanes",
                     "pstate": "P0..P12", "util_pct": "%", "persistence": "Enabled|Disabled",
                     "mig_current": "Enabled|Disabled", "mig_pending": "Enabled|Disabled",
                     "fabric_state": "str", "fabric_status": "str", "numa_node": "int", "local_cpus": "cpulist"}],
        "p2p_read": {"*": "OK|NS|CNS|GNS|TNS|U: `nvidia-smi topo -p2p r` for a pair 'i-j'"},
        "nvlink": {"*": {"active": "int", "inactive": "int", "gbps": "GB/s per link"}},
        "allowed_cpus": "cpulist: this process's affinity", "numa_nodes": "int", "error": "str", "notes": ["str"],
    },
    "torch": {"installed": "bool", "version": "str", "cuda": "str", "arch_list": ["str"], "error": "str",
              "nccl": "'2.28.9': the NCCL torch loads",
              "key": "str", "known": "bool"},
    "trackers": {
        "wandb": {"installed": "bool: python3 finds the wandb package", "mode": "WANDB_MODE as set",
                  "key": "WANDB_API_KEY|WANDB_IDENTITY_TOKEN_FILE|netrc: where a key was found (never the key)",
                  "host": "the W&B server's netloc", "netrc": "path: the netrc file wandb would read"},
        "tensorboard": {"pinned": _LOGDIR, "servers": [{"pid": "int", "logdirs": [_LOGDIR]}],
                        "writes": ["path: a dir of event files the job holds open (its supervisor's look only)"]},
    },
    "probe": {"pid": "int", "seconds": "seconds"},
    # Added by gpuops.ops.preflight from a profile, not by the probe.
    "inode_caps": {"*": "a platform's inode quota for a directory"},
    "path_floors": {"*": "GiB an extra `--path DIR:SIZE` must have free"},
}


def keys(shape=FACTS):
    """Every key name the shape declares, at any depth."""
    out = set()
    if isinstance(shape, dict):
        for k, v in shape.items():
            if k != "*":
                out.add(k)
            out |= keys(v)
    elif isinstance(shape, list):
        for item in shape:
            out |= keys(item)
    return out


def undeclared(doc, shape=FACTS, where="facts"):
    """['facts.gpu.devices[0].bogus', ...]: the keys of `doc` the shape does not declare."""
    out = []
    if isinstance(doc, dict) and isinstance(shape, dict):
        for k, v in doc.items():
            if k in shape:
                out += undeclared(v, shape[k], f"{where}.{k}")
            elif "*" in shape:
                out += undeclared(v, shape["*"], f"{where}.{k}")
            else:
                out.append(f"{where}.{k}")
    elif isinstance(doc, list) and isinstance(shape, list) and shape:
        for i, item in enumerate(doc):
            out += undeclared(item, shape[0], f"{where}[{i}]")
    return out
