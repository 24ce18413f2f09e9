"""SSH masters kept between gpuops calls (gpuops.remote.mux), against a real sshd: one handshake
for many calls, expiry, disconnect, a killed master, a re-provisioned box, a half-open link."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from gpuops import errors
from gpuops.remote import hostspec, mux
from gpuops.remote.targets import target_for
from gpuops.remote.base import GRACE_S
from gpuops.remote.wrap import KILL_AFTER_S
from tests.rig.sshd import keygen
from tests.conftest import kept_masters


def _logins(box) -> int:
    return sum(1 for line in box.log.read_text(errors="replace").splitlines() if "Accepted publickey" in line)


@pytest.fixture
def reuse(monkeypatch):
    with kept_masters(monkeypatch, "gr-") as runtime:
        yield runtime


def _call(spec, line="true", **kw):
    t = target_for(spec)
    try:
        return t.run(line, **kw)
    finally:
        t.close()


def _socket(box, identity=None):
    return mux.socket_path(mux.shared_dir(), hostspec.resolve(box.spec, identity), identity)


def _master_pid(path):
    out = subprocess.run(["ssh", "-o", f"ControlPath={path}", "-O", "check", "x"], capture_output=True, text=True)
    m = re.search(r"pid=(\d+)", out.stderr)
    return int(m.group(1)) if m else None


def test_many_calls_and_processes_pay_one_handshake(rig, reuse, cli):
    box = rig.box("reuse-many")
    before = _logins(box)
    for _ in range(3):
        assert _call(box.spec, "echo ok").stdout == b"ok\n"
    for _ in range(2):
        r = cli("status", "--host", box.spec, "--json", env=os.environ.copy())
        assert r.returncode == 0, r.stderr
    assert _logins(box) - before == 1, "every call after the first rides the kept master"
    assert _master_pid(_socket(box)), "the master outlives the calls"


def test_rsync_and_sftp_ride_the_same_master(rig, reuse, cli, tmp_path):
    box = rig.box("reuse-sync")
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("hello\n")
    _call(box.spec)
    before = _logins(box)
    for engine in ("rsync", "sftp"):
        r = cli("push", "--host", box.spec, "--src", str(src), "--dst", str(tmp_path / f"dst-{engine}"),
                "--engine", engine, "--json", env=os.environ.copy())
        assert r.returncode == 0, r.stdout[-1500:]
        assert json.loads(r.stdout)["data"]["engine"] == engine
    assert _logins(box) == before


def test_an_idle_master_goes_away_on_its_own(rig, reuse, monkeypatch):
    monkeypatch.setenv("GPUOPS_SSH_PERSIST", "1")
    box = rig.box("reuse-expiry")
    _call(box.spec)
    path = _socket(box)
    assert os.path.exists(path)
    deadline = time.monotonic() + 15
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(path), "ControlPersist ends an idle master"
    before = _logins(box)
    _call(box.spec)
    assert _logins(box) - before == 1


def test_disconnect_closes_one_box_or_all(rig, reuse, cli):
    one, two = rig.box("reuse-dc-one"), rig.box("reuse-dc-two")
    _call(one.spec)
    _call(two.spec)
    r = cli("disconnect", "--host", one.spec, "--json", env=os.environ.copy())
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["data"]["closed"] == [one.spec]
    assert not os.path.exists(_socket(one)) and os.path.exists(_socket(two))
    r = cli("disconnect", "--json", env=os.environ.copy())
    assert r.returncode == 0 and len(json.loads(r.stdout)["data"]["closed"]) == 1
    assert not mux.sockets(mux.shared_dir())
    before = _logins(one)
    _call(one.spec)
    assert _logins(one) - before == 1


def test_a_killed_master_is_replaced_by_the_next_call(rig, reuse):
    box = rig.box("reuse-killed")
    _call(box.spec)
    pid = _master_pid(_socket(box))
    os.kill(pid, signal.SIGKILL)
    before = _logins(box)
    assert _call(box.spec, "echo again").stdout == b"again\n"
    assert _logins(box) - before == 1 and _master_pid(_socket(box)) not in (None, pid)


def test_a_reprovisioned_box_behind_a_kept_master_is_refused(rig, reuse, tmp_path):
    """A reused master skips the host key check; that is sound only because a box that is
    re-provisioned drops the old connection, and the next call meets the changed key."""
    box = rig.box("reuse-reprovisioned")
    _call(box.spec)
    box.kill_session_children()
    box.stop()
    box.host_key = keygen(tmp_path / "new_host_key")
    box.start()
    with pytest.raises(errors.HostKeyChanged):
        _call(box.spec)


def test_a_half_open_link_fails_within_the_deadline_and_is_not_reused(rig, reuse):
    box = rig.box("reuse-half-open")
    _call(box.spec)
    # freeze the per-connection sshd children: the master's link stays open and silent
    pids = [int(p) for p in subprocess.run(["pgrep", "-P", str(box.proc.pid)], capture_output=True,
                                           text=True).stdout.split()]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(errors.TimedOut):
            _call(box.spec, timeout_s=1)
        assert time.monotonic() - started < 1 + KILL_AFTER_S + GRACE_S + 5
        before = _logins(box)
        assert _call(box.spec, "echo fresh", timeout_s=10).stdout == b"fresh\n"
        assert _logins(box) - before == 1, "the suspect master took no new session"
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def test_whom_a_master_talks_to_and_as_whom_decides_its_socket(tmp_path):
    base = hostspec.HostSpec(spec="box", hostname="10.0.0.5", user="root", port=22)
    names = {mux.socket_name(base), mux.socket_name(base, identity="~/.ssh/other"),
             mux.socket_name(hostspec.HostSpec(spec="box", hostname="10.0.0.5", user="ubuntu", port=22)),
             mux.socket_name(hostspec.HostSpec(spec="box", hostname="10.0.0.5", user="root", port=2222)),
             mux.socket_name(hostspec.HostSpec(spec="box", hostname="10.0.0.6", user="root", port=22)),
             mux.socket_name(base, environ={"GPUOPS_SSH_CONFIG": "/other/config"})}
    assert len(names) == 6
    assert mux.socket_name(base) == mux.socket_name(hostspec.HostSpec(spec="box", hostname="10.0.0.5", user="root"))


def test_a_socket_directory_that_is_not_provably_ours_turns_reuse_off(tmp_path):
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    mine = mux.shared_dir(env)
    assert mine and os.stat(mine).st_mode & 0o777 == 0o700
    os.chmod(mine, 0o755)
    assert mux.shared_dir(env) is None, "a directory others can read"
    os.rmdir(mine)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, mine)
    assert mux.shared_dir(env) is None, "a link planted where the directory belongs"


def test_a_socket_path_too_long_to_bind_turns_reuse_off(tmp_path):
    spec = hostspec.HostSpec(spec="box", hostname="10.0.0.5", user="root")
    assert mux.socket_path("/run/user/1000/gpuops-ssh-1000", spec)
    assert mux.socket_path(str(tmp_path / ("d" * 80)), spec) is None


@pytest.mark.parametrize("value,expected", [("", 60), ("0", 0), ("5", 5)])
def test_persist_seconds(value, expected):
    assert mux.persist_s({"GPUOPS_SSH_PERSIST": value}) == expected


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "99999999"])
def test_bad_persist_seconds_are_a_usage_error(value):
    with pytest.raises(errors.UsageError):
        mux.persist_s({"GPUOPS_SSH_PERSIST": value})
