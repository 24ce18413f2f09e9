"""The early SSH handshake: the program starts a master for --host before its imports, the verb's
target adopts it, a failed one reports like a direct connection, and an unused one is closed."""

import inspect
import json
import os
import subprocess
import sys

import pytest
from invoke.exceptions import ParseError
from invoke.parser import Parser

from gpuops import errors
from gpuops.cli.program import ns
from gpuops.cli.switches import SWITCHES, connect_flags
from gpuops.remote import warmup
from gpuops.remote.targets import target_for
from tests.jobs.helpers import wait_for
from tests.rig.sshd import keygen


@pytest.fixture(autouse=True)
def _openssh(monkeypatch, fresh_logins):
    monkeypatch.setenv("GPUOPS_TRANSPORT", "openssh")
    yield
    warmup._close_unused()


def _logins(box) -> int:
    return sum(1 for line in box.log.read_text(errors="replace").splitlines() if "Accepted publickey" in line)


def _ssh_processes(marker) -> str:
    return subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout


def _connections(box) -> int:
    return box.log.read_text(errors="replace").count("Connection from")


def _invoke_reads(argv):
    """(host, identity) as Invoke's own parser gives them to the verb; None when it refuses argv."""
    try:
        result = Parser(contexts=ns.to_contexts()).parse_argv(argv)
    except ParseError:
        return None
    args = result[0].args
    return tuple(args[k].raw_value if k in args else None for k in ("host", "identity"))


def test_connect_flags_reads_both_spellings():
    argv = ["preflight", "--host", "a,b", "--json", "--identity=~/.ssh/k"]
    assert connect_flags(argv) == ("a,b", "~/.ssh/k")
    assert connect_flags(["preflight", "--host=a=b"]) == ("a=b", None)
    assert connect_flags(["push", "--delete", "--yes", "--host", "box", "--exclude", "*.ckpt"]) == ("box", None)
    assert connect_flags(["logs", "--host", "box", "--follow", "--job", "j"]) == ("box", None)
    assert connect_flags(["logs", "-j", "j", "-f", "--host", "box"]) == ("box", None)
    assert connect_flags(["logs", "--job", "-f", "--host", "box"]) == (None, None)  # "-f" may be a job name


# Found in review: the warm-up read `--host=` from any word, so this also logged into `evil`
# (Invoke gives `--host=evil` to --name as its value).
HIDDEN = [
    ["launch", "--host", "box", "--name", "--host=evil", "--cmd", "true"],
    ["launch", "--name", "--host=evil", "--cmd", "true"],
    ["status", "--host", "box", "--job", "--host=evil"],
    ["push", "--host", "box", "--exclude", "--host=evil", "--src", ".", "--dst", "d"],
    ["retry", "--host", "box", "--job", "j", "--resume-arg", "--host=evil"],
    ["launch", "--host", "box", "--cmd", "--identity=/tmp/evil-key"],
]


@pytest.mark.parametrize("argv", HIDDEN)
def test_a_host_inside_another_flags_value_is_not_warmed(argv):
    host, identity = connect_flags(argv)
    assert host in (None, "box") and identity is None
    assert (host, identity) == _invoke_reads(argv)


# Nothing the warm-up cannot read exactly as Invoke will: no head start, and never a wrong host.
AMBIGUOUS = [
    ["launch", "--name", "--host", "evil", "--cmd", "true"],  # Invoke refuses: --name got no value
    ["launch", "--host", "box", "--name"],
    ["status", "--host", "box", "stray"],
    ["preflight", "--host", "a", "--host=b"],  # Invoke refuses a second --host
    ["status", "--host", "box", "preflight", "--host", "evil"],  # a second task
    ["status", "--json=yes", "--host", "evil"],
    ["status", "--host", "box", "--help"],
    ["--debug", "status", "--host", "box"],
    ["gotcha", "--host", "evil"],  # no --host to connect to
    ["teardown-check", "--host", "box"],  # its --host only names the box in the pull index
    ["status", "--job", "--", "--host", "evil"],
    [],
]


@pytest.mark.parametrize("argv", AMBIGUOUS)
def test_argv_the_warm_up_cannot_read_like_invoke_warms_nothing(argv):
    assert connect_flags(argv) == (None, None)


@pytest.mark.parametrize("argv", [
    ["preflight", "--host", "a", "--json", "--path", "/x", "--path=/y", "--timeout", "5"],
    ["push", "--host=box", "--src", "--delete", "--dst", "d", "--yes", "--no-budget", "--identity", "k"],
    ["status", "--label", "--host", "--job", "j"],
    ["retry", "--host", "box", "--resume-arg", "--resume last.pt"],
    ["verify", "--include-git", "--rehash", "--host", "box", "--local", ".", "--remote", "r"],
] + HIDDEN + AMBIGUOUS)
def test_the_warm_up_never_names_a_host_invoke_would_not(argv):
    host, identity = connect_flags(argv)
    if host is not None:
        assert (host, identity) == _invoke_reads(argv)


def test_the_boolean_flags_the_warm_up_knows_are_every_tasks_own():
    # The warm-up runs before Invoke and the tasks are imported, so it keeps its own table; a new
    # boolean flag left out of it would make it read the next word as that flag's value.
    expected = {}
    for name in ns.task_names:
        params = list(inspect.signature(ns[name].body).parameters.values())[1:]
        if name not in ("teardown-check", "disconnect") and any(p.name == "host" for p in params):
            expected[name] = {"--" + p.name.replace("_", "-") for p in params if isinstance(p.default, bool)}
        assert not any(p.default is True for p in params), f"{name}: Invoke would add a --no- flag"
    assert {k: set(v) for k, v in SWITCHES.items()} == expected


def test_a_host_hidden_in_a_value_gets_no_connection(cli, rig, plain_box, tmp_path):
    evil = rig.box("warm-evil")
    assert wait_for(lambda: _connections(evil) == 1, timeout=5)  # the rig's own probe that sshd is up
    before = _connections(evil)
    r = cli("launch", "--host", plain_box.spec, "--jobs-dir", str(tmp_path / "jobs"), "--name",
            f"--host={evil.spec}", "--cmd", "true", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["data"]["job"]["name"] == f"--host={evil.spec}"
    assert _connections(evil) == before, "the warm-up connected to a host that was a job's name"


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


def _events_of(code, *argv):
    """The audit events (process starts, gpuops imports) a fresh interpreter records running `code`."""
    probe = ("import sys\n"
             "seen = []\n"
             "def hook(event, args):\n"
             "    if event in ('os.posix_spawn', 'subprocess.Popen'):\n"
             "        seen.append('spawn ' + ' '.join(map(str, args[1][:2])))\n"
             "    elif event == 'import' and args[0].startswith(('gpuops.remote', 'subprocess')):\n"
             "        seen.append('import ' + args[0])\n"
             "sys.addaudithook(hook)\n" + code + "\nprint('\\n'.join(seen))\n")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=os.environ.copy(),
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_ssh_is_asked_for_the_hosts_settings_before_the_transport_loads(plain_box):
    events = _events_of("from gpuops.remote import warmup; warmup.start(sys.argv[1]); warmup._close_unused()",
                        plain_box.spec)
    asked = events.index("spawn ssh -G")
    assert asked < events.index("import gpuops.remote.openssh"), events
    assert events.count("spawn ssh -G") == 1, "the warm-up's answer is the one the target uses"


def test_a_call_on_a_kept_master_and_helper_loads_no_process_machinery(rig, cli, monkeypatch):
    # subprocess (with shutil and tempfile) cost a call riding the helper ~10 ms of its start,
    # and such a call starts no process but `ssh -G`, which needs none of them.
    from tests.conftest import kept_masters

    box = rig.box("warm-lean")
    with kept_masters(monkeypatch, "gw-"):
        for _ in range(2):
            assert cli("preflight", "--host", box.spec, "--json", env=os.environ.copy()).returncode in (0, 1)
        from gpuops.remote import hostspec, mux, resident

        master = mux.socket_path(mux.shared_dir(), hostspec.resolve(box.spec), None)
        wait_for(lambda: resident.forward_for(master), timeout=20)
        before = box.exec_requests()
        events = _events_of("from gpuops.cli import main\nsys.argv = ['gpuops', 'preflight', '--host', sys.argv[1],"
                            " '--json']\ntry:\n    main()\nexcept SystemExit:\n    pass", box.spec)
        assert box.exec_requests() == before, "the call rode the helper"
        assert "import subprocess" not in events, events
        assert [e for e in events if e.startswith("spawn")] == ["spawn ssh -G"], events
