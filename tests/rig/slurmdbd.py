"""Slurm's accounting for the test rig: MariaDB and slurmdbd from the rig's temp dir, so plain
`sacct` (not `sacct -c`) answers, with the job's steps and their MaxRSS.

As shared/research/slurm-feasibility.md measured: mariadb-install-db into the temp dir, mariadbd
on a free loopback port with its socket there, a `slurm` database user, then slurmdbd with its
slurmdbd.conf (mode 0600) next to slurm.conf. slurmctld's connection to slurmdbd authenticates
through munge's default socket whatever AuthInfo says, so /run/munge/munge.socket.2 is made a
link to the rig's socket for as long as the rig runs; a link or socket already there that is not
the rig's is left alone and the rig refuses to start (it would be another munge's).
"""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.rig.sshd import free_port

DAEMONS = ("mariadb-install-db", "mariadbd", "mariadb", "slurmdbd")
MUNGE_DEFAULT = Path("/run/munge/munge.socket.2")


def _tool(name):
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.path.exists(p)),
                                      None)


def missing():
    """The programs the accounting needs that this machine lacks (scripts/test installs them as root)."""
    return [name for name in DAEMONS if _tool(name) is None]


def config_lines(host, dbd_port):
    """slurm.conf's accounting lines (they replace accounting_storage/none)."""
    return ["AccountingStorageType=accounting_storage/slurmdbd", f"AccountingStorageHost={host}",
            f"AccountingStoragePort={dbd_port}", "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=1"]


class Accounting:
    def __init__(self, rig):
        self.rig = rig
        self.dbd_port, self.db_port = free_port(), free_port()
        self._link = False

    def link_munge(self, sock):
        if os.path.lexists(MUNGE_DEFAULT):
            if os.path.islink(MUNGE_DEFAULT) and os.readlink(MUNGE_DEFAULT) == str(sock):
                return
            raise RuntimeError(f"{MUNGE_DEFAULT} already exists (another munge): slurmdbd cannot be given the "
                               "rig's socket")
        MUNGE_DEFAULT.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(sock, MUNGE_DEFAULT)
        self._link = True

    def start(self, spawn, until):
        d = self.rig.dir
        data, sock = d / "mysql", d / "run" / "mysql.sock"
        subprocess.run([_tool("mariadb-install-db"), "--no-defaults", f"--datadir={data}", "--user=root",
                        "--auth-root-authentication-method=socket", "--skip-test-db"], check=True,
                       capture_output=True, timeout=60)
        spawn("mariadbd", [_tool("mariadbd"), "--no-defaults", "--user=root", f"--datadir={data}", f"--socket={sock}",
                           f"--pid-file={d}/run/mariadbd.pid", "--bind-address=127.0.0.1", f"--port={self.db_port}",
                           "--skip-name-resolve", "--innodb-buffer-pool-size=64M",
                           f"--log-error={d}/log/mariadbd.log"])
        until(lambda: sock.exists(), "mariadbd did not open its socket")
        subprocess.run([_tool("mariadb"), "--no-defaults", "-S", str(sock), "-uroot", "-e",
                        "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw'; "
                        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"], check=True, capture_output=True,
                       timeout=30)
        conf = self.rig.conf.parent / "slurmdbd.conf"
        conf.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={d}/munge/munge.sock", f"DbdHost={self.rig.host}",
            "DbdAddr=127.0.0.1", f"DbdPort={self.dbd_port}", "SlurmUser=root", f"PidFile={d}/run/slurmdbd.pid",
            f"LogFile={d}/log/slurmdbd.log", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={self.db_port}", "StorageUser=slurm", "StoragePass=slurmpw", "StorageLoc=slurm_acct_db",
        ]) + "\n")
        os.chmod(conf, 0o600)
        spawn("slurmdbd", [_tool("slurmdbd"), "-D"])
        until(lambda: _listening(self.dbd_port), "slurmdbd did not listen")

    def unlink_munge(self):
        if self._link and os.path.islink(MUNGE_DEFAULT):
            os.unlink(MUNGE_DEFAULT)
        self._link = False


def _listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        time.sleep(0.05)
        return False
