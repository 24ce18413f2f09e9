"""The facts probe: one JSON document describing the box, gathered in one exec on the box.

    python3 probe.py [--path DIR]... [--role-path ROLE=DIR]... [--tb-logdir DIR]

Observational only: it writes nothing (no bytecode either), starts only read-only commands
(nvidia-smi queries, dmesg/journalctl, a torch import in a child), and leaves its own process
chain (probe -> sh -> sshd, plus its own children) out of every process listing.

Slow work runs side by side: the torch import and the nvidia-smi queries start first and are
collected last, after the /proc, /sys and statvfs reads. Each fact area is gathered on its own;
one that breaks is reported under "errors" and the rest still arrive (degrade, don't abort).
All kernel-state reads go through sysroot, so GPUOPS_ROOT=R swaps in a fixture tree (see there).
"""

import json
import os
import sys
import time

from ..host import cgroup, disk, gpu, gpulinks, kernlog, netports, procs, runcmd, sysroot, torchinfo
from ..track import wandbkey

PROBE_VERSION = 2
DETACH_TOOLS = ("tmux", "screen", "setsid", "nohup")
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def boot() -> dict:
    return {
        "boot_id": procs.boot_id(),
        "uptime_s": procs.uptime_s(),
        "btime": procs.boot_time(),
        "now": time.time(),
    }


def memory() -> dict:
    info = sysroot.keyvals("/proc/meminfo")  # values are kB

    def size(key):
        return info[key + ":"] * 1024 if key + ":" in info else None

    return {"host_total_bytes": size("MemTotal"), "host_available_bytes": size("MemAvailable")}


def cpus(cg) -> dict:
    try:
        visible = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        visible = os.cpu_count()
    return {"visible": visible, "host": os.cpu_count(), "quota_cores": (cg.get("cpu") or {}).get("quota_cores")}


def host() -> dict:
    u = os.uname()
    return {"hostname": u[1], "kernel": u[2], "python": "%d.%d.%d" % sys.version_info[:3],
            "python_executable": sys.executable, "uid": os.getuid(), "user": os.environ.get("USER")}


def device_nodes() -> list:
    # "/dev/" with the slash: the overlay covers paths under /dev/, so the listing merges both.
    return ["/dev/" + n for n in sysroot.listdir("/dev/") if n.startswith("nvidia")]


def _proc_summary(pid: int):
    st = procs.stat(pid)
    age = procs.age_s(st)
    st = st or {}
    return {"pid": pid, "comm": st.get("comm"), "state": st.get("state"), "ppid": st.get("ppid"),
            "uid": procs.uid(pid), "age_s": round(age, 1) if age is not None else None}


def holders(listeners):
    """Who holds /dev/nvidia* and who owns each listening socket, in one pass over /proc/*/fd."""
    by_inode = dict(("socket:[%d]" % l["inode"], l) for l in listeners)
    # Our own chain up to init is never a holder worth reporting, but PID 1 itself stays in view:
    # in a container it is often the workload (`docker run ... python train.py`).
    exclude = (procs.ancestry() - {1}) | runcmd.started_pids()
    found, unreadable = procs.device_holders(prefixes=("/dev/nvidia",) + tuple(by_inode), exclude=exclude)
    gpu_holders = []
    for h in found:
        devices = [d for d in h["devices"] if d.startswith("/dev/nvidia")]
        for sock in h["devices"]:
            if sock in by_inode:
                by_inode[sock].setdefault("pids", []).append(h["pid"])
        if devices:
            entry = _proc_summary(h["pid"])
            entry["devices"] = devices
            gpu_holders.append(entry)
    for l in listeners:
        l["owners"] = [_proc_summary(pid) for pid in l.pop("pids", [])]
    return gpu_holders, unreadable


def _paths(argv):
    """[(role, dir)] from `--path DIR` (a directory of unknown use) and `--role-path ROLE=DIR` (a
    profile's data_dir, durable_dir or checkpoint_dir)."""
    out, i = [], 0
    while i < len(argv):
        flag, value = argv[i], argv[i + 1] if i + 1 < len(argv) else None
        if flag.startswith("--path="):
            out.append(("path", flag[len("--path="):]))
        elif flag == "--path" and value is not None:
            out.append(("path", value))
            i += 1
        elif flag == "--role-path" and value is not None and "=" in value:
            out.append(tuple(value.split("=", 1)))
            i += 1
        i += 1
    return out


def _option(argv, name: str):
    """The value after `name` in argv, or None."""
    for i, flag in enumerate(argv[:-1]):
        if flag == name:
            return argv[i + 1]
    return None


def main(argv) -> int:
    started = time.time()
    sys.dont_write_bytecode = True  # importing pynvml must not leave a __pycache__ behind
    facts = {"probe_version": PROBE_VERSION, "errors": {}}

    def gather(name: str, fn, *args):
        try:
            facts[name] = fn(*args)
        except Exception as e:  # one broken fact area must not cost the others
            facts[name] = None
            facts["errors"][name] = "%s: %s" % (type(e).__name__, e)
        return facts[name]

    # --torch-known KEY: the torch install whose facts the caller kept (gpuops.onbox.host.torchinfo).
    torch_pending = torchinfo.begin(_option(argv, "--torch-known"))
    gpu_state = gather("gpu", gpu.begin)
    link_state = gather("links", gpulinks.start)
    gather("host", host)
    gather("boot", boot)
    gather("memory", memory)
    cg = gather("cgroup", cgroup.facts) or {}
    gather("cpu", cpus, cg)
    facts["env"] = dict((k, os.environ[k]) for k in THREAD_ENV if k in os.environ)
    gather("disks", disk.facts, _paths(argv))
    gather("tools", runcmd.available, DETACH_TOOLS + ("nvidia-smi",))
    listeners = gather("listeners", netports.listeners) or []
    gather("kernlog", kernlog.read)
    # --tb-logdir DIR: the logdir the platform's own TensorBoard reads (a profile's).
    gather("trackers", wandbkey.facts, _option(argv, "--tb-logdir"))
    found = gather("holders", holders, listeners) or ([], None)
    if gpu_state is not None:
        gpu_doc = gather("gpu", gpu.end, gpu_state)
        if gpu_doc is not None:
            gpu_doc["device_nodes"] = device_nodes()
            gpu_doc["driver_gpus"] = gpu.driver_gpus()
            gpu_doc["kernel_module"] = (sysroot.read("/proc/driver/nvidia/version") or "").split("\n")[0] or None
            gpu_doc["holders"], gpu_doc["holders_unreadable"] = found
    facts.pop("holders", None)
    if link_state is not None:
        gather("links", gpulinks.finish, link_state)
    gather("torch", torchinfo.end, torch_pending)
    facts["probe"] = {"pid": os.getpid(), "seconds": round(time.time() - started, 3)}
    sys.stdout.write(json.dumps(facts))
    sys.stdout.flush()
    return 0
