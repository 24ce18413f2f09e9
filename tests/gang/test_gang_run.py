"""A gang for real: torchrun (c10d rendezvous on 127.0.0.1, gloo on the CPU) across loopback sshd
"nodes", each node an ordinary gpuops job under its box's supervisor. One run trains to COMPLETED
and writes its checkpoint; in another a node's training process is SIGKILLed, torchrun's elastic
agent fails that node, the others follow, and gpuops names the node that went first."""

import json
import os
import re
import shutil
import signal
import time

import pytest

from gpuops import states
from gpuops.onbox.host import procs
from gpuops.ops import gangview
from tests.gang.conftest import DDP
from tests.jobs.helpers import meta_of, wait_for
from tests.rig.sshd import free_port

torch = pytest.importorskip("torch", reason="torch is the test extra's (CPU wheel)")


def _launch(cli, gang_rig, hosts, steps, tmp_path, *extra, env=None):
    ckpt = tmp_path / "ck.pt"
    boxes = ["--host", ",".join(hosts)] if hosts else []
    r = cli("launch", *boxes, "--torchrun", "--rdzv-port", str(free_port()),
            "--workdir", os.path.dirname(DDP), "--name", "ddp",
            "--cmd", f"ddp_train.py --steps {steps} --step-seconds 0.2 --checkpoint {ckpt}", *extra, "--json",
            env=env or gang_rig.env(), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    return json.loads(r.stdout), ckpt


def _until(gang_id, wanted, timeout=240):
    seen = []

    def reached():
        doc = gangview.status(gang_id)
        seen.append(doc["data"]["state"])
        return doc if doc["data"]["state"] in wanted else None

    doc = wait_for(reached, timeout=timeout, every=1.0)
    assert doc, f"gang {gang_id} never reached {wanted}; seen {seen[-5:]}"
    return doc, seen


@pytest.fixture(scope="module")
def three(gang_rig):
    return [gang_rig.box(f"gang-{n}").spec for n in ("a", "b", "c")]


@pytest.fixture(scope="module")
def completed(gang_rig, three, tmp_path_factory):
    """A gang of three that trained 5 steps, launched as a [fleet.NAME] group of the fleet file (its
    boxes in the group's order, not the file's): its launch envelope and checkpoint path."""
    from tests.conftest import gpuops

    config = tmp_path_factory.mktemp("config")
    (config / "gpuops").mkdir()
    (config / "gpuops" / "fleet.toml").write_text(
        "".join(f'[[host]]\nalias = "{alias}"\n\n' for alias in reversed(three))
        + "[fleet.trio]\nhosts = [%s]\n" % ", ".join(f'"{alias}"' for alias in three))
    doc, ckpt = _launch(gpuops, gang_rig, None, 5, tmp_path_factory.mktemp("completed"), "--fleet", "trio",
                        env={**gang_rig.env(), "XDG_CONFIG_HOME": str(config)})
    _until(doc["data"]["gang"]["gang_id"], states.TERMINAL)
    return doc, ckpt


def test_a_gang_of_three_trains_to_completed_and_writes_its_checkpoint(cli, gang_rig, three, completed):
    doc, ckpt = completed
    gang = doc["data"]["gang"]
    gang_id = gang["gang_id"]
    assert doc["summary"].startswith(f"started gang {gang_id}: 3 nodes x 1 processes (world size 3)")
    assert [n["host"] for n in gang["nodes"]] == three and all(n["job_id"] for n in gang["nodes"])
    assert doc["data"]["preflight"]["multi_host"] is False  # one machine: loopback is the right interface
    assert {n["interface"] for n in gang["nodes"]} == {"lo"}
    for node in gang["nodes"]:  # each node is an ordinary job, labelled with its gang and index
        meta = meta_of(gang_rig.jobs(node["host"]), node["job_id"])
        assert meta["labels"] == {"gang": gang_id, "gang_node": str(node["index"]), "gang_nodes": "3"}
        assert meta["env"]["GLOO_SOCKET_IFNAME"] == "lo" and "--rdzv-id" in meta["command"]

    done, _ = _until(gang_id, states.TERMINAL)
    assert done["data"]["state"] == states.COMPLETED, done["summary"]
    saved = torch.load(ckpt, weights_only=True)
    assert saved["steps"] == 5 and saved["world"] == 3

    r = cli("status", "--gang", gang_id, env=gang_rig.env())
    assert r.returncode == 0 and f"{gang_id}: COMPLETED" in r.stdout
    # wait: an ended gang answers at once; a state it can no longer reach is exit 1, not a timeout
    r = cli("wait", "--gang", gang_id, "--timeout", "60", "--json", env=gang_rig.env())
    waited = json.loads(r.stdout)
    assert r.returncode == 0 and waited["data"]["reached"] and waited["data"]["state"] == states.COMPLETED
    assert waited["data"]["waited_s"] < 30 and len(waited["data"]["nodes"]) == 3
    r = cli("wait", "--gang", gang_id, "--until", "RUNNING", "--timeout", "60", "--json", env=gang_rig.env())
    waited = json.loads(r.stdout)
    assert r.returncode == 1 and waited["data"]["returned"] == "ended" and not waited["data"]["timed_out"]
    assert waited["summary"].endswith("RUNNING can no longer be reached"), waited["summary"]
    r = cli("wait", "--gang", gang_id, "--host", "x", env=gang_rig.env())
    assert r.returncode == 2 and "leave out --host and --job" in r.stderr
    r = cli("logs", "--gang", gang_id, "--json", env=gang_rig.env())
    assert r.returncode == 0, r.stdout + r.stderr
    logs = json.loads(r.stdout)["data"]
    lines = logs["text"].splitlines()
    for node in gang["nodes"]:
        prefix = f"[{node['index']}:{node['host']}] "
        mine = [line for line in lines if line.startswith(prefix)]
        assert any("step 5 loss" in line for line in mine), lines
    assert sum(1 for line in lines if "saved " in line) == 1
    # the cursors go on where the page ended: nothing new after a completed run
    r = cli("logs", "--gang", gang_id, "--cursors", logs["cursors"], "--json", env=gang_rig.env())
    again = json.loads(r.stdout)["data"]
    assert r.returncode == 0 and again["text"] == "" and again["cursors"] == logs["cursors"]
    # following a gang whose nodes have all ended prints every node's lines and ends by itself
    r = cli("logs", "--gang", gang_id, "--follow", "--timeout", "60", env=gang_rig.env())
    assert r.returncode == 0, r.stderr
    assert {line.split("]")[0] + "]" for line in r.stdout.splitlines()} == {
        f"[{n['index']}:{n['host']}]" for n in gang["nodes"]}
    assert r.stderr.startswith(f"gpuops: {gang_id}: 3 node log(s); cursors ")


@pytest.mark.anyio
async def test_an_agent_reads_the_gang(completed):
    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from mcp import Client

    from gpuops.mcp import server

    gang_id = completed[0]["data"]["gang"]["gang_id"]
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as client:
        status = (await client.call_tool("gang_status", {"gang": gang_id})).structured_content
        page = (await client.call_tool("gang_logs", {"gang": gang_id, "tail": 2})).structured_content
        stop = (await client.call_tool("gang_stop", {"gang": gang_id})).structured_content
        waited = (await client.call_tool("gang_wait", {"gang": gang_id, "timeout_s": 10})).structured_content
    assert status["ok"] and status["data"]["state"] == states.COMPLETED
    assert [line[:3] for line in page["data"]["text"].splitlines()] == ["[0:", "[0:", "[1:", "[1:", "[2:", "[2:"]
    assert stop["ok"] and stop["summary"] == f"nothing to stop: no process of gang {gang_id} is alive"
    assert waited["ok"] and waited["data"]["reached"] and waited["data"]["state"] == states.COMPLETED


def _worker_of(jobs_dir, job_id):
    """The training process torchrun's agent started for a node's job (a descendant of its leader)."""
    meta = meta_of(jobs_dir, job_id)
    for pid in procs.descendants(meta["pid"]):
        cmd = procs.cmdline(pid) or ""
        if "ddp_train.py" in cmd and "torch.distributed.run" not in cmd:
            return pid
    return None


def test_a_killed_node_fails_the_gang_and_diagnose_names_it_then_retry_and_stop(cli, gang_rig, three, tmp_path):
    hosts = three[:2]
    doc, _ = _launch(cli, gang_rig, hosts, 1000, tmp_path)
    gang_id = doc["data"]["gang"]["gang_id"]
    victim = doc["data"]["gang"]["nodes"][1]
    _until(gang_id, (states.RUNNING,))
    worker = wait_for(lambda: _worker_of(gang_rig.jobs(victim["host"]), victim["job_id"]), timeout=60)
    assert worker, "node 1's training process never appeared"
    wait_for(lambda: b"step 3 " in (gang_rig.jobs(victim["host"]) / victim["job_id"] / "log").read_bytes(), 120)
    os.kill(worker, signal.SIGKILL)

    done, seen = _until(gang_id, states.TERMINAL, timeout=120)
    data = done["data"]
    assert data["state"] == states.FAILED and data["first_failed"] == 1, done["summary"]
    assert done["summary"].startswith(f"{gang_id}: FAILED: node 1 ({victim['host']}) FAILED (exit 1) first; then "
                                      f"node 0 ({hosts[0]}) FAILED"), done["summary"]
    assert done["next"][0]["argv"] == ["gpuops", "diagnose", "--gang", gang_id]

    r = cli("diagnose", "--gang", gang_id, "--json", env=gang_rig.env())
    assert r.returncode == 1, r.stdout + r.stderr
    diag = json.loads(r.stdout)
    assert diag["data"]["first_failed"] == {"index": 1, "host": victim["host"], "job_id": victim["job_id"]}
    assert diag["summary"].startswith(f"{gang_id}: node 1 ({victim['host']}) failed first; ")
    assert "SIGKILL" in json.dumps(diag["data"]["diagnose"]["triage"]), diag["data"]["diagnose"]["triage"]

    # retry: the same gang again (a new id, its parent named); then a dry-run stop, and the real one
    r = cli("retry", "--gang", gang_id, "--json", env=gang_rig.env(), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    child = json.loads(r.stdout)["data"]["gang"]
    assert child["parent_gang_id"] == gang_id and child["gang_id"] != gang_id
    _until(child["gang_id"], (states.RUNNING,))
    r = cli("wait", "--gang", child["gang_id"], "--timeout", "1", "--json", env=gang_rig.env())
    waited = json.loads(r.stdout)
    assert r.returncode == 6 and waited["data"]["timed_out"] and waited["data"]["state"] == states.RUNNING, r.stdout
    assert waited["next"][0]["argv"] == ["gpuops", "wait", "--gang", child["gang_id"], "--until", "terminal"]
    for node in child["nodes"]:  # RUNNING is the agent; the plan is shown once training runs too
        assert wait_for(lambda: _worker_of(gang_rig.jobs(node["host"]), node["job_id"]), timeout=120)
    r = cli("stop", "--gang", child["gang_id"], "--yes", "--plan", "0123456789abcdef-9999999999", "--json",
            env=gang_rig.env())
    assert r.returncode == 5 and "no longer matches" in json.loads(r.stdout)["summary"]
    # The dry run's plan applied at once: a training process that starts a lasting child in between
    # (a new epoch's loader) changes the live set, which the plan rightly refuses.
    r = cli("stop", "--gang", child["gang_id"], "--json", env=gang_rig.env())
    plan = json.loads(r.stdout)
    assert r.returncode == 5 and plan["data"]["dry_run"] is True, r.stdout
    assert {n["index"] for n in plan["data"]["nodes"] if n["targets"]} == {0, 1}
    assert _until(child["gang_id"], (states.RUNNING,))[0]  # a dry run signals nothing
    plan_id = plan["data"]["plan"]["plan_id"]
    for _ in range(3):  # a loader that starts between plan and apply is a new plan, which the refusal names
        r = cli("stop", "--gang", child["gang_id"], "--grace", "5", "--yes", "--plan", plan_id, "--json",
                env=gang_rig.env())
        if r.returncode != 5:
            break
        plan_id = re.search(r"new plan (\S+)", json.loads(r.stdout)["summary"]).group(1)
    assert r.returncode == 0, r.stdout + r.stderr
    stopped, _ = _until(child["gang_id"], states.TERMINAL, timeout=60)
    assert stopped["data"]["state"] in (states.KILLED, states.FAILED), stopped["summary"]
    assert all(n["state"] in states.TERMINAL for n in stopped["data"]["nodes"])
    time.sleep(0.5)
    assert all(_worker_of(gang_rig.jobs(n["host"]), n["job_id"]) is None for n in child["nodes"])


def test_a_gang_launch_through_armed_helpers_is_judged_as_over_exec_channels(cli, gang_rig, tmp_path, monkeypatch):
    """The resident helper once ran every worker as `python3 -S`: a gang's preflight found no torch
    in the box's site-packages and refused every launch with "cannot import torch" once a master had
    armed a helper, while the same launch ran with GPUOPS_RESIDENT=0."""
    import tempfile

    from gpuops.ops import gang
    from gpuops.remote import hostspec, mux, resident
    from gpuops.remote.targets import target_for
    from tests.conftest import kept_masters

    runtime = tempfile.mkdtemp(prefix="gg-box-")  # the boxes' helpers leave with it
    boxes = [gang_rig.box(f"gang-site-{n}", XDG_RUNTIME_DIR=runtime) for n in ("a", "b")]
    hosts = [b.spec for b in boxes]

    def verdict():
        pre = gang.preflight(hosts, nproc_per_node=1, port=free_port(), rdzv_host="127.0.0.1")
        return pre["ok"], sorted((f.id, f.severity, f.title if f.severity != "ok" else "") for f in pre["findings"])

    with kept_masters(monkeypatch, "gg-"):
        monkeypatch.setenv("GPUOPS_RESIDENT", "0")
        over_exec_channels = verdict()
        monkeypatch.delenv("GPUOPS_RESIDENT")
        for host in hosts * 2:  # a master's second shipped call arms its helper
            t = target_for(host)
            t.run_onbox("manifest", stdin=json.dumps({"root": "/", "paths": []}).encode())
            t.close()
        for host in hosts:
            master = mux.socket_path(mux.shared_dir(), hostspec.resolve(host), None)
            assert wait_for(lambda: resident.forward_for(master), timeout=15), f"{host}: no helper was armed"
        before = [b.exec_requests() for b in boxes]
        through_helpers = verdict()
        assert [b.exec_requests() for b in boxes] == before, "every node's preflight rode its helper"
        assert over_exec_channels[0] is True, over_exec_channels
        assert through_helpers == over_exec_channels

        doc, _ = _launch(cli, gang_rig, hosts, 1, tmp_path, env=gang_rig.env())
        assert doc["ok"], doc["summary"]
        done, _ = _until(doc["data"]["gang"]["gang_id"], states.TERMINAL)
        assert done["data"]["state"] == states.COMPLETED, done["summary"]
    shutil.rmtree(runtime, ignore_errors=True)


def test_a_wrong_script_path_is_named_by_diagnose_in_the_nodes_own_words(cli, gang_rig, three, tmp_path):
    """Issue 27: `diagnose --gang` of a torchrun whose script path was wrong never showed the node's
    "can't open file ... No such file or directory" line, and its advice was the generic one."""
    r = cli("launch", "--host", ",".join(three[:2]), "--torchrun", "--rdzv-port", str(free_port()),
            "--workdir", os.path.dirname(DDP), "--name", "ddp-typo", "--cmd", "ddp_trian.py --steps 5", "--json",
            env=gang_rig.env(), timeout=300)
    gang_id = json.loads(r.stdout)["data"]["gang"]["gang_id"]
    _until(gang_id, states.TERMINAL, timeout=120)
    r = cli("diagnose", "--gang", gang_id, "--json", env=gang_rig.env())
    diag = json.loads(r.stdout)
    said = diag["data"]["error_line"]
    assert "can't open file" in said and "ddp_trian.py" in said and said in diag["summary"], diag["summary"]
    assert diag["data"]["diagnose"]["triage"]["primary"] == "launch-fail"
    assert any("push the code" in a for a in diag["advice"]), diag["advice"]
