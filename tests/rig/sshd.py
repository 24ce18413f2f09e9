"""A real OpenSSH sshd on loopback for tests: temp host key, authorized_keys, per-box SetEnv.

Each SshBox is its own sshd process on a free port, so every box can carry its own environment
(GPUOPS_ROOT for a fixture sysroot, PATH with a fake nvidia-smi first) through sshd's SetEnv.
Boxes share one client key, one ssh_config (an alias per box) and one known_hosts file, which
the code under test finds through GPUOPS_SSH_CONFIG, exactly as a user's ~/.ssh/config would.
"""

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
SFTP_SERVER = next((p for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                                "/usr/lib/ssh/sftp-server") if os.path.exists(p)), "internal-sftp")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path, kind="ed25519"):
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "gpuops-test", "-f", str(path)], check=True)
    return path


class SshBox:
    def __init__(self, rig, name, env=None, host_key=None):
        self.rig = rig
        self.name = name
        self.env = dict(env or {})
        self.dir = rig.dir / f"box-{name}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.host_key = host_key or keygen(self.dir / "host_ed25519")
        self.port = free_port()
        # A port freed by an earlier box may come back with a new host key: that is a new box,
        # not a changed one, so forget whatever known_hosts says about the port.
        rig.forget_port(self.port)
        self.log = self.dir / "sshd.log"
        self.proc = None

    @property
    def spec(self) -> str:
        """The ssh_config alias the code under test should use."""
        return self.name

    @property
    def direct_spec(self) -> str:
        return f"{self.rig.user}@127.0.0.1:{self.port}"

    def config_text(self) -> str:
        lines = [
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {self.host_key}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.rig.authorized_keys}",
            "StrictModes no",
            "UsePAM no",
            "PermitRootLogin yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "LogLevel DEBUG1",
            "MaxStartups 200",
            "MaxSessions 200",
            "ClientAliveInterval 0",
            f"Subsystem sftp {SFTP_SERVER}",
        ]
        cert = Path(f"{self.host_key}-cert.pub")
        if cert.exists():  # a host certificate signed beside the key (ssh-keygen -s CA -h)
            lines.append(f"HostCertificate {cert}")
        if self.env:
            lines.append("SetEnv " + " ".join(f'"{k}={v}"' for k, v in self.env.items()))
        return "\n".join(lines) + "\n"

    def start(self):
        cfg = self.dir / "sshd_config"
        cfg.write_text(self.config_text())
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        self.log.write_text("")
        self.proc = subprocess.Popen([SSHD, "-D", "-f", str(cfg), "-E", str(self.log)],
                                     start_new_session=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"sshd on port {self.port} did not come up")

    def stop(self):
        """The box is gone: its listener and every live connection (sshd gives each connection a
        session of its own, so the listener's group alone would leave kept masters talking to a
        box that no longer exists)."""
        if self.proc and self.proc.poll() is None:
            self.kill_session_children()
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def kill_session_children(self):
        """Cut every live connection (kill the per-connection sshd children), keep listening."""
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        pids = [int(p) for p in out.split()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def exec_requests(self) -> int:
        """How many exec channel requests sshd has served (its DEBUG log names each one)."""
        return sum(1 for line in self.log.read_text(errors="replace").splitlines()
                   if "req exec" in line)


class SshRig:
    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.user = getpass.getuser()
        self.client_key = keygen(self.dir / "client_ed25519")
        self.authorized_keys = self.dir / "authorized_keys"
        self.authorized_keys.write_text((self.dir / "client_ed25519.pub").read_text())
        self.known_hosts = self.dir / "known_hosts"
        self.known_hosts.write_text("")
        self.ssh_config = self.dir / "ssh_config"
        self.boxes = {}
        self._write_config()

    def forget_port(self, port):
        prefix = f"[127.0.0.1]:{port} "
        lines = self.known_hosts.read_text().splitlines(keepends=True)
        self.known_hosts.write_text("".join(line for line in lines if not line.startswith(prefix)))

    def box(self, name, env=None, host_key=None) -> SshBox:
        if name in self.boxes:
            raise ValueError(f"the rig already has a box named {name!r}: one fixture starts it, others ask for that one")
        box = SshBox(self, name, env=env, host_key=host_key).start()
        self.boxes[name] = box
        self._write_config()
        return box

    def alias(self, name, hostname="127.0.0.1", port=None, **options):
        """An extra ssh_config alias (e.g. one that points at a closed port)."""
        self.boxes[name] = _Alias(name, hostname, port or free_port(), options)
        self._write_config()

    def _write_config(self):
        blocks = []
        for name, box in self.boxes.items():
            opts = getattr(box, "options", {})
            blocks.append(
                f"Host {name}\n  HostName {getattr(box, 'hostname', '127.0.0.1')}\n  Port {box.port}\n"
                f"  User {self.user}\n  IdentityFile {opts.get('IdentityFile', self.client_key)}\n"
                f"  IdentitiesOnly yes\n  UserKnownHostsFile {opts.get('UserKnownHostsFile', self.known_hosts)}\n"
                f"  ConnectTimeout 5\n"
                + "".join(f"  {k} {v}\n" for k, v in opts.items() if k not in ("IdentityFile", "UserKnownHostsFile"))
            )
        # No IdentityFile under `Host *`: OpenSSH adds IdentityFile lines up, and an alias with a
        # stranger's key must offer only that key.
        blocks.append(f"Host *\n  UserKnownHostsFile {self.known_hosts}\n  IdentitiesOnly yes\n  ConnectTimeout 5\n")
        self.ssh_config.write_text("\n".join(blocks))

    def env(self) -> dict:
        """Environment for running the gpuops CLI against this rig."""
        return {**os.environ, "GPUOPS_SSH_CONFIG": str(self.ssh_config)}

    def stop(self):
        for box in self.boxes.values():
            if isinstance(box, SshBox):
                box.stop()


class _Alias:
    def __init__(self, name, hostname, port, options):
        self.name, self.hostname, self.port, self.options = name, hostname, port, options
