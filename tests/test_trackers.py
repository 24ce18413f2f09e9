"""Will the run's curves reach anyone: W&B's key and mode (U35) and what TensorBoard reads (U39).

The rules run on fact documents; the facts come from the real probe on this machine, with a
netrc in a temporary HOME (the key never leaves the box) and a real process whose command line is
a TensorBoard server's, as pip's `tensorboard` console script shows it in /proc."""

import json
import os
import subprocess
import sys
import time

import pytest

from gpuops import checks
from gpuops.onbox.track import verdicts as T
from gpuops.onbox.track import trackers as onbox
from gpuops.remote.local import LocalTarget

KEY = "0123456789abcdef0123456789abcdef01234567"  # 40 hex characters, the shape of a W&B key


def wandb_facts(**kw):
    w = {"installed": True, "mode": None, "key": None, "host": "api.wandb.ai", "netrc": "/root/.netrc"}
    w.update(kw)
    return {"trackers": {"wandb": w, "tensorboard": {"pinned": None, "servers": []}}}


def logdir(path, events=0, exists=True):
    return {"path": path, "exists": exists, "events": events, "capped": False}


def tb_facts(pinned=None, *servers):
    return {"trackers": {"wandb": {"installed": False, "mode": None, "key": None, "host": "api.wandb.ai",
                                   "netrc": "/root/.netrc"},
                         "tensorboard": {"pinned": pinned, "servers": [{"pid": 4100 + i, "logdirs": dirs}
                                                                       for i, dirs in enumerate(servers)]}}}


@pytest.mark.parametrize("kw,severity,words", [
    ({}, "warn", "wandb is installed but the box has no W&B key"),
    ({"mode": "offline"}, "warn", "WANDB_MODE=offline and no W&B key on the box"),
    ({"mode": "disabled", "key": "netrc"}, "warn", "WANDB_MODE=disabled on the box"),
    ({"key": "netrc"}, "ok", "W&B key found (netrc) for api.wandb.ai"),
    ({"key": "WANDB_API_KEY", "mode": "offline"}, "ok", "curves appear only after `wandb sync`"),
])
def test_wandb_without_a_key_or_switched_off_warns_and_a_key_passes(kw, severity, words):
    [f] = T.wandb(wandb_facts(**kw), {})
    assert (f.id, f.severity) == ("tracker.wandb", severity) and words in f.title
    if severity == "warn":
        assert f.gotcha == "U35"
    if "key" not in kw:
        assert "--secret-env WANDB_API_KEY" in f.fix and "machine api.wandb.ai" in f.fix


def test_a_box_without_wandb_and_no_mode_says_nothing():
    assert T.wandb(wandb_facts(installed=False), {}) == []
    assert T.wandb({}, {}) == []


def test_tensorboard_reading_an_empty_dir_warns_and_names_where_the_events_are():
    facts = tb_facts(logdir("/root/tf-logs", 3), [logdir("/root/runs", 0)])
    [f] = T.tensorboard(facts, {})
    assert (f.id, f.severity, f.gotcha) == ("tb.logdir", "warn", "U39")
    assert f.title == ("TensorBoard (pid 4100) reads /root/runs, which holds no event files: its panel shows no runs; "
                       "the events are under /root/tf-logs")
    [f] = T.tensorboard(tb_facts(None, [logdir("/srv/tb", exists=False)]), {})
    assert f.severity == "warn" and "/srv/tb, which does not exist" in f.title


def test_tensorboard_reading_its_events_passes_and_an_empty_pinned_dir_with_no_server_is_a_note():
    [f] = T.tensorboard(tb_facts(logdir("/root/tf-logs", 2), [logdir("/root/tf-logs", 2)]), {})
    assert (f.severity, f.title) == ("ok", "TensorBoard reads /root/tf-logs (2 event files)")
    [f] = T.tensorboard(tb_facts(logdir("/root/tf-logs", 0)), {})
    assert f.severity == "info" and f.gotcha is None and "SummaryWriter(log_dir='/root/tf-logs/<run>')" in f.fix
    assert T.tensorboard(tb_facts(), {}) == []


def test_the_logdir_flags_tensorboard_takes():
    assert onbox.logdirs(["tensorboard", "--logdir", "runs", "--port", "6006"]) == ["runs"]
    assert onbox.logdirs(["tensorboard", "--logdir=/a/b"]) == ["/a/b"]
    assert onbox.logdirs(["tensorboard", "--logdir_spec", "base:/a,new:/b/c,/d"]) == ["/a", "/b/c", "/d"]
    assert onbox.logdirs(["tensorboard", "--logdir", "gs://bucket/runs"]) == []


def _netrc_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {KEY}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    pkg = tmp_path / "site" / "wandb"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")  # found by python3, as an installed wandb is; never imported
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    return home


def test_the_probe_finds_the_netrc_key_and_never_sends_it(tmp_path, monkeypatch):
    home = _netrc_home(tmp_path, monkeypatch)
    raw = LocalTarget().ship("probe", [], timeout_s=60).stdout
    assert KEY.encode() not in raw
    facts = json.loads(raw)
    assert facts["trackers"]["wandb"] == {"installed": True, "mode": None, "key": "netrc", "host": "api.wandb.ai",
                                          "netrc": str(home / ".netrc")}
    assert not [f for f in checks.evaluate(facts) if f.id == "tracker.wandb" and f.severity != "ok"]
    (home / ".netrc").write_text("machine example.com login u password p\n")
    monkeypatch.setenv("WANDB_MODE", "offline")
    facts = LocalTarget().run_onbox("probe", [], timeout_s=60)
    [f] = [f for f in checks.evaluate(facts) if f.id == "tracker.wandb"]
    assert f.severity == "warn" and f.title.startswith("WANDB_MODE=offline and no W&B key on the box")


def fake_tensorboard(tmp_path, logdir="runs", port="6007"):
    """A process that looks in /proc exactly like `tensorboard --logdir LOGDIR` started in tmp_path:
    pip's console script run by python3, its logdir (made empty) relative to its cwd."""
    script = tmp_path / "bin" / "tensorboard"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(120)\n")
    script.chmod(0o755)
    (tmp_path / logdir).mkdir()
    return subprocess.Popen([sys.executable, str(script), "--logdir", logdir, "--port", port], cwd=tmp_path)


@pytest.fixture
def tensorboard_server(tmp_path):
    proc = fake_tensorboard(tmp_path)
    deadline = time.time() + 10
    while time.time() < deadline and not any(s["pid"] == proc.pid for s in onbox.servers()):
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


def test_preflight_names_a_running_tensorboard_whose_logdir_is_empty_then_passes_once_it_has_events(
        tmp_path, tensorboard_server, cli):
    r = cli("preflight", "--host", "local", "--json")
    doc = json.loads(r.stdout)
    mine = [f for f in doc["findings"] if f["id"] == "tb.logdir" and f["evidence"].get("pid") == tensorboard_server.pid]
    assert [f["severity"] for f in mine] == ["warn"] and mine[0]["gotcha"] == "U39"
    assert mine[0]["evidence"]["logdir"] == str(tmp_path / "runs")
    run = tmp_path / "runs" / "exp1"
    run.mkdir()
    (run / f"events.out.tfevents.1790000000.box.{os.getpid()}.0").write_bytes(b"\0" * 24)
    [server] = [s for s in onbox.servers() if s["pid"] == tensorboard_server.pid]
    assert server["logdirs"] == [{"path": str(tmp_path / "runs"), "exists": True, "events": 1, "capped": False}]
    assert [f.severity for f in T.tensorboard({"trackers": {"tensorboard": {"pinned": None, "servers": [server]}}},
                                              {})] == ["ok"]


# ---- diagnose: what the run's own log says about W&B (gpuops.onbox.track.wandblines) ----------------

ONLINE = ("wandb: Currently logged in as: ada. Use `wandb login --relogin` to force relogin\n"
          "wandb: Tracking run with wandb version 0.21.1\n"
          "wandb: Run data is saved locally in /root/run/wandb/run-20261127_101500-x1y2z3\n"
          "wandb: Run `wandb offline` to turn off syncing.\n"
          "wandb: Syncing run brisk-sun-12\n"
          "wandb: \u2b50\ufe0f View project at https://wandb.ai/ada/proj\n"
          "wandb: \U0001f680 View run at https://wandb.ai/ada/proj/runs/x1y2z3\n")
OFFLINE = ("wandb: Tracking run with wandb version 0.21.1\n"
           "wandb: W&B syncing is set to `offline` in this directory. Run `wandb online` or set WANDB_MODE=online "
           "to enable cloud syncing.\n"
           "wandb: Run data is saved locally in /root/run/wandb/offline-run-20261127_101500-x1y2z3\n")


def test_the_syncing_line_passes_and_its_absence_after_wandbs_header_is_the_signal():
    from gpuops.onbox.track import wandblines as D

    found = D.wandb(ONLINE, "step 10 loss 0.5\n")
    assert (found["state"], found["run"], found["url"]) == ("syncing", "brisk-sun-12",
                                                            "https://wandb.ai/ada/proj/runs/x1y2z3")
    assert D.advice(found) == []
    offline = D.wandb(OFFLINE, "")
    assert (offline["state"], offline["dir"], offline["gotcha"]) == (
        "offline", "/root/run/wandb/offline-run-20261127_101500-x1y2z3", "U35")
    assert "wandb sync /root/run/wandb/offline-run-20261127_101500-x1y2z3" in D.advice(offline)[0]
    # click.style("wandb", fg="blue", bold=True), as a terminal that kept its colours wrote it
    silent = D.wandb("\x1b[34m\x1b[1mwandb\x1b[0m: Tracking run with wandb version 0.21.1\n", "Traceback ...\n")
    assert silent["state"] == "not-syncing" and "never printed 'Syncing run'" in D.advice(silent)[0]
    no_key = D.wandb("", "wandb.errors.errors.UsageError: No API key configured. Use `wandb login` to log in.\n")
    assert no_key["state"] == "no-key" and "--secret-env WANDB_API_KEY" in D.advice(no_key)[0]
    assert D.wandb("", "", {"WANDB_MODE": "disabled"})["state"] == "disabled"
    assert D.wandb("epoch 1 loss 0.3\n", "done\n") is None
