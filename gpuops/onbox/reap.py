"""Reap VRAM zombies: find who really holds the NVIDIA devices, judge each holder, act only when safe.

    python3 reap.py [--gpu N] [--min-age S] [--idle-window S] [--term-wait S] [--yes]

Holders are found the way fuser finds them: every /proc/PID/fd link that points at /dev/nvidia*
(for a zombie leader whose threads live on, /proc/PID/task/TID/fd, because the leader's own fd
table is gone). NVML/nvidia-smi is only a second opinion: the driver reports host PIDs even in a
container, so a PID it names is trusted only when that PID, in our own /proc, holds the device
node of the GPU it is named on and is still the process we scanned (same start time). Nothing is
ever signalled because NVML named it.

Each holder gets one class and the reason for it; the first rule that fits wins:
  protected     never touched: PID 1, kernel threads, our own chain and session, GPU and system
                daemons, systemd services, processes of other users
  live          part of a running gpuops job
  defunct       exited, but its threads still hold the device; its parent is signalled too
                when the parent could be reaped in its own right
  live          its GPU is busy (any utilisation in the sampled window)
  finished-job  left behind by a gpuops job whose exit record exists
  live          holds no GPU node, its GPU is not provably idle, or it is younger than --min-age
  orphan        reparented to init or a subreaper (its launcher is gone), its GPU idle
  idle          its GPU idle, its parent still there
Dry run unless --yes. Acting: SIGTERM to the process group when every member of the group may be
signalled (else to the pid alone), wait, SIGKILL the survivors. The start time is re-read before
every signal, so a pid reused in the meantime is never hit. A holder still in state D at the end
needs a GPU reset or a reboot: it is reported, not retried.
"""

import argparse
import json
import os
import pwd
import re
import signal
import sys
import time

from . import gpu, jobrecord, procs, runcmd, sysroot

REAPABLE = ("defunct", "orphan", "finished-job", "idle")

# Compared with comm (cut by the kernel to 15 characters) and with argv[0]'s basename.
PROTECTED_NAMES = (
    "sshd", "sshd-session", "sshd-auth", "nvidia-persistenced", "nv-hostengine", "dcgm-exporter",
    "nvidia-dcgm", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server", "nvidia-smi", "nvidia-powerd",
    "nvidia-fabricmanager", "nv-fabricmanager", "Xorg", "X", "Xwayland", "gnome-shell",
)
_EXPORTER = re.compile(r"[-_]exporter$")
# Parents that adopt orphans: a process whose parent is one of these lost its launcher.
INIT_LIKE = ("systemd", "init", "tini", "dumb-init", "docker-init", "catatonit", "s6-svscan")
# Units that only host login sessions (sshd without pam_systemd keeps its sessions in its unit).
_SESSION_UNITS = re.compile(r"^(ssh|sshd|user@\d+)\.service$")
_GPU_NODE = re.compile(r"^/dev/nvidia(\d+)$")
_PF_KTHREAD = 0x00200000  # task flag (field 9 of /proc/PID/stat): a kernel thread

SMI_TIMEOUT_S = 10
_LIGHT_FIELDS = [
    ("index", "index", int),
    ("minor_number", "minor", int),
    ("pci.bus_id", "bus_id", str),
    ("utilization.gpu", "util_pct", float),
    ("memory.used", "memory_used_mib", float),
    ("memory.total", "memory_total_mib", float),
]
_APP_FIELDS = [("pid", "pid", int), ("used_memory", "used_mib", float), ("gpu_bus_id", "bus_id", str)]
_DEVICE_KEYS = ("index", "minor", "bus_id", "util_pct", "memory_used_mib", "memory_total_mib")


# ----------------------------------------------------------------------------- GPU readings

class GpuReader(object):
    """Per-GPU utilisation, memory and compute processes: NVML when pynvml works here, else nvidia-smi.

    The source is chosen on the first reading and kept, so the samples of one window compare.
    """

    def __init__(self):
        self.nvml = None
        if sysroot.overlay_active():
            return  # fixture device nodes: the GPU answers come from the nvidia-smi on PATH
        try:
            import pynvml
            doc, _ = gpu.from_nvml(pynvml)
            if doc is not None and not doc.get("error"):
                self.nvml = pynvml
        except Exception:  # absent or broken here: nvidia-smi may still answer
            self.nvml = None

    def read(self, apps=True):
        """{source, error, devices: [{index, minor, bus_id, util_pct, memory_*_mib}], processes}."""
        if self.nvml is not None:
            doc, err = gpu.from_nvml(self.nvml)
            if doc is None:
                return {"source": "nvml", "error": err, "devices": [], "processes": []}
            doc["devices"] = [dict((k, d.get(k)) for k in _DEVICE_KEYS) for d in doc["devices"]]
            return doc
        return read_smi(apps)


def read_smi(apps=True):
    """The light CSV queries only; `apps` adds the compute-process list (one more nvidia-smi run)."""
    query = ",".join(f for f, _, _ in _LIGHT_FIELDS)
    r = runcmd.run(["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader,nounits"], SMI_TIMEOUT_S)
    doc = {"source": "nvidia-smi", "error": None, "devices": [], "processes": []}
    if r["error"] or r["rc"] != 0:
        why = r["error"] or ((r["err"] or r["out"]).strip() or "exit %s" % r["rc"]).splitlines()[-1]
        doc["error"] = "nvidia-smi --query-gpu: %s" % why[:300]
        return doc
    doc["devices"] = gpu.parse_csv(r["out"], _LIGHT_FIELDS)
    if not apps:
        return doc
    a = runcmd.run(["nvidia-smi", "--query-compute-apps=" + ",".join(f for f, _, _ in _APP_FIELDS),
                    "--format=csv,noheader,nounits"], SMI_TIMEOUT_S)
    if a["error"] is None and a["rc"] == 0:
        doc["processes"] = gpu.parse_csv(a["out"], _APP_FIELDS)
    else:
        doc["error"] = "nvidia-smi --query-compute-apps: %s" % (a["error"] or a["err"].strip()[:200])
    return doc


def bus_key(bus_id):
    """'00000000:1B:00.0' and '0000:1b:00.0' name the same GPU."""
    if not bus_id:
        return None
    dom, _, rest = bus_id.strip().lower().partition(":")
    try:
        return "%x:%s" % (int(dom, 16), rest)
    except ValueError:
        return bus_id.strip().lower()


def sample(reader, window_s, interval_s=1.0):
    """(first reading, {index: peak util or None}, samples) over `window_s` seconds.

    A GPU whose utilisation could not be read in any sample gets None: it is not provably idle.
    """
    first = reader.read(apps=False)
    peak = dict((d["index"], d.get("util_pct")) for d in first["devices"])
    samples = 1
    deadline = time.time() + max(0.0, window_s)
    while time.time() < deadline:
        time.sleep(max(0.0, min(interval_s, deadline - time.time())))
        again = reader.read(apps=False)
        samples += 1
        seen = dict((d["index"], d.get("util_pct")) for d in again["devices"])
        for index in list(peak):
            now, before = seen.get(index), peak[index]
            peak[index] = None if now is None or before is None else max(now, before)
    return first, peak, samples


# ----------------------------------------------------------------------------- facts on processes

def process_table():
    """{pid: stat} for every process, read once."""
    table = {}
    for pid in procs.pids():
        st = procs.stat(pid)
        if st:
            table[pid] = st
    return table


def _user(uid):
    if uid is None:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def service_unit(pid):
    """The systemd service a process runs under, when it runs under one that is not a login session."""
    for line in (sysroot.read("/proc/%d/cgroup" % pid) or "").splitlines():
        path = line.split(":", 2)[-1]
        units = [part for part in path.split("/") if part.endswith(".service")]
        if units and not _SESSION_UNITS.match(units[-1]):
            return units[-1]
    return None


def live_threads(pid):
    """Thread ids of `pid` other than the leader that have not exited."""
    out = []
    for tid in sysroot.listdir("/proc/%d/task" % pid):
        if tid.isdigit() and int(tid) != pid:
            text = sysroot.read("/proc/%d/task/%s/stat" % (pid, tid)) or ""
            state = text.rpartition(")")[2].split()[:1]
            if state and state[0] not in ("Z", "X"):
                out.append(int(tid))
    return out


def _task_devices(pid):
    """Device links held by the live threads of a zombie leader (its own fd table is gone)."""
    found = set()
    for tid in live_threads(pid):
        fd_dir = "/proc/%d/task/%d/fd" % (pid, tid)
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = sysroot.unroot(os.readlink(fd_dir + "/" + fd))
            except OSError:
                continue
            if target.startswith("/dev/nvidia"):
                found.add(target)
    return sorted(found)


def kernel_thread(pid):
    """By the task flag, not by parent pid: inside a container pid 2 is an ordinary process."""
    fields = (sysroot.read("/proc/%d/stat" % pid) or "").rpartition(")")[2].split()
    try:
        return bool(int(fields[6]) & _PF_KTHREAD)
    except (IndexError, ValueError):
        return False


def describe(pid, st):
    """The facts the rules look at, for any process (holder or not)."""
    cmd = procs.cmdline(pid) or ""
    uid = procs.uid(pid)
    age = procs.age_s(st)
    return {
        "pid": pid, "start_ticks": st["start_ticks"], "ppid": st["ppid"], "pgid": st["pgid"],
        "sid": st["sid"], "state": st["state"], "comm": st["comm"],
        "argv0": os.path.basename(cmd.split(" ", 1)[0]) if cmd else "",
        "command": cmd or "[%s]" % st["comm"], "uid": uid, "user": _user(uid),
        "age_s": round(age, 1) if age is not None else None, "unit": service_unit(pid),
        "kthread": kernel_thread(pid),
        "devices": [], "minors": [], "gpus": [], "gpu_mem_mib": {}, "threads": None,
    }


def scan_holders(table, minor_to_index):
    """(holders, unreadable): facts for every process holding an NVIDIA device file."""
    found, unreadable = procs.device_holders(prefixes=("/dev/nvidia",))
    devices = dict((h["pid"], h["devices"]) for h in found)
    for pid, st in table.items():
        if st["state"] == "Z" and pid not in devices:
            held = _task_devices(pid)
            if held:
                devices[pid] = held
    holders = []
    for pid in sorted(devices):
        st = table.get(pid) or procs.stat(pid)
        if st is None:
            continue  # exited while we looked
        f = describe(pid, st)
        f["devices"] = devices[pid]
        f["minors"] = sorted(int(m.group(1)) for m in (_GPU_NODE.match(d) for d in devices[pid]) if m)
        f["gpus"] = sorted(set(minor_to_index.get(m, m) for m in f["minors"]))
        if st["state"] == "Z":
            f["threads"] = len(live_threads(pid))
        holders.append(f)
    return holders, unreadable


def nested_pid_namespace():
    """True inside a child PID namespace (a container), where NVML's PIDs are the host's."""
    for line in (sysroot.read("/proc/self/status") or "").splitlines():
        if line.startswith("NSpid:"):
            return len(line.split()) > 2
    return False


def attach_memory(holders, reading, nested):
    """Put NVML's per-process memory on the holders it verifiably belongs to; return the rest."""
    by_bus = dict((bus_key(d.get("bus_id")), d) for d in reading["devices"])
    by_pid = dict((h["pid"], h) for h in holders)
    unverified = []
    for app in reading["processes"]:
        pid, dev = app.get("pid"), by_bus.get(bus_key(app.get("bus_id")))
        h = by_pid.get(pid)
        why = None
        if nested:
            why = "this box runs in a nested PID namespace, where NVML reports host PIDs"
        elif dev is None:
            why = "GPU %s is not in the device list" % app.get("bus_id")
        elif h is None:
            why = "no process with this PID holds an NVIDIA device here"
        elif dev.get("minor") is not None and dev["minor"] not in h["minors"]:
            why = "PID %d does not hold /dev/nvidia%d here" % (pid, dev["minor"])
        elif not procs.alive(pid, h["start_ticks"]) and h["state"] != "Z":
            why = "PID %d is no longer the process that was scanned" % pid
        if why:
            unverified.append({"pid": pid, "bus_id": app.get("bus_id"), "used_mib": app.get("used_mib"), "why": why})
            continue
        h["gpu_mem_mib"][str(dev["index"])] = app.get("used_mib")
        if dev["index"] not in h["gpus"]:
            h["gpus"] = sorted(h["gpus"] + [dev["index"]])
    return unverified


# ----------------------------------------------------------------------------- jobs

def load_jobs(boot_id, btime):
    """The gpuops jobs of this boot: running (no exit record, process alive) or ended (exit record)."""
    jobs = []
    for job_id in jobrecord.all_ids():
        try:
            rec = jobrecord.load(job_id)
        except ValueError:
            continue
        if rec is None:
            continue
        meta, ended = rec["meta"], rec["exit"]
        if meta.get("boot_id") and boot_id and meta["boot_id"] != boot_id:
            continue  # a previous boot: its pids and groups mean nothing now
        running = ended is None and jobrecord.liveness(meta) == "alive"
        if not running and ended is None:
            continue  # gone without an exit record: its leftovers are judged as orphans
        ended_ticks = None
        if ended and ended.get("ended_at") and btime:
            ended_ticks = int((float(ended["ended_at"]) - btime + 2) * procs.CLK_TCK)
        survivors = set((s.get("pid"), s.get("start_ticks")) for s in (ended or {}).get("survivors") or [])
        jobs.append({
            "id": job_id, "pid": meta.get("pid"), "pgid": meta.get("pgid"), "sid": meta.get("sid"),
            "start_ticks": meta.get("start_ticks"), "running": running, "exit": ended, "ended_ticks": ended_ticks,
            "wrapper_pid": meta.get("wrapper_pid"), "wrapper_start_ticks": meta.get("wrapper_start_ticks"),
            "survivors": survivors,
        })
    return jobs


def _descends_from(pid, ancestor, start_ticks, table):
    seen = set()
    while pid in table and pid not in seen:
        seen.add(pid)
        st = table[pid]
        if pid == ancestor:
            return start_ticks is None or st["start_ticks"] == start_ticks
        pid = st["ppid"]
    return False


def job_of(f, jobs, table):
    """The job a process belongs to: its recorded pid, the survivors its exit record lists, its group
    or session, or (running) its descent from the job or from the supervisor that adopts its orphans.

    Groups outlive their leader and their ids come back, so a match by group also needs the process
    to have started after the job did and, for an ended job, before it ended.
    """
    for job in jobs:
        me = (f["pid"], f["start_ticks"])
        if me == (job["pid"], job["start_ticks"]) or me in job.get("survivors", ()):
            return job
        if job["running"] and job.get("wrapper_pid") and _descends_from(
                f["ppid"], job["wrapper_pid"], job.get("wrapper_start_ticks"), table):
            return job
        if job["start_ticks"] is not None and f["start_ticks"] < job["start_ticks"]:
            continue
        if job["ended_ticks"] is not None and f["start_ticks"] > job["ended_ticks"]:
            continue
        group = job["pgid"]
        if group and (f["pgid"] == group or f["sid"] == group or (job["sid"] and f["sid"] == job["sid"])):
            return job
        if job["running"] and job["pid"] and _descends_from(f["pid"], job["pid"], job["start_ticks"], table):
            return job
    return None


# ----------------------------------------------------------------------------- rules (pure)

def daemon_name(f):
    for name in (f.get("comm") or "", f.get("argv0") or ""):
        if not name:
            continue
        for known in PROTECTED_NAMES:
            if name == known or (len(name) == 15 and known.startswith(name)):
                return known
        if _EXPORTER.search(name):
            return name
    return None


def protected_reason(f, ctx):
    if f["pid"] == 1:
        return "PID 1, the init of this PID namespace"
    if f.get("kthread"):
        return "kernel thread"
    if f["pid"] in ctx["ancestry"]:
        return "the reaper's own process chain"
    if f["sid"] == ctx["sid"]:
        return "in the reaper's own session"
    name = daemon_name(f)
    if name:
        return "system/GPU daemon (%s)" % name
    if f.get("unit"):
        return "runs under systemd service %s (manage it with systemctl)" % f["unit"]
    if f["uid"] is None:
        return "owner unknown"
    if f["uid"] != ctx["uid"]:
        return "belongs to user %s; only your own processes are reaped" % f["user"]
    return None


def _gpu_list(indexes):
    return ",".join(str(i) for i in indexes)


def orphaned(f, table):
    if f["ppid"] in (0, 1):
        return "reparented to PID 1 (its launcher is gone)"
    parent = table.get(f["ppid"])
    if parent and parent["comm"] in INIT_LIKE:
        return "reparented to subreaper %d (%s)" % (f["ppid"], parent["comm"])
    return None


def _ended(job):
    ex = job["exit"] or {}
    if ex.get("signal"):
        return "killed by %s" % ex["signal"]
    if ex.get("exit_code") is not None:
        return "exit %s" % ex["exit_code"]
    return "ended"


def classify(f, ctx):
    """(class, reason, job id) for one process; everything it reads is in `f` and `ctx`."""
    why = protected_reason(f, ctx)
    if why:
        return "protected", why, None
    job = job_of(f, ctx["jobs"], ctx["table"])
    job_id = job["id"] if job else None
    if job and job["running"]:
        return "live", "part of running gpuops job %s" % job["id"], job_id
    window = "the %gs window" % ctx["idle_window"] if ctx["idle_window"] > 0 else "a single sample"
    if f["state"] == "Z":
        return ("defunct", "exited, but %s live thread(s) still hold %s; parent %d has not reaped it"
                % (f["threads"], ", ".join(f["devices"]), f["ppid"]), job_id)
    util = ctx["util"]
    busy = [i for i in f["gpus"] if util.get(i)]
    if busy:
        peak = max(util[i] for i in busy)
        return "live", "GPU %s busy (up to %g%% over %s)" % (_gpu_list(busy), peak, window), job_id
    if job:
        return "finished-job", "left behind by gpuops job %s, which ended (%s)" % (job["id"], _ended(job)), job_id
    if not f["gpus"]:
        return "live", "holds only %s: no GPU device node, no GPU memory to free" % ", ".join(f["devices"]), None
    unknown = [i for i in f["gpus"] if util.get(i, None) is None]
    if unknown:
        return "live", "utilisation of GPU %s could not be read: not provably idle" % _gpu_list(unknown), None
    if f["age_s"] is None or f["age_s"] < ctx["min_age"]:
        return "live", "younger than --min-age (%ss < %gs)" % (f["age_s"], ctx["min_age"]), None
    idle = "GPU %s at 0%% over %s" % (_gpu_list(f["gpus"]), window)
    lost = orphaned(f, ctx["table"])
    if lost:
        return "orphan", "%s; %s" % (lost, idle), None
    return "idle", "%s; parent %d still runs" % (idle, f["ppid"]), None


# ----------------------------------------------------------------------------- plan

def _group_check(pgid, ctx, holder_class, selected):
    """(members, None) when the whole group may be signalled, else (None, why not)."""
    if pgid <= 1:
        return None, "no usable process group"
    if pgid == ctx["pgid"]:
        return None, "the reaper's own process group"
    members = []
    for pid, st in sorted(ctx["table"].items()):
        if st["pgid"] != pgid:
            continue
        if pid in holder_class:
            cls = holder_class[pid]
            if cls not in REAPABLE or pid not in selected:
                return None, "group %d has holder %d (%s)" % (pgid, pid, cls if pid in selected else "not selected")
        else:
            f = describe(pid, st)
            why = protected_reason(f, ctx)
            if why:
                return None, "group %d has protected %d (%s)" % (pgid, pid, why)
            job = job_of(f, ctx["jobs"], ctx["table"])
            if job and job["running"]:
                return None, "group %d has %d of running job %s" % (pgid, pid, job["id"])
        members.append([pid, st["start_ticks"]])
    return members, None


def _unit(f, ctx, holder_class, selected):
    members, why = _group_check(f["pgid"], ctx, holder_class, selected)
    unit = {"pid": f["pid"], "start_ticks": f["start_ticks"], "pgid": f["pgid"], "comm": f["comm"]}
    if members is not None:
        unit.update(scope="group", members=members)
    else:
        unit.update(scope="pid", members=[], why_pid=why)
    return unit


def _unit_text(unit):
    if unit["scope"] == "group":
        return "process group %d" % unit["pgid"]
    return "pid %d alone (%s)" % (unit["pid"], unit["why_pid"])


def plan(holders, ctx, selected, term_wait):
    """Signal units for the selected reapable holders; each holder gets its `action` text."""
    holder_class = dict((h["pid"], h["class"]) for h in holders)
    by_pid = dict((h["pid"], h) for h in holders)
    units = {}
    for h in holders:
        h["action"] = None
        if h["pid"] not in selected or h["class"] not in REAPABLE:
            continue
        targets = [h]
        note = ""
        if h["class"] == "defunct":
            parent_st = ctx["table"].get(h["ppid"])
            if parent_st:
                p = describe(h["ppid"], parent_st)
                if p["pid"] in by_pid:  # a holder itself: its own verdict stands
                    pcls, pwhy = by_pid[p["pid"]]["class"], by_pid[p["pid"]]["reason"]
                    if p["pid"] not in selected:
                        pcls, pwhy = "not selected", "it holds none of the selected GPU's devices"
                else:  # judged on the GPUs its unreaped child still holds
                    p["gpus"] = h["gpus"]
                    pcls, pwhy, _ = classify(p, ctx)
                if pcls in REAPABLE and pcls != "defunct":
                    targets.append(p)
                    note = "; parent %d is %s, so it goes too" % (p["pid"], pcls)
                else:
                    note = "; parent %d left alone (%s: %s)" % (p["pid"], pcls, pwhy)
        texts = []
        for t in targets:
            unit = units.get(t["pid"]) or _unit(t, ctx, holder_class, selected)
            units[t["pid"]] = unit
            if _unit_text(unit) not in texts:
                texts.append(_unit_text(unit))
        h["action"] = "SIGTERM, SIGKILL after %gs: %s%s" % (term_wait, " + ".join(texts), note)
    return list(units.values())


# ----------------------------------------------------------------------------- act

def identity(unit):
    """'there', 'gone' or 'reused' for the process a unit was planned for."""
    st = procs.stat(unit["pid"])
    if st is None:
        return "gone"
    if st["start_ticks"] != unit["start_ticks"]:
        return "reused"
    if st["state"] in ("Z", "X") and not live_threads(unit["pid"]):
        return "gone"
    return "there"


def _group_unchanged(unit):
    """Every process now in the group was in it at planning time (nothing new joined, no reuse)."""
    planned = set((p, s) for p, s in unit["members"])
    for st in process_table().values():
        if st["pgid"] == unit["pgid"] and (st["pid"], st["start_ticks"]) not in planned:
            return False
    return True


def _send(unit, sig, record, first, groups_done):
    """Signal one unit after re-reading its identity; the group only if nobody new joined it."""
    if unit["scope"] == "group" and unit["pgid"] in groups_done:
        record["signals"].append("%s to group %d (sent once for the group)" % (_signame(sig), unit["pgid"]))
        return
    state = identity(unit)
    if state != "there":
        if first:
            record["outcome"] = "pid-reused" if state == "reused" else "gone"
            why = "the pid now names another process" if state == "reused" else "it had already exited"
        else:
            record["outcome"] = "reaped"
            why = "it exited after SIGTERM"
        record["signals"].append("%s not sent: %s" % (_signame(sig), why))
        return
    try:
        if unit["scope"] == "group" and _group_unchanged(unit):
            os.killpg(unit["pgid"], sig)
            groups_done.add(unit["pgid"])
            record["signals"].append("%s to group %d" % (_signame(sig), unit["pgid"]))
        else:
            os.kill(unit["pid"], sig)
            record["signals"].append("%s to pid %d" % (_signame(sig), unit["pid"]))
    except ProcessLookupError:
        record["signals"].append("%s: no such process" % _signame(sig))
    except PermissionError:
        record["outcome"] = "not-permitted"
        record["signals"].append("%s: not permitted" % _signame(sig))


def _signame(sig):
    return "SIGTERM" if sig == signal.SIGTERM else "SIGKILL"


def _wait(units, records, timeout_s, poll_s=0.05):
    deadline = time.time() + timeout_s
    while True:
        pending = [u for u in units if records[u["pid"]]["outcome"] is None and identity(u) == "there"]
        if not pending or time.time() >= deadline:
            return
        time.sleep(poll_s)


def act(units, term_wait, kill_wait):
    """Signal every unit (SIGTERM, then SIGKILL for survivors); one record per unit, in order."""
    records = dict((u["pid"], {"pid": u["pid"], "start_ticks": u["start_ticks"], "scope": u["scope"],
                               "signals": [], "outcome": None}) for u in units)
    for sig, wait_s in ((signal.SIGTERM, term_wait), (signal.SIGKILL, kill_wait)):
        pending = [u for u in units if records[u["pid"]]["outcome"] is None]
        groups_done = set()
        for u in pending:
            _send(u, sig, records[u["pid"]], sig == signal.SIGTERM, groups_done)
        signalled = [u for u in pending if records[u["pid"]]["outcome"] is None]
        _wait(signalled, records, wait_s)
        for u in signalled:
            if identity(u) != "there":
                records[u["pid"]]["outcome"] = "reaped"
    for u in units:
        rec = records[u["pid"]]
        if rec["outcome"] is None:
            st = procs.stat(u["pid"]) or {}
            if st.get("state") == "D":
                rec["outcome"] = "stuck"
                rec["why"] = "in uninterruptible sleep (D) inside the driver: needs a GPU reset or a reboot"
            else:
                rec["outcome"] = "remains"
                rec["why"] = "still there after SIGKILL (state %s)" % st.get("state")
    return [records[u["pid"]] for u in units]


def settle_memory(reader, timeout_s, poll_s=0.5):
    """Per-GPU used memory once it stops falling (the driver frees a context after its last fd closes)."""
    deadline = time.time() + timeout_s
    last = None
    while True:
        now = dict((d["index"], d.get("memory_used_mib")) for d in reader.read(apps=False)["devices"])
        if now == last or time.time() >= deadline:
            return now
        last = now
        time.sleep(poll_s)


# ----------------------------------------------------------------------------- main

def _args(argv):
    p = argparse.ArgumentParser(prog="reap")
    p.add_argument("--gpu", type=int, default=None)
    p.add_argument("--min-age", type=float, default=600.0)
    p.add_argument("--idle-window", type=float, default=10.0)
    p.add_argument("--term-wait", type=float, default=10.0)
    p.add_argument("--kill-wait", type=float, default=5.0)
    p.add_argument("--release-wait", type=float, default=10.0)
    p.add_argument("--yes", action="store_true")
    return p.parse_args(argv)


def context(table, jobs, util, min_age, idle_window):
    me = procs.stat(os.getpid()) or {"sid": None, "pgid": None}
    return {"uid": os.geteuid(), "ancestry": procs.ancestry(), "sid": me["sid"], "pgid": me["pgid"],
            "table": table, "jobs": jobs, "util": util, "min_age": min_age, "idle_window": idle_window}


def survey(opts, reader):
    """(document, signal units): every holder classified and, when reapable, planned. Signals nothing."""
    first, util, samples = sample(reader, opts.idle_window)
    minor_to_index = dict((d["minor"], d["index"]) for d in first["devices"] if d.get("minor") is not None)
    table = process_table()
    holders, unreadable = scan_holders(table, minor_to_index)
    # Read after the scan, so a PID it names is checked against a start time read before it.
    current = reader.read()
    nested = nested_pid_namespace()
    unverified = attach_memory(holders, current, nested)
    ctx = context(table, load_jobs(procs.boot_id(), procs.boot_time()), util, opts.min_age, opts.idle_window)
    for h in holders:
        h["class"], h["reason"], h["job"] = classify(h, ctx)
        if h["state"] == "D":
            h["reason"] += " (state D: inside the driver, signals may not land)"
        h["outcome"] = None
    selected = set(h["pid"] for h in holders if opts.gpu is None or opts.gpu in h["gpus"])
    units = plan(holders, ctx, selected, opts.term_wait)
    doc = {
        "reap_version": 1,
        "uid": os.geteuid(),
        "applied": False,
        "gpu": opts.gpu,
        "min_age_s": opts.min_age,
        "idle_window_s": opts.idle_window,
        "samples": samples,
        "gpu_source": current.get("source") if current["devices"] else first.get("source"),
        "gpu_error": current.get("error") or first.get("error"),
        "nested_pid_namespace": nested,
        "gpus": _gpu_rows(current["devices"] or first["devices"], util, holders),
        "holders": [h for h in holders if h["pid"] in selected],
        "not_selected": len(holders) - len(selected),
        "unreadable": unreadable,
        "nvml_unverified": unverified,
        "jobs_dir": jobrecord.jobs_dir(),
        "actions": [],
    }
    return doc, units


def apply(doc, units, opts, reader):
    """Signal the planned units, then record each holder's outcome and what memory came free."""
    records = act(units, opts.term_wait, opts.kill_wait)
    by_pid = dict((r["pid"], r) for r in records)
    for h in doc["holders"]:
        h["outcome"] = (by_pid.get(h["pid"]) or {}).get("outcome")
    after = settle_memory(reader, opts.release_wait)
    for row in doc["gpus"]:
        now = after.get(row["index"])
        if now is not None and row["memory_used_mib"] is not None:
            row["memory_after_mib"] = now
            row["freed_mib"] = row["memory_used_mib"] - now
    doc["applied"] = True
    doc["actions"] = records
    return doc


def _gpu_rows(devices, util, holders):
    rows = []
    for d in devices:
        i = d["index"]
        rows.append({"index": i, "minor": d.get("minor"), "bus_id": d.get("bus_id"), "util_peak_pct": util.get(i),
                     "memory_used_mib": d.get("memory_used_mib"), "memory_total_mib": d.get("memory_total_mib"),
                     "attributed_mib": sum(h["gpu_mem_mib"].get(str(i)) or 0 for h in holders),
                     "holders": [h["pid"] for h in holders if i in h["gpus"]],
                     "memory_after_mib": None, "freed_mib": None})
    return rows


def main(argv):
    opts = _args(argv)
    reader = GpuReader()
    doc, units = survey(opts, reader)
    if opts.yes and units:
        apply(doc, units, opts, reader)
    doc["applied"] = bool(opts.yes)
    sys.stdout.write(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
