"""The early SSH handshake: the program starts a master for --host before its imports, the verb's
target adopts it, a failed one reports like a direct connection, and an unused one is closed."""

import os
import subprocess
import sys

import pytest

from gpuops import errors
from gpuops.remote import target_for, warmup
from tests.rig.sshd import keygen


@pytest.fixture(autouse=True)
def _openssh(monkeypatch):
    monkeypatch.setenv("GPUOPS_TRANSPORT", "openssh")
    yield
    warmup._close_unused()


def _logins(box) -> int:
    return sum(1 for line in box.log.read_text(errors="replace").splitlines() if "Accepted publickey" in line)


def _ssh_processes(marker) -> str:
    return subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout


def test_flag_values_reads_both_spellings_and_the_last_wins():
    argv = ["preflight", "--host", "a,b", "--json", "--identity=~/.ssh/k", "--host=c"]
    assert warmup.flag_values(argv, "--host", "--identity") == {"--host": "c", "--identity": "~/.ssh/k"}
    assert warmup.flag_values(["preflight", "--host"], "--host") == {}


def test_the_cli_makes_one_connection_and_one_exec_channel_per_preflight(cli, plain_box):
    # Adopting the warmed master is what keeps this at one login: a target that ignored it would
    # log in a second time for its own call.
    logins, execs = _logins(plain_box), plain_box.exec_requests()
    r = cli("preflight", "--json", "--host", plain_box.spec)
    assert r.returncode in (0, 1), r.stderr
    assert _logins(plain_box) - logins == 1
    assert plain_box.exec_requests() - execs == 1


def test_the_warmed_target_is_adopted_once_and_shares_the_handshake(plain_box):
    warmup.start(plain_box.spec)
    logins = _logins(plain_box)
    t = target_for(plain_box.spec)
    try:
        assert warmup.take(plain_box.spec) is None, "a warmed target is handed out once"
        assert [t.run("echo $((6 * 7))").stdout for _ in range(3)] == [b"42\n"] * 3
        mux_dir = t._mux_dir
        assert mux_dir and os.listdir(mux_dir), "the calls went through the warmed master"
    finally:
        t.close()
    assert _logins(plain_box) - logins == 1
    assert not os.path.exists(mux_dir) and not _ssh_processes(mux_dir)


def test_warming_a_changed_host_key_box_refuses_it_like_a_direct_call(rig, tmp_path):
    box = rig.box("warm-rekeyed")
    t = target_for(box.spec)
    t.run("true")
    t.close()
    box.stop()
    box.host_key = keygen(tmp_path / "new_host_key")
    box.start()
    warmup.start(box.spec)
    with pytest.raises(errors.HostKeyChanged) as err:
        target_for(box.spec).run("true")
    assert "ssh-keygen -R" in err.value.message


def test_warming_an_unreachable_host_reports_it_once(rig):
    from tests.rig.sshd import free_port

    rig.alias("warm-nobody", port=free_port())
    warmup.start("warm-nobody")
    t = target_for("warm-nobody")
    with pytest.raises(errors.Unreachable) as err:
        t.run("true")
    assert "Connection refused" in err.value.message
    assert t._mux_dir is None


def test_a_warmed_master_nobody_adopts_is_closed_when_the_program_exits(plain_box):
    code = ("import sys; from gpuops.remote import warmup\n"
            "warmup.start(sys.argv[1]); t = warmup._waiting[(sys.argv[1], None)]\n"
            "t.run('true'); print(t._mux_dir)  # the master is up, and still nobody's\n")
    out = subprocess.run([sys.executable, "-c", code, plain_box.spec], capture_output=True, text=True,
                         env=os.environ.copy(), timeout=60)
    assert out.returncode == 0, out.stderr
    mux_dir = out.stdout.strip()
    assert mux_dir.startswith("/") and not os.path.exists(mux_dir)
    assert not _ssh_processes(mux_dir), "the background master outlived the program"


def test_closing_a_master_that_already_failed_is_quiet(rig):
    # Seen in CI: `gpuops triage --host box1 ...` stopped at a usage error, and closing the warmed
    # master for the unknown `box1` at exit printed the connection error as a traceback.
    warmup.start("no-such-alias.invalid")
    target = warmup._waiting[("no-such-alias.invalid", None)]
    target._master.wait(timeout=30)
    warmup._close_unused()
    assert not warmup._waiting and target._mux_dir is None
