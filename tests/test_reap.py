"""The reaper against real processes holding fixture device nodes, in-process and over the sshd rig.

GPU hardware is the only fake: fixture files stand in for /dev/nvidia* (GPUOPS_ROOT) and a fake
nvidia-smi (tests/fixtures/reap/bin) reports utilisation and frees an app's memory when the app's
process is gone. Every holder is a real process; every one started here is killed at teardown.
"""

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from gpuops.onbox.host import procs
from gpuops.onbox.host import gpu_light
from gpuops.onbox.reaper import reap as onbox
from gpuops.ops import reap as op

FIX = Path(__file__).resolve().parent / "fixtures" / "reap"
HOLDER = FIX / "holder.py"
FAKE_BIN = FIX / "bin"
NOBODY = 65534


def real_start(pid):
    """Start ticks from the real /proc (never the overlay), or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") and not _live_tasks(pid) else int(fields[19])


def _live_tasks(pid):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] not in ("Z", "X"):
                    return True
        except OSError:
            pass
    return False


def wait_for(cond, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class GpuBox:
    """Fixture device nodes, a fake nvidia-smi state, a jobs dir, and the real processes started on it."""

    def __init__(self, base: Path):
        self.base = base
        self.root = base / "root"
        (self.root / "dev").mkdir(parents=True)
        for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
            node = self.root / "dev" / name
            node.write_bytes(b"")
            node.chmod(0o666)
        for i in (0, 1):  # the driver's own record of each GPU's minor (nvidia-smi has no field for it)
            info = self.root / "proc" / "driver" / "nvidia" / "gpus" / ("0000:%02x:00.0" % (0x18 + i)) / "information"
            info.parent.mkdir(parents=True)
            info.write_text("Model: \t\t NVIDIA H100 80GB HBM3\nDevice Minor: \t %d\nBus Location: \t 0000:%02x:00.0\n"
                            % (i, 0x18 + i))
        self.jobs = base / "jobs"
        self.jobs.mkdir()
        self.smi_state = base / "smi.json"
        self.util = {0: 0, 1: 0}
        self.util_series = {0: None, 1: None}
        self.apps = []
        self.started = []
        self.popens = []
        self.write_smi()

    def env(self):
        return {"GPUOPS_ROOT": str(self.root), "GPUOPS_JOBS_DIR": str(self.jobs),
                "GPUOPS_FAKE_SMI": str(self.smi_state)}

    def dev(self, *names):
        return [str(self.root / "dev" / n) for n in names]

    def write_smi(self):
        gpus = [{"index": i, "minor": i, "bus_id": "00000000:%02X:00.0" % (0x18 + i), "util": self.util[i],
                 "util_series": self.util_series[i], "base_mib": 300, "total_mib": 81559} for i in (0, 1)]
        self.smi_state.write_text(json.dumps({"gpus": gpus, "apps": self.apps}))

    def gpu_app(self, pid, gpu, mib, listed=True):
        self.apps.append({"pid": pid, "gpu": gpu, "mib": mib, "listed": listed})
        self.write_smi()

    def _track(self, pid):
        start = wait_for(lambda: real_start(pid), f"pid {pid}")
        self.started.append((pid, start))
        return pid

    def holds(self, pid):
        """Wait until `pid` (or, for a zombie leader, one of its threads) has a fixture node open."""
        def check():
            for d in (f"/proc/{pid}/fd", *(f"/proc/{pid}/task/{t}/fd" for t in os.listdir(f"/proc/{pid}/task"))):
                try:
                    if any(os.readlink(f"{d}/{fd}").startswith(str(self.root)) for fd in os.listdir(d)):
                        return True
                except OSError:
                    pass
            return False
        return wait_for(check, f"pid {pid} to hold a device")

    def spawn(self, mode, *devices, env=None):
        """Run holder.py MODE; returns ({role: pid}, Popen)."""
        pidfile = self.base / f"pids-{len(self.popens)}"
        p = subprocess.Popen([sys.executable, str(HOLDER), mode, str(pidfile), *devices], start_new_session=True,
                             stdin=subprocess.PIPE if mode == "leftover" else subprocess.DEVNULL,
                             env={**os.environ, **(env or {})})
        self.popens.append(p)
        wait_for(pidfile.exists, f"{mode} holder to report")
        roles = dict((role, int(pid)) for role, pid in (line.split() for line in pidfile.read_text().splitlines()))
        for role, pid in roles.items():
            self._track(pid)
            if role in ("holder", "worker", "defunct"):
                self.holds(pid)
        if mode == "defunct":
            wait_for(lambda: open(f"/proc/{roles['defunct']}/stat").read().rpartition(")")[2].split()[0] == "Z",
                     "the defunct leader")
        return roles, p

    def spawn_with_nodes(self, argv, devices, user=None):
        """Start `argv` holding `devices` opened here and inherited (so a dropped user need not open them)."""
        fds = [os.open(d, os.O_RDONLY) for d in devices]
        try:
            kw = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
            p = subprocess.Popen(argv, pass_fds=fds, start_new_session=True, stdin=subprocess.DEVNULL, **kw)
        finally:
            for fd in fds:
                os.close(fd)
        self.popens.append(p)
        self._track(p.pid)
        self.holds(p.pid)
        return p.pid

    def job(self, job_id, pid, ended=None):
        """A job record as the launcher leaves it; `ended` writes exit.json too."""
        d = self.jobs / job_id
        d.mkdir()
        meta = {"job_id": job_id, "pid": pid, "pgid": pid, "start_ticks": real_start(pid) or self._start_of(pid),
                "boot_id": procs.boot_id(), "launched_at": time.time()}
        (d / "meta.json").write_text(json.dumps(meta))
        if ended is not None:
            (d / "exit.json").write_text(json.dumps({"exit_code": ended, "signal": None, "ended_at": time.time()}))
        return meta

    def _start_of(self, pid):
        return next(start for p, start in reversed(self.started) if p == pid)  # the latest, if a pid came back

    def alive(self, pid):
        """The very process we started is still running (same start time, real /proc)."""
        return real_start(pid) == self._start_of(pid)

    def cleanup(self):
        targets = [pid for pid, start in self.started if real_start(pid) == start]
        # Holders a failing test never got to track: their argv names this test's own directory.
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if name.isdigit() and str(self.base).encode() in f.read():
                        targets.append(int(name))
            except OSError:
                pass
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.popens:
            if p.stdin:
                p.stdin.close()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def box(tmp_path, monkeypatch, real_processes):
    b = GpuBox(tmp_path)
    for key, value in b.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{FAKE_BIN}:{os.environ['PATH']}")
    yield b
    b.cleanup()


def reap_here(*args):
    """The on-box entry point, run in this process as the box would run it; returns its JSON document."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert onbox.main(["--term-wait", "2", "--kill-wait", "2", "--release-wait", "3", *args]) == 0
    return json.loads(out.getvalue())


def classes(doc, pids):
    by_pid = dict((h["pid"], h) for h in doc["holders"])
    return dict((pid, by_pid[pid]["class"] if pid in by_pid else None) for pid in pids)


def test_each_holder_is_classified_and_yes_kills_exactly_the_reapable_ones(box):
    all_nodes = box.dev("nvidia0", "nvidiactl", "nvidia-uvm")
    orphan = box.spawn("orphan", *all_nodes)[0]["holder"]
    roles, leader_proc = box.spawn("leftover", *box.dev("nvidia0", "nvidiactl"))
    box.job("train-done", roles["leader"], ended=None)
    leader_proc.stdin.close()
    leader_proc.wait(timeout=5)
    (box.jobs / "train-done" / "exit.json").write_text(json.dumps({"exit_code": 1, "signal": None,
                                                                   "ended_at": time.time()}))
    leftover = roles["worker"]
    running = box.spawn("hold", *all_nodes, env={"HOLDER_CHILD": "1"})[0]
    box.job("train-live", running["holder"])
    other_user = box.spawn_with_nodes(["sleep", "600"], all_nodes, user=NOBODY)
    daemon = box.spawn_with_nodes(["bash", "-c", "exec -a nvidia-persistenced sleep 600"], all_nodes)
    idle = box.spawn("hold", *box.dev("nvidia0"))[0]["holder"]
    busy = box.spawn("orphan", *box.dev("nvidia1", "nvidiactl"))[0]["holder"]
    ctl_only = box.spawn("orphan", *box.dev("nvidiactl", "nvidia-uvm"))[0]["holder"]
    zombie = box.spawn("defunct", *box.dev("nvidia0"))[0]
    box.util[1] = 57
    box.gpu_app(orphan, 0, 1000)
    box.gpu_app(leftover, 0, 2000, listed=False)  # the worker NVML cannot see: U11
    box.gpu_app(idle, 0, 500)
    box.gpu_app(running["holder"], 0, 4000)
    box.gpu_app(busy, 1, 3000)
    box.gpu_app(zombie["defunct"], 0, 700, listed=False)
    everyone = [pid for pid, _ in box.started]

    plan = reap_here("--min-age", "0", "--idle-window", "0")
    expected = {
        orphan: "orphan", leftover: "finished-job", idle: "idle", zombie["defunct"]: "defunct",
        running["holder"]: "live", running["worker"]: "live", busy: "live", ctl_only: "live",
        other_user: "protected", daemon: "protected",
    }
    assert classes(plan, expected) == expected
    why = dict((h["pid"], h["reason"]) for h in plan["holders"])
    assert "reparented" in why[orphan] and "GPU 0 at 0%" in why[orphan]
    assert "train-done" in why[leftover] and "exit 1" in why[leftover]
    assert "train-live" in why[running["worker"]]
    assert "GPU 1 busy (up to 57%" in why[busy]
    assert "user nobody" in why[other_user]
    assert "nvidia-persistenced" in why[daemon]
    assert "no GPU device node" in why[ctl_only]
    # NVML's memory lands only on the holders it verifiably belongs to.
    mem = dict((h["pid"], h["gpu_mem_mib"]) for h in plan["holders"])
    assert mem[orphan] == {"0": 1000} and mem[leftover] == {} and mem[busy] == {"1": 3000}
    defunct_action = next(h["action"] for h in plan["holders"] if h["pid"] == zombie["defunct"])
    assert f"parent {zombie['parent']} is orphan, so it goes too" in defunct_action
    # The dry run signalled nothing.
    assert plan["applied"] is False and plan["actions"] == []
    assert [pid for pid in everyone if not box.alive(pid)] == [roles["leader"]]
    assert op.build(plan, rerun=["x"])["exit_code_hint"] == 5

    done = reap_here("--min-age", "0", "--idle-window", "0", "--yes")
    reaped = {orphan, leftover, idle, zombie["defunct"], zombie["parent"]}
    assert {a["pid"]: a["outcome"] for a in done["actions"]} == dict.fromkeys(reaped, "reaped")
    assert [pid for pid in reaped if box.alive(pid)] == []
    kept = [running["holder"], running["worker"], busy, ctl_only, other_user, daemon]
    assert [pid for pid in kept if not box.alive(pid)] == []
    freed = dict((g["index"], g["freed_mib"]) for g in done["gpus"])
    assert freed == {0: 1000 + 2000 + 500 + 700, 1: 0}
    envelope = op.build(done, rerun=["x"])
    assert envelope["ok"] and "exit_code_hint" not in envelope and "freed 4200 MiB" in envelope["summary"]


def test_a_group_holding_a_protected_process_is_not_signalled_as_a_group(box):
    # One process group: a shell, an idle holder, and a process named like a GPU daemon.
    pidfile = box.base / "group-pids"
    line = (f"{sys.executable} {HOLDER} hold {pidfile} {box.dev('nvidia0')[0]} & "
            "(exec -a nvidia-persistenced sleep 600) & wait")
    shell = subprocess.Popen(["bash", "-c", line], start_new_session=True)
    box.popens.append(shell)
    box._track(shell.pid)
    wait_for(pidfile.exists, "holder")
    holder = box._track(int(pidfile.read_text().split()[1]))
    box.holds(holder)
    daemon = wait_for(lambda: [p for p in procs.pids() if p != holder and (procs.stat(p) or {}).get("pgid") == shell.pid
                               and (procs.cmdline(p) or "").startswith("nvidia-persistenced")], "the daemon")[0]
    box._track(daemon)

    done = reap_here("--min-age", "0", "--idle-window", "0", "--yes")
    (entry,) = [h for h in done["holders"] if h["pid"] == holder]
    assert entry["class"] == "idle"
    assert f"pid {holder} alone (group {shell.pid} has protected {daemon}" in entry["action"]
    assert done["actions"][0]["signals"][0] == f"SIGTERM to pid {holder}"
    assert not box.alive(holder)
    assert box.alive(daemon) and box.alive(shell.pid)


def test_a_defunct_holders_working_parent_is_left_alone(box):
    box.util[1] = 80
    box.write_smi()
    roles = box.spawn("defunct", *box.dev("nvidia0"), env={"HOLDER_PARENT_NODE": box.dev("nvidia1")[0]})[0]
    parent, zombie = roles["parent"], roles["defunct"]
    box.holds(parent)
    done = reap_here("--min-age", "0", "--idle-window", "0", "--yes")
    assert classes(done, [parent, zombie]) == {parent: "live", zombie: "defunct"}
    (entry,) = [h for h in done["holders"] if h["pid"] == zombie]
    assert f"parent {parent} left alone (live: GPU 1 busy" in entry["action"]
    assert f"pid {zombie} alone (group {parent} has holder {parent} (live))" in entry["action"]
    assert [(a["pid"], a["outcome"]) for a in done["actions"]] == [(zombie, "reaped")]
    assert not box.alive(zombie)  # its threads are gone; the zombie entry waits for its parent
    assert box.alive(parent)


def test_a_pid_reused_between_plan_and_kill_is_not_signalled(box):
    victim = box.spawn("orphan", *box.dev("nvidia0"))[0]["holder"]
    opts = onbox._args(["--min-age", "0", "--idle-window", "0", "--term-wait", "1", "--kill-wait", "1"])
    doc, units = onbox.survey(opts, gpu_light.Reader())
    (unit,) = [u for u in units if u["pid"] == victim]
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{victim}"), "the victim to be reaped by init")
    newcomer = _start_at_pid(victim, box)
    if newcomer.pid != victim:  # the kernel would not hand the pid out again: replay the plan against it instead
        unit = dict(unit, pid=newcomer.pid, pgid=newcomer.pid)
    records = onbox.act([unit], term_wait=1, kill_wait=1)
    assert records[0]["outcome"] == "pid-reused"
    assert records[0]["signals"] == ["SIGTERM not sent: the pid now names another process"]
    assert box.alive(newcomer.pid)


def _start_at_pid(pid, box, tries=30):
    """A harmless process, on `pid` itself when the kernel lets us pick it (root: ns_last_pid)."""
    p = None
    for _ in range(tries):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError:
            pass
        p = subprocess.Popen(["sleep", "600"], start_new_session=True)
        box.popens.append(p)
        box._track(p.pid)
        if p.pid == pid:
            break
    return p


def test_a_holder_stuck_in_the_driver_is_reported_not_retried(box):
    stuck = box.spawn("orphan", *box.dev("nvidia0"))[0]["holder"]
    box.gpu_app(stuck, 0, 9000)
    # Kernel state: /proc says it is in uninterruptible sleep inside the driver, and stays there.
    fake = box.root / "proc" / str(stuck)
    fake.mkdir(parents=True)
    text = Path(f"/proc/{stuck}/stat").read_text()
    head, _, rest = text.rpartition(")")
    (fake / "stat").write_text(head + ") D " + rest.split(None, 1)[1])

    t0 = time.monotonic()
    done = reap_here("--min-age", "0", "--idle-window", "0", "--term-wait", "0.5", "--kill-wait", "0.5", "--yes")
    elapsed = time.monotonic() - t0
    (entry,) = [h for h in done["holders"] if h["pid"] == stuck]
    assert entry["class"] == "orphan" and "state D" in entry["reason"]
    (record,) = done["actions"]
    assert record["outcome"] == "stuck" and "GPU reset or a reboot" in record["why"]
    assert elapsed < 0.5 + 0.5 + 3 + 2  # one SIGTERM, one SIGKILL, bounded waits: no retry loop
    assert real_start(stuck) is None  # the real process did get the signals (it is gone or a zombie)
    envelope = op.build(done, rerun=["x"])
    assert envelope["exit_code_hint"] == 1
    assert [f["id"] for f in envelope["findings"]][:1] == ["reap.stuck"]


def test_gpu_filter_acts_on_that_gpu_only(box):
    on0 = box.spawn("orphan", *box.dev("nvidia0"))[0]["holder"]
    on1 = box.spawn("orphan", *box.dev("nvidia1"))[0]["holder"]
    done = reap_here("--min-age", "0", "--idle-window", "0", "--gpu", "1", "--yes")
    assert [h["pid"] for h in done["holders"] if h["pid"] in (on0, on1)] == [on1]
    assert not box.alive(on1) and box.alive(on0)


def test_young_holders_and_an_unreadable_gpu_are_left_alone(box):
    young = box.spawn("orphan", *box.dev("nvidia0"))[0]["holder"]
    doc = reap_here("--min-age", "3600", "--idle-window", "0")
    assert classes(doc, [young]) == {young: "live"}
    box.smi_state.write_text("not json")  # nvidia-smi now fails
    doc = reap_here("--min-age", "0", "--idle-window", "0", "--yes")
    (entry,) = [h for h in doc["holders"] if h["pid"] == young]
    assert entry["class"] == "live" and "not provably idle" in entry["reason"]
    assert box.alive(young) and doc["gpu_error"]


def test_utilisation_is_sampled_over_the_window(box):
    holder = box.spawn("orphan", *box.dev("nvidia0"))[0]["holder"]
    # The GPU turns busy for one reading half-way through the window, idle before and after: only
    # a reader that samples the whole window sees it (counted in readings, not seconds, so a loaded
    # machine cannot move the moment out of the window).
    box.util_series[0] = [0, 3, 0]
    box.write_smi()
    doc = reap_here("--min-age", "0", "--idle-window", "2")
    assert doc["samples"] >= 3
    (entry,) = [h for h in doc["holders"] if h["pid"] == holder]
    assert entry["class"] == "live" and "up to 3%" in entry["reason"]


def test_with_no_holder_the_gpus_are_not_sampled_and_the_answer_comes_at_once(box):
    """reap showed nothing for ~10.5 s: it sampled utilisation though no process held a GPU."""
    doc = reap_here("--min-age", "0", "--idle-window", "5")
    assert doc["holders"] == [] and doc["samples"] == 1
    assert doc["idle_window_s"] == 0 and doc["gpus"], doc  # the GPUs are still read once
    holder = box.spawn("orphan", *box.dev("nvidia0"))[0]["holder"]
    doc = reap_here("--min-age", "0", "--idle-window", "2")
    assert doc["samples"] >= 3 and doc["idle_window_s"] == 2 and [h["pid"] for h in doc["holders"]] == [holder]


def test_a_terminal_sees_the_sampling_window_count_down(box):
    from tests import terminal

    box.spawn("orphan", *box.dev("nvidia0"))
    code, raw = terminal.run("reap", "--min-age", "0", "--idle-window", "2")
    lines = terminal.frames(raw)
    assert code == 5, raw
    assert any(re.search(r"reap: watching GPU holders for up to 2s \([12]s left\)$", line) for line in lines), lines
    from tests.test_screens import suggested

    assert any(cmd.startswith("gpuops reap --host local --min-age 0 --idle-window 2 --yes --plan ")
               for cmd in suggested("\n".join(lines[-4:]))), lines


CPU_PHASE = "while True: sum(i * i for i in range(100000))"  # tokenising, on an idle GPU
CHECKPOINTING = ("import os, sys, time\nf = open(sys.argv[1], 'wb')\nwhile True:\n    f.seek(0); f.write(b'\\0' * (1 << 20)); "
                 "f.flush(); os.fsync(f.fileno()); time.sleep(0.1)")


def test_cpu_phase_process_on_an_idle_gpu_is_not_reaped_and_shows_its_last_activity(box):
    nodes = box.dev("nvidia0", "nvidiactl")
    tokenising = box.spawn_with_nodes([sys.executable, "-c", CPU_PHASE], nodes)
    writing = box.spawn_with_nodes([sys.executable, "-c", CHECKPOINTING, str(box.base / "ckpt.bin")], nodes)
    idle = box.spawn("hold", *nodes)[0]["holder"]
    for pid, mib in ((tokenising, 30000), (writing, 20000), (idle, 500)):
        box.gpu_app(pid, 0, mib)

    done = reap_here("--min-age", "0", "--idle-window", "2", "--yes")
    assert classes(done, [tokenising, writing, idle]) == {tokenising: "live", writing: "live", idle: "idle"}
    by_pid = dict((h["pid"], h) for h in done["holders"])
    assert "GPU 0 at 0% over the 2s window, but its processes used" in by_pid[tokenising]["reason"]
    assert "a CPU phase" in by_pid[tokenising]["reason"]
    assert by_pid[tokenising]["last_activity"].startswith("now (CPU ")
    assert by_pid[tokenising]["activity"]["cpu_s"] > 0.1  # a busy core gets far more, but a loaded box shares it
    assert "I/O" in by_pid[writing]["last_activity"] and by_pid[writing]["activity"]["io_bytes"] >= 10 << 20
    assert by_pid[idle]["last_activity"].startswith("none in ") and by_pid[idle]["activity"]["window_s"] >= 2
    assert "(GPU 0 0%, CPU 0s, I/O 0 B)" in by_pid[idle]["last_activity"]
    assert [a["pid"] for a in done["actions"]] == [idle]
    assert box.alive(tokenising) and box.alive(writing) and not box.alive(idle)


def test_a_holder_in_a_live_terminal_session_is_never_idle(box):
    import pty

    node = box.dev("nvidia0")[0]
    here, left = box.base / "in-shell", box.base / "setsid"
    line = f"{sys.executable} {HOLDER} hold {here} {node} & setsid {sys.executable} {HOLDER} hold {left} {node} & wait"
    shell, terminal = pty.fork()  # a login-like shell: a session of its own with a controlling terminal
    if shell == 0:
        os.execvp("bash", ["bash", "-c", line])
    try:
        box._track(shell)
        in_shell, setsid = (box._track(int(wait_for(lambda p=p: p.exists() and p.read_text(), p.name).split()[1]))
                            for p in (here, left))
        for pid in (in_shell, setsid):
            box.holds(pid)
        done = reap_here("--min-age", "0", "--idle-window", "0", "--yes")
        why = dict((h["pid"], h["reason"]) for h in done["holders"])
        assert classes(done, [in_shell, setsid]) == {in_shell: "live", setsid: "live"}
        assert "in a live interactive session: it has terminal pts/" in why[in_shell]
        assert f"whose session leader {shell} (bash) still runs" in why[in_shell]
        assert f"its ancestor {shell} (bash) has terminal pts/" in why[setsid]
        assert done["actions"] == [] and box.alive(in_shell) and box.alive(setsid)
    finally:
        os.close(terminal)
        box.cleanup()
        os.waitpid(shell, 0)


def test_jobs_started_by_the_real_launcher(box, cli):
    def launch(line):
        r = cli("launch", "--cmd", line, "--json")
        meta = json.loads(r.stdout)["data"]["meta"]
        assert meta.get("pid"), r.stdout + r.stderr  # started (the leftover job ends at once: exit 1)
        for pid in (meta["wrapper_pid"], meta["pid"]):
            if real_start(pid):
                box.started.append((pid, real_start(pid)))
        return meta

    def reported(pidfile, role="holder"):
        wait_for(pidfile.exists, f"{pidfile.name}")
        roles = dict(line.split() for line in pidfile.read_text().splitlines())
        pid = box._track(int(roles[role]))
        box.holds(pid)
        return pid

    py, node = sys.executable, box.dev("nvidia0")[0]
    # A running job: a daemon it started in a session of its own (adopted by the job's supervisor,
    # which is a subreaper) and a plain child it waits on.
    running = launch(f"{py} {HOLDER} orphan {box.base}/daemon {node}; {py} {HOLDER} hold {box.base}/child {node}")
    daemon, child = reported(box.base / "daemon"), reported(box.base / "child")
    # An ended job whose worker stayed behind in the job's process group.
    ended = launch(f"{py} {HOLDER} leftover {box.base}/left {node}")
    worker = reported(box.base / "left", "worker")
    exit_record = box.jobs / ended["job_id"] / "exit.json"
    wait_for(exit_record.exists, "the ended job's exit record")
    assert {"pid": worker, "start_ticks": real_start(worker)} in json.loads(exit_record.read_text())["survivors"]

    r = cli("reap", "--min-age", "0", "--idle-window", "0", "--term-wait", "2", "--json")
    assert r.returncode == 5, r.stdout + r.stderr
    doc = json.loads(r.stdout)["data"]
    assert classes(doc, [daemon, child, worker]) == {daemon: "live", child: "live", worker: "finished-job"}
    assert (procs.stat(daemon) or {}).get("ppid") == running["wrapper_pid"]

    r = cli("reap", "--min-age", "0", "--idle-window", "0", "--term-wait", "2", "--yes", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not box.alive(worker)
    assert box.alive(daemon) and box.alive(child)


# ----------------------------------------------------------------------------- through the CLI and sshd

@pytest.fixture(scope="module")
def remote_box(rig, tmp_path_factory):
    b = GpuBox(tmp_path_factory.mktemp("reapbox"))
    env = {**b.env(), "PATH": f"{FAKE_BIN}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    ssh_box = rig.box("reapbox", env=env)
    yield b, ssh_box
    b.cleanup()


def test_cli_over_ssh_plans_then_reaps(remote_box, cli, rig):
    b, ssh_box = remote_box
    orphan = b.spawn("orphan", *b.dev("nvidia0", "nvidiactl"))[0]["holder"]
    running = b.spawn("hold", *b.dev("nvidia0", "nvidiactl"))[0]["holder"]
    b.job("serve-1", running)
    daemon = b.spawn_with_nodes(["bash", "-c", "exec -a nvidia-persistenced sleep 600"], b.dev("nvidiactl"))
    b.gpu_app(orphan, 0, 6144, listed=False)
    b.gpu_app(running, 0, 2048)
    flags = ["reap", "--host", ssh_box.spec, "--min-age", "0", "--idle-window", "0", "--term-wait", "2"]
    env = {**rig.env(), "COLUMNS": "200"}

    before = ssh_box.exec_requests()
    dry = cli(*flags, "--json", env=env)
    assert dry.returncode == 5, dry.stderr
    assert ssh_box.exec_requests() == before + 1  # one exec channel: scan, judge and plan on the box
    doc = json.loads(dry.stdout)
    assert doc["command"] == "reap" and doc["host"] == ssh_box.spec and not doc["ok"]
    assert classes(doc["data"], [orphan, running, daemon]) == {orphan: "orphan", running: "live", daemon: "protected"}
    # the exact command that applies this plan and no other
    assert [s["argv"] for s in doc["next"]] == [["gpuops", "reap", "--host", ssh_box.spec, "--min-age", "0",
                                                 "--idle-window", "0", "--term-wait", "2", "--yes", "--plan",
                                                 doc["data"]["plan"]["plan_id"]]]

    shown = cli(*flags, env=env)
    print(shown.stdout)
    assert shown.returncode == 5 and "dry run, nothing was signalled" in shown.stdout.splitlines()[0]
    assert f"pid {orphan}  orphan  GPU 0  " in shown.stdout and "    would send: SIGTERM, SIGKILL" in shown.stdout
    assert all(b.alive(p) for p in (orphan, running, daemon))

    applied = cli(*flags, "--yes", env=env)
    print(applied.stdout)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "reaped 1 of 1 process(es); freed 6144 MiB" in applied.stdout
    assert not b.alive(orphan)
    assert b.alive(running) and b.alive(daemon)

    again = cli(*flags, "--json", env=env)
    assert again.returncode == 0 and "none to reap" in json.loads(again.stdout)["summary"]


def test_cli_rejects_a_bad_gpu_index_in_one_line(cli):
    r = cli("reap", "--gpu", "first")
    assert r.returncode == 2
    assert r.stderr.strip() == "gpuops: --gpu takes a GPU index from 0 to 1023, not 'first'"


def test_memory_no_process_here_holds_is_said_in_the_verdict_with_what_to_do():
    """reap on a box whose 2 x 20 GiB was held from outside the container said "no process holds an
    NVIDIA device", its warnings cut short and nothing to do; preflight had the advice."""
    gpus = [{"index": i, "memory_used_mib": 20480, "attributed_mib": 0, "holders": []} for i in (0, 1)]
    facts = {"holders": [], "gpus": gpus, "gpu": None, "applied": False, "actions": [],
             "nested_pid_namespace": False}
    doc = op.build(facts, ["gpuops", "reap"])
    assert doc["summary"] == ("40960 MiB on GPU 0, 1 held by a process outside this container; "
                              "nothing here to reap")
    assert doc["advice"] and "restart the container" in doc["advice"][0]
    assert all(len(f["title"]) <= 60 for f in doc["findings"])
    facts["gpus"] = [dict(g, memory_used_mib=100) for g in gpus]
    assert op.build(facts, ["gpuops", "reap"])["summary"] == "no process holds an NVIDIA device"
