"""A real single-node Slurm for tests: munged, slurmctld and slurmd run from a temp dir.

Nothing is installed or started system-wide: the munge key, the socket, slurm.conf, state, spool,
pid and log files all live in the rig's directory, the daemons listen on free ports (so two rigs,
or a rig and a real cluster, can share the machine), and every client command the rig runs gets
SLURM_CONF pointing at its slurm.conf. The settings are those of
shared/research/slurm-feasibility.md: no slurmdbd, no cgroups (proctrack/linuxproc, task/none),
SlurmUser=root, and batch_sched_delay=0 so a job starts within about a second instead of on the
scheduler's 3 s tick.

The daemons run in their own sessions, so a Ctrl-C or a `timeout` aimed at the test runner does not
reach them; they are stopped by PID (SIGTERM, then SIGKILL) after every job is cancelled and gone,
because slurmstepd is reparented away from slurmd and would outlive it otherwise.

Slurm needs the node's short hostname to resolve. When it does not, one line is appended to
/etc/hosts and exactly that line is taken out again on stop; other lines are never touched.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.rig import slurmdbd
from tests.rig.sshd import free_port

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "scontrol", "scancel", "squeue", "sinfo")
HOSTS_FILE = Path("/etc/hosts")
_HOSTS_MARK = "# gpuops tests/rig/slurm.py"


def _tool(name):
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.path.exists(p)),
                                      None)


def unavailable():
    """Why this machine cannot run the rig, or None when it can (checked before anything starts)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "Slurm's daemons run as SlurmUser=root here, and the tests are not running as root"
    missing = [name for name in DAEMONS + CLIENTS if _tool(name) is None]
    if missing:
        return ("Slurm is not installed (missing " + ", ".join(missing) + "); scripts/test installs "
                "slurmctld slurmd slurm-client munge when run as root")
    return None


def accounting_unavailable():
    """Why the rig cannot run slurmdbd here, or None."""
    missing = slurmdbd.missing()
    if missing:
        return ("Slurm's accounting is not installed (missing " + ", ".join(missing) + "); scripts/test installs "
                "slurmdbd slurm-wlm-mysql-plugin mariadb-server-core mariadb-client-core as root")
    return unavailable()


def _config(d, host, ctld_port, slurmd_port, accounting=None, min_job_age=None):
    lines = [
        "ClusterName=gpuopstest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={d}/munge/munge.sock",
        "CredType=cred/munge",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={d}/log/jobcomp.txt",
        "MailProg=/bin/true",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=batch_sched_delay=0",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        "MpiDefault=none",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN",
        f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP",
    ]
    if accounting is not None:
        lines = [line for line in lines if not line.startswith(("AccountingStorageType=", "JobAcctGatherType="))]
        lines += slurmdbd.config_lines(host, accounting.dbd_port)
    if min_job_age is not None:
        lines.append(f"MinJobAge={min_job_age}")
    return "\n".join(lines) + "\n"


def _resolves(name):
    try:
        socket.getaddrinfo(name, None)
        return True
    except socket.gaierror:
        return False


def _hosts_add(host):
    """Make `host` resolve; returns the line appended to /etc/hosts, or None when it already did."""
    if _resolves(host):
        return None
    line = f"127.0.0.1 {host} {_HOSTS_MARK}"
    with HOSTS_FILE.open("a+") as fh:
        fh.seek(0)
        text = fh.read()
        fh.write(("" if not text or text.endswith("\n") else "\n") + line + "\n")
    return line


def _hosts_remove(line):
    """Take out the one line this rig appended; rewritten in place, as /etc/hosts may be a mount."""
    with HOSTS_FILE.open("r+") as fh:
        lines = fh.read().splitlines(keepends=True)
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].rstrip("\n") == line:
                del lines[i]
                fh.seek(0)
                fh.write("".join(lines))
                fh.truncate()
                return


class SlurmError(RuntimeError):
    """The cluster could not be brought up (the message carries the daemons' last log lines)."""


class SlurmRig:
    """start() brings the cluster up (node idle); stop() tears it down and removes the directory.
    `accounting`: also MariaDB and slurmdbd, so plain sacct answers; `min_job_age`: seconds the
    controller keeps an ended job (Slurm's MinJobAge; it forgets them on a 60 s purge cycle)."""

    def __init__(self, directory=None, accounting=False, min_job_age=None):
        self.dir = Path(directory or tempfile.mkdtemp(prefix="gpuops-slurm-"))
        self.conf = self.dir / "etc" / "slurm.conf"
        self.host = socket.gethostname().split(".")[0]
        self.procs = {}
        self._hosts_line = None
        self.accounting = slurmdbd.Accounting(self) if accounting else None
        self.min_job_age = min_job_age

    # ------------------------------------------------------------------ client side

    def env(self, **extra):
        """The environment for a client command (sbatch, scontrol, gpuops triage, ...)."""
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    def run(self, *argv, check=True, timeout=20):
        out = subprocess.run(list(argv), capture_output=True, text=True, env=self.env(), timeout=timeout)
        if check and out.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} exited {out.returncode}: {out.stderr.strip()}")
        return out

    def sbatch(self, *args):
        """Submit; returns the job id. `args` are sbatch's (options, then the script)."""
        return self.run("sbatch", "--parsable", *args).stdout.strip().split(";")[0]

    def state(self, job_id):
        out = self.run("scontrol", "show", "job", "-o", str(job_id), check=False)
        for word in out.stdout.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return None

    def wait_state(self, job_id, states, timeout=20):
        """Poll until the job is in one of `states`; returns the state or raises on timeout."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.state(job_id)
            if state in states:
                return state
            time.sleep(0.1)
        raise SlurmError(f"job {job_id} is {state}, not one of {', '.join(states)}, after {timeout} s")

    def job_ids(self):
        return self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()

    # ------------------------------------------------------------------ daemons

    def start(self, timeout=30):
        d = self.dir
        for sub in ("munge", "etc", "state", "spool", "log", "run"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses a socket or key under a group- or world-writable directory.
        for path in (d, d / "munge"):
            os.chmod(path, 0o755)
        self._hosts_line = _hosts_add(self.host)
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout):
        d = self.dir
        key, sock = d / "munge" / "munge.key", d / "munge" / "munge.sock"
        subprocess.run([_tool("mungekey"), "--create", f"--keyfile={key}", "--force"], check=True,
                       capture_output=True, timeout=20)
        os.chmod(key, 0o600)
        self._spawn("munged", [_tool("munged"), "-F", "--force", f"--socket={sock}", f"--key-file={key}",
                               f"--pid-file={d}/run/munged.pid", f"--seed-file={d}/munge/munged.seed"])
        self._until(lambda: sock.exists(), timeout, "munged did not create its socket")
        self.conf.write_text(_config(d, self.host, free_port(), free_port(), self.accounting, self.min_job_age))
        if self.accounting is not None:
            self.accounting.link_munge(sock)
            self.accounting.start(self._spawn, lambda ready, what: self._until(ready, timeout, what))
        self._spawn("slurmctld", [_tool("slurmctld"), "-D", "-f", str(self.conf)])
        self._spawn("slurmd", [_tool("slurmd"), "-D", "-f", str(self.conf)])
        self._until(lambda: self.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.split() == ["idle"],
                    timeout, "the node did not become idle")

    def _spawn(self, name, argv):
        log = open(self.dir / "log" / f"{name}.out", "wb")
        with log:
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                env=self.env(), start_new_session=True)

    def _until(self, ready, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise SlurmError(f"{dead[0]} exited {self.procs[dead[0]].returncode}:\n{self.log_tail()}")
            if ready():
                return
            time.sleep(0.05)
        raise SlurmError(f"{what} within {timeout} s:\n{self.log_tail()}")

    def dead_conf(self):
        """A slurm.conf for a controller that is not there (a closed port, short timeouts): what a
        login node whose controller is down sees."""
        text = self.conf.read_text()
        dead = self.conf.parent / "dead.conf"
        port = free_port()
        lines = [f"SlurmctldPort={port}" if line.startswith("SlurmctldPort=") else line for line in text.splitlines()]
        dead.write_text("\n".join(lines + ["MessageTimeout=1", "TCPTimeout=1"]) + "\n")
        return dead

    def log_tail(self, lines=8):
        parts = []
        for path in sorted((self.dir / "log").glob("*")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            if text:
                parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts)

    def stop(self):
        """Cancel and drain every job, stop slurmd, slurmctld and munged by PID, clean up."""
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            ids = self.job_ids()
            if ids:
                self.run("scancel", *ids, check=False)
                deadline = time.monotonic() + 15
                while self.job_ids() and time.monotonic() < deadline:
                    time.sleep(0.1)
        for name in ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                _terminate(proc)
        if self.accounting is not None:
            self.accounting.unlink_munge()
        if self._hosts_line:
            _hosts_remove(self._hosts_line)
            self._hosts_line = None
        shutil.rmtree(self.dir, ignore_errors=True)


def _terminate(proc, grace=5):
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        # An slurmd that lost its controller can ignore SIGTERM (seen in the feasibility run).
        proc.kill()
        proc.wait()
