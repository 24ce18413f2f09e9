"""The keeper on an always-on host (`launch --keeper-host HOST`, issue 36), over real sshd boxes and
real torch on the CPU. The keeper host is one more loopback box with its own home, state dir and
PATH, where gpuops is importable (PYTHONPATH to this tree) and whose own ssh config reaches the
fleet and the vault host (the rig's, as a user's always-on host has its own keys): the run's keeper
lives there, not here; a box killed outright is recovered by it; `stop` sent here reaches it; it
going away is said, not taken for the run's end; a host without gpuops, with another version, or
that cannot reach a box is refused in one line before anything is launched."""

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from gpuops import __version__
from gpuops.jobs import runpolicy
from gpuops.keeper import record, start, view
from gpuops.keeper.remotevault import RemoteVault
from gpuops.onbox.host import procs
from gpuops.placement import request
from tests.conftest import ROOT
from tests.fixtures.fakegpu.boxes import SYSTEM_PATH
from tests.jobs.helpers import wait_for
from tests.keeper.test_keeper_boxes import LOST_AFTER_S, command, killed_and_moved, kinds

_N = iter(range(1, 1000))


def keeper_host(fleet, pythonpath=str(ROOT), python_flags=""):
    """A box of the rig to keep runs on: its alias and its state dir."""
    name = f"kh{next(_N)}"
    home, state, bin_dir = (fleet.base / f"{p}-{name}" for p in ("home", "state", "bin"))
    home.mkdir()
    bin_dir.mkdir()
    py = bin_dir / "python3"
    py.write_text(f"#!/bin/sh\nexec {sys.executable} {python_flags} \"$@\"\n")
    py.chmod(py.stat().st_mode | stat.S_IXUSR)
    env = {"HOME": str(home), "PATH": f"{bin_dir}:{SYSTEM_PATH}", "GPUOPS_STATE_DIR": str(state),
           "GPUOPS_SSH_CONFIG": str(fleet.rig.ssh_config), "OMP_NUM_THREADS": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    fleet.boxes[name] = fleet.rig.box(name, env=env)
    return name, state


def kill_keepers(state):
    for pid_file in (state / "keeper").glob("*/keeper.pid"):
        held = json.loads(pid_file.read_text())
        if procs.alive(held["pid"], held["start_ticks"]):
            os.kill(held["pid"], signal.SIGKILL)


def spec(fleet, vault_host, steps):
    policy = runpolicy.build(checkpoint_dir="ckpt", resume_arg="--resume {checkpoint}")
    return start.spec_of(command=command(steps=steps), fleet=str(fleet.file),
                         vault_dir=f"{vault_host}:{fleet.home(vault_host)}/vault", policy=policy, request=request(1),
                         lost_after_s=LOST_AFTER_S)


def ended(run, timeout):
    assert wait_for(lambda: view.kept(run)["phase"] in record.ENDED, timeout=timeout, every=2.0), \
        kinds(view.kept(run))
    return view.kept(run)


def test_the_keeper_lives_on_its_host_and_recovers_a_box_killed_outright(cli, fleet):
    v = fleet.host()
    kh, kh_state = keeper_host(fleet)
    a, b = fleet.box(2.0), fleet.box(3.0)
    try:
        doc = start.launch(spec(fleet, v, steps=20), keeper_host=kh)
        assert doc["ok"], doc["summary"]
        run = doc["data"]["job"]["job_id"]
        assert doc["data"]["keeper"]["host"] == kh and f"on {kh}" in doc["summary"]
        # its pid file there, none here: nothing of the run's keeping runs on this machine
        there = json.loads((kh_state / "keeper" / run / "keeper.pid").read_text())
        assert there["pid"] == doc["data"]["keeper"]["pid"] and procs.alive(there["pid"], there["start_ticks"])
        assert not (fleet.state / "keeper" / run / "keeper.pid").exists()
        assert record.read(run)["keeper_host"]["host"] == kh
        # the fleet was handed over: the keeper host's copy, 0600, with the boxes and their prices
        handed = kh_state / "keeper" / run / "fleet.toml"
        assert stat.S_IMODE(handed.stat().st_mode) == 0o600 and f'alias = "{b}"' in handed.read_text()
        now = view.status(view.kept(run))
        assert now["data"]["kept"]["keeper"]["alive"] is True and now["data"]["kept"]["keeper"]["host"] == kh
        kept = RemoteVault(v, str((fleet.home(v) / "vault").resolve()), run)
        assert wait_for(lambda: any(h["name"] != "checkpoint-5" for h in kept.held()), timeout=90, every=1.0)
        r = killed_and_moved(fleet, run, a, b, ended)
        assert "final step 20" in next(fleet.jobs(b).glob("*/log")).read_text()
        assert json.loads((kh_state / "fleet-state.json").read_text())  # the lost box marked where the keeper is
        assert record.read(run)["phase"] == record.FINISHED  # the copy here follows the keeper host's
        logs = cli("logs", run, "--tail", "2", env=fleet.env())  # to the box the keeper host moved it to
        assert logs.returncode == 0 and "final step 20" in logs.stdout, logs.stdout + logs.stderr
        assert f"run {run}: attempt 2 on {b}" in logs.stderr
    finally:
        kill_keepers(kh_state)


def long_run(fleet, v, kh, box):
    """A 400-step run kept from `kh`, started on `box` (the fleet's one box) and past step 3: its id and log."""
    doc = start.launch(spec(fleet, v, steps=400), keeper_host=kh)
    assert doc["ok"], doc["summary"]
    run = doc["data"]["job"]["job_id"]
    log = fleet.jobs(box) / run / "log"
    assert wait_for(lambda: log.exists() and "step 3 " in log.read_text(), timeout=90, every=0.5)
    return run, log


def test_the_keeper_host_out_of_reach_is_said_and_a_stop_sent_here_reaches_it(cli, fleet):
    v = fleet.host()
    kh, kh_state = keeper_host(fleet)
    a = fleet.box(2.0)
    try:
        run, log = long_run(fleet, v, kh, a)
        fleet.boxes[kh].stop()  # the keeper host goes away: its sshd and every connection
        away = view.status(view.kept(run))
        assert away["data"]["kept"]["keeper"]["alive"] is None and away["data"]["kept"]["phase"] == record.RUNNING
        assert f"its keeper on {kh} is out of reach" in away["summary"] and "the run goes on" in away["summary"]
        size = log.stat().st_size
        assert wait_for(lambda: log.stat().st_size > size, timeout=30, every=0.5)  # the run goes on on its box
        fleet.boxes[kh].start()
        dry = cli("stop", "--job", run, env=fleet.env())
        assert dry.returncode == 0 and "dry run" in dry.stdout, dry.stdout + dry.stderr
        assert not (kh_state / "keeper" / run / record.STOP).exists()
        r = cli("stop", "--job", run, "--yes", env=fleet.env())
        assert r.returncode == 0 and f"keeper host {kh}" in r.stdout, r.stdout + r.stderr
        assert (kh_state / "keeper" / run / record.STOP).exists()
        done = ended(run, 60)
        assert done["phase"] == record.STOPPED, done.get("why")
        assert len(done["attempts"]) == 1 and "relaunched" not in kinds(done)
        size = log.stat().st_size
        time.sleep(3)
        assert log.stat().st_size == size  # the run on its box is stopped, not retried
        w = cli("wait", "--job", run, "--timeout", "30", env=fleet.env())
        assert w.returncode == 0 and "STOPPED" in w.stdout, w.stdout + w.stderr
    finally:
        kill_keepers(kh_state)


def _launch(cli, fleet, vault_host, kh):
    return cli("launch", "--fleet", str(fleet.file), "--vault", f"{vault_host}:{fleet.home(vault_host)}/vault",
               "--keeper-host", kh, "--gpus", "1", "--checkpoint-dir", "ckpt", "--resume-arg=--resume {checkpoint}",
               "--cmd", command(steps=5), env=fleet.env())


def _refused(r, code, *words):
    assert r.returncode == code, r.stdout + r.stderr
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "nothing was launched" in line, line
    for w in words:
        assert w in line, line


def test_a_keeper_host_without_gpuops_or_with_another_version_is_refused_before_anything_starts(cli, fleet, tmp_path):
    v = fleet.host()
    a = fleet.box(1.0)
    bare, _ = keeper_host(fleet, pythonpath="", python_flags="-S")  # no site-packages: no gpuops importable
    _refused(_launch(cli, fleet, v, bare), 4, f"keeper host {bare}: no gpuops", __version__)
    other = tmp_path / "other" / "gpuops"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text('__version__ = "0.0.0-other"\n')
    old, _ = keeper_host(fleet, pythonpath=str(other.parent))
    _refused(_launch(cli, fleet, v, old), 5, f"keeper host {old} has gpuops 0.0.0-other")
    assert not fleet.jobs(a).exists() or not list(fleet.jobs(a).glob("*/meta.json"))


def test_a_keeper_host_that_cannot_reach_a_box_is_refused_naming_it(cli, fleet):
    v = fleet.host()
    a = fleet.box(1.0)
    fleet.rig.alias("gone-box")  # a closed port: no box answers there
    with open(fleet.file, "a") as f:
        f.write('[[host]]\nalias = "gone-box"\nusd_per_hour = 1.0\n\n')
    kh, _ = keeper_host(fleet)
    r = _launch(cli, fleet, v, kh)
    _refused(r, 5, f"keeper host {kh} cannot reach gone-box over SSH (gone-box: ")
    assert f"{a}:" not in r.stderr and f" {v}" not in r.stderr  # what it reaches is not named
    assert not fleet.jobs(a).exists() or not list(fleet.jobs(a).glob("*/meta.json"))
    local = cli("launch", "--fleet", str(fleet.file), "--vault", str(fleet.vault), "--keeper-host", kh, "--gpus", "1",
                "--checkpoint-dir", "ckpt", "--resume-arg=--resume {checkpoint}", "--cmd", "true", env=fleet.env())
    assert local.returncode == 2 and "--vault HOST:DIR" in local.stderr, local.stdout + local.stderr


def test_a_dead_keeper_on_its_host_is_restarted_detached_by_the_step_status_offers(cli, fleet):
    """The keeper on KH killed: status says so and offers `ssh KH PY -m gpuops.keeper.handover restart
    RUN`; that ssh returns at once (the keeper runs detached there, not on the ssh session), the
    keeper lives again and acts (a stop sent here ends the run), and a second restart is refused
    while it lives."""
    v = fleet.host()
    kh, kh_state = keeper_host(fleet)
    a = fleet.box(2.0)
    try:
        run, log = long_run(fleet, v, kh, a)
        kill_keepers(kh_state)
        dead = view.status(view.kept(run))
        assert dead["data"]["kept"]["keeper"]["alive"] is False and "keeper is not running" in dead["summary"]
        again = dead["next"][0]["argv"]
        assert again[:2] == ["ssh", kh] and again[-3:] == ["gpuops.keeper.handover", "restart", run], again
        ssh = ["ssh", "-F", str(fleet.rig.ssh_config), *again[1:]]
        began = time.monotonic()
        done = subprocess.run(ssh, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and json.loads(done.stdout)["pid"], done.stdout + done.stderr
        assert time.monotonic() - began < 30  # returned with the ssh session, the keeper left running there
        assert view.status(view.kept(run))["data"]["kept"]["keeper"]["alive"] is True
        twice = subprocess.run(ssh, capture_output=True, text=True, timeout=60)
        assert twice.returncode == 5 and "live keeper" in twice.stderr, twice.stdout + twice.stderr
        r = cli("stop", "--job", run, "--yes", env=fleet.env())
        assert r.returncode == 0, r.stdout + r.stderr
        assert ended(run, 60)["phase"] == record.STOPPED  # the restarted keeper looks after the run
    finally:
        kill_keepers(kh_state)


def test_a_stop_asked_while_the_keeper_is_handed_over_is_not_lost(fleet, monkeypatch):
    from gpuops.keeper import remotehost

    v = fleet.host()
    kh, kh_state = keeper_host(fleet)
    fleet.box(2.0)
    real = remotehost.KeeperHost.call

    def stop_meanwhile(self, verb, run_id, doc=None):
        if verb == "take":  # `gpuops stop` here after the hand-over's payload was made, before KH answers
            record.ask_stop(run_id, "gpuops stop")
        return real(self, verb, run_id, doc)

    monkeypatch.setattr(remotehost.KeeperHost, "call", stop_meanwhile)
    try:
        doc = start.launch(spec(fleet, v, steps=400), keeper_host=kh)
        assert doc["ok"], doc["summary"]
        run = doc["data"]["job"]["job_id"]
        assert (kh_state / "keeper" / run / record.STOP).exists()  # forwarded once KH had taken the run
        done = ended(run, 60)
        assert done["phase"] == record.STOPPED and len(done["attempts"]) == 1, done.get("why")
    finally:
        kill_keepers(kh_state)


@pytest.mark.anyio
async def test_an_agent_names_a_keeper_host_and_job_status_follows_it(fleet, monkeypatch):
    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from mcp import Client

    from gpuops.keeper import remotehost
    from gpuops.mcp import server

    v = fleet.host()
    kh, kh_state = keeper_host(fleet)
    a = fleet.box(1.0)
    monkeypatch.setenv("GPUOPS_MCP_ROOTS", str(fleet.base))
    monkeypatch.delenv("GPUOPS_MODE", raising=False)
    asked = {"fleet": str(fleet.file), "gpus": 1, "cmd": command(steps=400), "checkpoint_dir": "ckpt",
             "resume_arg": "--resume {checkpoint}", "vault": f"{v}:{fleet.home(v)}/vault"}
    try:
        async with Client(server.build(toolsets="all")) as client:
            here = await client.call_tool("fleet_launch", dict(asked, keeper_host="local"))
            assert here.is_error and "GPUOPS_MCP_LOCAL" in json.loads(here.content[0].text)["summary"]
            assert not fleet.jobs(a).exists() or not list(fleet.jobs(a).glob("*/meta.json"))  # nothing started
            launched = json.loads((await client.call_tool("fleet_launch", dict(asked, keeper_host=kh))).content[0].text)
            assert launched["ok"] and launched["data"]["keeper"]["host"] == kh, launched
            run = launched["data"]["job"]["job_id"]
            status = json.loads((await client.call_tool("job_status", {"host": a, "job": run})).content[0].text)
        kept = status["data"]["kept"]
        assert kept["keeper"]["host"] == kh and kept["keeper"]["alive"] is True, kept["keeper"]
        assert [x["box"] for x in kept["attempts"]] == [a]
        assert remotehost.ask_stop(record.read(run)) == f"keeper host {kh}"  # so the run ends here
        assert ended(run, 60)["phase"] == record.STOPPED
    finally:
        kill_keepers(kh_state)


def test_a_box_whose_disk_was_wiped_is_judged_by_lost_after_and_the_keeper_lives_on(fleet):
    """Any failed look counts as one (here the box answers that it knows no such run: a teardown
    deleted its disk): the keeper, which used to die of it, moves the run after --lost-after."""
    import shutil

    from gpuops.keeper import vault as vaultmod
    from tests.jobs.helpers import kill_everything
    from tests.keeper.test_keeper_boxes import launch

    a, b = fleet.box(2.0), fleet.box(3.0)
    run, first = launch(fleet, command(steps=30))
    assert first == a
    assert wait_for(lambda: vaultmod.Vault(str(fleet.vault), run).held(), timeout=90, every=0.5)
    kill_everything(fleet.jobs(a))
    shutil.rmtree(fleet.jobs(a))  # its sshd still answers; the run's records and processes are gone
    assert wait_for(lambda: record.read(run)["phase"] in record.ENDED, timeout=LOST_AFTER_S + 90, every=0.5), \
        kinds(record.read(run))
    r = record.read(run)
    assert r["phase"] == record.FINISHED and [x["box"] for x in r["attempts"]] == [a, b], r.get("why")
    assert r["lost"][a].startswith("unreachable for") and f"past --lost-after {LOST_AFTER_S:g}s" in r["lost"][a]
    assert "keeper-error" not in kinds(r)


def test_the_fleet_handed_over_reads_back_as_the_same_boxes(tmp_path):
    """What the keeper host receives is the boxes the run may use, each field intact: prices, labels,
    and a stop command with quotes, backslashes and a unicode character in it."""
    from gpuops import fleetfile
    from gpuops.keeper import remotehost

    here = tmp_path / "fleet.toml"
    here.write_text('[[host]]\nalias = "me@gpu-1.lan:2222"\nprofile = "vastai"\nusd_per_hour = 1.25\n'
                    'labels = { gpu = "h100", "odd key" = "a\\"b" }\n'
                    "stop = 'vastai stop instance 42 && echo \"done \\\\ ✓\"'\n\n"
                    '[[host]]\nalias = "spot-b"\n\n[fleet.train]\nhosts = ["spot-b"]\n')
    there = tmp_path / "handed.toml"
    there.write_text(remotehost.fleet_text({"fleet": str(here)}))
    assert fleetfile.load(there).host == fleetfile.load(here).host
    assert fleetfile.load(there).host[0].stop == 'vastai stop instance 42 && echo "done \\\\ ✓"'


@pytest.mark.parametrize("python", ["python3; rm -rf ~", "$(reboot)", "py`x`", "", "python3 -c 'x'"])
def test_a_python_command_the_keeper_host_names_must_be_plain_words(python):
    from gpuops import errors
    from gpuops.keeper import remotehost

    with pytest.raises(errors.Refused):
        remotehost.KeeperHost("kh", python)


@pytest.mark.parametrize("argv", [[], ["take"], ["check", "run-1"], ["show", "../x"], ["stop", "a/b"], ["nope", "r"],
                                  ["take", "r", "extra"], ["restart"], ["restart", "../x"]])
def test_the_hand_over_takes_only_its_verbs_and_a_plain_run_id(argv, capsys):
    from gpuops.keeper import handover

    assert handover.main(argv) == 2
    assert capsys.readouterr().err.startswith("usage:")
