"""The reap rules, pure: which class a GPU holder is in, and why. Everything they read is in the
holder's facts (gpuops.onbox.reaper.holders.describe) and the context; nothing here touches /proc.

The first rule that fits wins:
  protected     never touched: PID 1, kernel threads, our own chain and session, GPU and system
                daemons, systemd services, processes of other users
  live          part of a running gpuops job
  defunct       exited, but its threads still hold the device; its parent is signalled too
                when the parent could be reaped in its own right
  live          its GPU is busy (any utilisation in the sampled window)
  finished-job  left behind by a gpuops job whose exit record exists
  live          holds no GPU node, its GPU is not provably idle, or it is younger than --min-age
  live          in a live interactive session (its own or an ancestor's terminal, whose session
                leader still runs), or itself busy: its process tree used CPU or moved bytes over
                the window (a CPU phase: data loading, tokenising, writing a checkpoint), or that
                could not be read
  orphan        reparented to init or a subreaper (its launcher is gone), its GPU idle, itself quiet
  idle          its GPU idle, itself quiet, its parent still there
"""

import re

REAPABLE = ("defunct", "orphan", "finished-job", "idle")
CLASSES = REAPABLE + ("live", "protected")

# Compared with comm (cut by the kernel to 15 characters) and with argv[0]'s basename.
PROTECTED_NAMES = (
    "sshd", "sshd-session", "sshd-auth", "nvidia-persistenced", "nv-hostengine", "dcgm-exporter",
    "nvidia-dcgm", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server", "nvidia-smi", "nvidia-powerd",
    "nvidia-fabricmanager", "nv-fabricmanager", "Xorg", "X", "Xwayland", "gnome-shell",
)
_EXPORTER = re.compile(r"[-_]exporter$")
# Parents that adopt orphans: a process whose parent is one of these lost its launcher.
INIT_LIKE = ("systemd", "init", "tini", "dumb-init", "docker-init", "catatonit", "s6-svscan")
# Below these over the window a process tree is quiet: 1 % of one core, and 64 KiB/s of I/O (an
# idle Python process holding a CUDA context wakes for its heartbeats and little else).
QUIET_CPU_SHARE = 0.01
QUIET_IO_BPS = 64 * 1024


def _descends_from(pid: int, ancestor, start_ticks, table):
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


def _tty(nr) -> str:
    major, minor = (nr >> 8) & 0xfff, (nr & 0xff) | ((nr >> 12) & 0xfff00)
    if 136 <= major <= 143:
        return "pts/%d" % ((major - 136) * 256 + minor)
    return "tty %d:%d" % (major, minor)


def interactive_session(f, table, own_sid):
    """Why `f` belongs to a live interactive session, or None: it or an ancestor has a controlling
    terminal whose session leader still runs (an SSH shell, a tmux pane, a notebook server started
    from one). The walk stops at the reaper's own session: a process that left it with setsid is
    judged on its own, and those that stayed in it are protected anyway."""
    node, seen = f, set()
    while node and node["pid"] > 1 and node["pid"] not in seen:
        seen.add(node["pid"])
        if node.get("sid") == own_sid:
            return None
        leader = table.get(node.get("sid"))
        if node.get("tty_nr") and leader and leader.get("tty_nr") == node["tty_nr"] and leader["state"] not in "ZX":
            who = "it has" if node is f else "its ancestor %d (%s) has" % (node["pid"], node["comm"])
            return "in a live interactive session: %s terminal %s, whose session leader %d (%s) still runs" % (
                who, _tty(node["tty_nr"]), node["sid"], leader["comm"])
        node = table.get(node["ppid"])
    return None


def _bytes(n) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return "%.1f %s" % (n / float(size), unit)
    return "%d B" % n


def working(a):
    """Why the process tree itself is not provably quiet over the window, or None when it is."""
    if not a or a.get("cpu_s") is None:
        return "its own CPU time over the window could not be read: not provably idle"
    over = "over %.1fs" % a["window_s"]
    if a["cpu_s"] > QUIET_CPU_SHARE * a["window_s"]:
        return "its processes used %gs of CPU %s: a CPU phase (data loading, tokenising, checkpointing)" % (
            a["cpu_s"], over)
    if a["io_bytes"] is None:
        return "its own I/O (/proc/PID/io) could not be read: not provably idle"
    if a["io_bytes"] > QUIET_IO_BPS * a["window_s"]:
        return "its processes moved %s of I/O %s: reading data or writing a checkpoint" % (_bytes(a["io_bytes"]), over)
    return None


def last_activity(f, ctx) -> str:
    """What the window saw the holder do, for the plan: busy now, or quiet for at least the window."""
    a, util = f["activity"], ctx["util"]
    now = ["GPU %s at up to %g%%" % (i, util[i]) for i in f["gpus"] if util.get(i)]
    if a["cpu_s"] > QUIET_CPU_SHARE * a["window_s"]:
        now.append("CPU %gs" % a["cpu_s"])
    if a["io_bytes"] and a["io_bytes"] > QUIET_IO_BPS * a["window_s"]:
        now.append("I/O %s" % _bytes(a["io_bytes"]))
    if now:
        return "now (%s in %.1fs)" % (", ".join(now), a["window_s"])
    gpus = ["GPU %s %s" % (i, "0%" if util.get(i) == 0 else "unread") for i in f["gpus"]]
    return "none in %.1fs (%s); %gs CPU since it started" % (
        a["window_s"], ", ".join(gpus + ["CPU %gs" % a["cpu_s"], "I/O " + (
            "unreadable" if a["io_bytes"] is None else _bytes(a["io_bytes"]))]), a["cpu_total_s"])


def _ended(job) -> str:
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
    why = interactive_session(f, ctx["table"], ctx["sid"]) or working(f.get("activity"))
    if why:
        return "live", "GPU %s at 0%% over %s, but %s" % (_gpu_list(f["gpus"]), window, why), None
    idle = "GPU %s at 0%% over %s, its own CPU and I/O quiet" % (_gpu_list(f["gpus"]), window)
    lost = orphaned(f, ctx["table"])
    if lost:
        return "orphan", "%s; %s" % (lost, idle), None
    return "idle", "%s; parent %d still runs" % (idle, f["ppid"]), None
