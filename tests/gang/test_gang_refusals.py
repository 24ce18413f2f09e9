"""A gang refused before anything starts, on real sshd boxes: nodes that disagree on torch (with
the table), a busy rendezvous port on the head (with its holder's pid), code that differs, a
rendezvous the others cannot reach, one box under two names (the same host key), a node that
cannot be asked, and mistakes made on the command line."""

import io
import json
import os
import socket
import subprocess
import sys

import pytest
from rich.console import Console

from gpuops.ops import gang
from gpuops.render import gang as render_gang
from tests.gang.conftest import DDP
from tests.rig.sshd import free_port

OLD_TORCH = os.path.join(os.path.dirname(DDP), "oldtorch")
CLOSED_EPHEMERAL = os.path.join(os.path.dirname(DDP), "closed-ephemeral")


@pytest.fixture(scope="module")
def boxes(gang_rig):
    a = gang_rig.box("gr-a")
    made = {"a": a.spec, "b": gang_rig.box("gr-b").spec, "old": gang_rig.box("gr-old", PYTHONPATH=OLD_TORCH).spec,
            "walled": gang_rig.box("gr-walled", PYTHONPATH=CLOSED_EPHEMERAL).spec}
    gang_rig.rig.box("gr-twin", host_key=a.host_key, env={"PATH": f"{gang_rig.bin}:/usr/bin:/bin"})
    gang_rig.rig.alias("gr-down")
    made.update(twin="gr-twin", down="gr-down")
    return made


def _launch(cli, gang_rig, hosts, *extra):
    return cli("launch", "--host", ",".join(hosts), "--torchrun", "--rdzv-port", str(free_port()),
               "--cmd", "train.py --steps 1", *extra, env=gang_rig.env(), timeout=300)


def _nothing_started(gang_rig, *names):
    return all(not gang_rig.jobs(n).exists() or not any(gang_rig.jobs(n).iterdir()) for n in names)


def test_nodes_that_disagree_on_torch_are_refused_with_the_table(cli, gang_rig, boxes):
    r = _launch(cli, gang_rig, [boxes["a"], boxes["old"]])
    assert r.returncode == 5, r.stdout + r.stderr
    assert "gang refused before launch: the nodes run different torch builds" in r.stdout
    table = r.stdout[r.stdout.index("what each node would run"):]
    assert "gr-a" in table and "2.13.0" in table and "gr-old" in table and "2.12.0+cpu" in table
    assert _nothing_started(gang_rig, "gr-a", "gr-old")
    doc = json.loads(_launch(cli, gang_rig, [boxes["a"], boxes["old"]], "--json").stdout)
    finding = next(f for f in doc["findings"] if f["id"] == "gang.torch-mismatch")
    assert [row["torch"] for row in finding["evidence"]["table"]] == [__import__("torch").__version__, "2.12.0+cpu"]
    assert doc["data"]["refused"] == "refused" and "gang" not in doc["data"]


def test_a_busy_port_on_the_head_is_refused_with_its_holders_pid(cli, gang_rig, boxes):
    port = free_port()
    holder = subprocess.Popen([sys.executable, "-c", "import socket,sys,time; s=socket.socket(); "
                               f"s.bind(('0.0.0.0', {port})); s.listen(); print('up', flush=True); time.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        r = cli("launch", "--host", f"{boxes['a']},{boxes['b']}", "--torchrun", "--rdzv-port", str(port),
                "--cmd", "train.py", "--json", env=gang_rig.env(), timeout=300)
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 5, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["summary"].startswith(f"gang refused before launch: port {port} is busy on the head {boxes['a']}: "
                                     f"held by pid {holder.pid} (python")
    busy = next(f for f in doc["findings"] if f["id"] == "gang.port-busy")
    assert busy["fix"].startswith(f"kill {holder.pid}") and f"--rdzv-port {port + 1}" in busy["fix"]
    assert _nothing_started(gang_rig, "gr-a", "gr-b")


def test_code_that_differs_from_the_heads_is_refused_naming_the_files(cli, gang_rig, boxes):
    for name, body in (("gr-a", "print('v2')\n"), ("gr-b", "print('v1')\n")):
        code = gang_rig.base / f"home-{name}" / "code"
        code.mkdir(exist_ok=True)
        (code / "train.py").write_text(body)
        (code / "same.py").write_text("x = 1\n")
    r = _launch(cli, gang_rig, [boxes["a"], boxes["b"]], "--code", "~/code", "--json")
    assert r.returncode == 5, r.stdout + r.stderr
    differs = next(f for f in json.loads(r.stdout)["findings"] if f["id"] == "gang.code-differs")
    assert differs["evidence"]["paths"] == ["train.py"] and differs["gotcha"] == "U42"
    (gang_rig.base / "home-gr-b" / "code" / "train.py").write_text("print('v2')\n")
    verdict = gang.preflight([boxes["a"], boxes["b"]], nproc_per_node=1, port=free_port(), rdzv_host="127.0.0.1",
                             code="~/code", window_s=5)
    assert verdict["ok"], [f.title for f in verdict["findings"]]


def test_a_rendezvous_the_other_nodes_cannot_reach(gang_rig, boxes):
    # 198.51.100.1 is TEST-NET-2: nothing answers there, whatever the route.
    verdict = gang.preflight([boxes["a"], boxes["b"]], nproc_per_node=1, port=free_port(), rdzv_host="198.51.100.1",
                             window_s=2)
    assert not verdict["ok"]
    unreachable = next(f for f in verdict["findings"] if f.id == "gang.unreachable-rendezvous")
    assert unreachable.title.startswith(f"node 1 ({boxes['b']}) cannot reach 198.51.100.1:")
    assert "--rdzv-host ADDR" in unreachable.fix


def test_a_box_whose_ephemeral_ports_are_closed_passes_the_rendezvous_and_is_refused_per_pair(cli, gang_rig, boxes):
    # Seed 004's "firewall blocking communication": the rendezvous port answers, NCCL's and Gloo's
    # ephemeral listeners on gr-walled do not. Every pair is tried over sshd, each reported.
    hosts = [boxes["a"], boxes["b"], boxes["walled"]]
    r = _launch(cli, gang_rig, hosts, "--json")
    assert r.returncode == 5, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    pairs = {(p["from"], p["to"]): p for p in doc["data"]["preflight"]["dataplane"]}
    assert sorted(pairs) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert [k for k, p in sorted(pairs.items()) if not p["ok"]] == [(0, 2), (1, 2)]
    assert pairs[(0, 2)]["error"] == "Connection refused" and pairs[(2, 0)]["ok"] and pairs[(2, 1)]["ok"]
    bad = [f for f in doc["findings"] if f["id"] == "gang.dataplane"]
    assert [f["title"].split(" on its data-plane port")[0] for f in bad] == [
        f"node 0 ({boxes['a']}) cannot connect to node 2 (gr-walled)",
        f"node 1 ({boxes['b']}) cannot connect to node 2 (gr-walled)"]
    assert bad[0]["fix"].startswith("on gr-walled: allow TCP from 127.0.0.1 to ports ")
    assert not any(f["id"].startswith("gang.unreachable") for f in doc["findings"]), "the rendezvous itself passed"
    assert _nothing_started(gang_rig, "gr-a", "gr-b", "gr-walled")
    screen = io.StringIO()
    render_gang.launched(doc, Console(file=screen, width=120, no_color=True, highlight=False))
    table = screen.getvalue()[screen.getvalue().index("data plane: pairs of nodes that cannot connect"):]
    assert [line.split()[:4] for line in table.splitlines() if line.startswith("│") and "refused" in line] == [
        ["│", "node", "0", "│"], ["│", "node", "1", "│"]]
    verdict = gang.preflight([boxes["a"], boxes["b"]], nproc_per_node=1, port=free_port(), rdzv_host="127.0.0.1",
                             window_s=5)
    assert verdict["ok"] and [(p["from"], p["to"], p["ok"]) for p in verdict["dataplane"]] == [
        (0, 1, True), (1, 0, True)]


def test_one_box_under_two_names_is_refused(cli, gang_rig, boxes):
    r = _launch(cli, gang_rig, [boxes["a"], boxes["twin"]], "--json")
    assert r.returncode == 3, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["data"]["refused"] == "host-key-shared"
    assert any(f["id"] == "gang.same-box" and f["evidence"] == {"host": "gr-twin", "same_key_as": boxes["a"],
                                                                "kind": "host-key-shared"} for f in doc["findings"])
    r = cli("fleet", "--host", f"{boxes['a']},{boxes['twin']}", "--window", "0", "--json", env=gang_rig.env())
    assert r.returncode == 3, r.stdout + r.stderr
    rows = {row["host"]: row for row in json.loads(r.stdout)["data"]["hosts"]}
    assert rows[boxes["a"]]["ok"] and rows["gr-twin"]["error"]["kind"] == "host-key-shared"
    assert rows["gr-twin"]["error"]["message"].startswith(f"gr-twin answers with the host key of {boxes['a']}")


def test_a_node_that_cannot_be_asked_refuses_the_gang(cli, gang_rig, boxes):
    r = _launch(cli, gang_rig, [boxes["a"], boxes["down"]], "--json")
    assert r.returncode == 3, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["summary"].startswith("gang refused before launch: node 1 (gr-down) could not be asked: ")
    assert _nothing_started(gang_rig, "gr-a")


@pytest.mark.parametrize("args,words", [
    (["--host", "gr-a,gr-a", "--cmd", "train.py"], "--host names gr-a more than once"),
    (["--host", "gr-a,gr-b", "--cmd", "python3 train.py --x"], "drop the leading 'python3' (--cmd 'train.py --x')"),
    (["--host", "gr-a,gr-b", "--cmd", "/usr/bin/python3.11 -u train.py"], "drop the leading '/usr/bin/python3.11'"),
    (["--host", "gr-a,gr-b", "--script", DDP], "--script does not apply here"),
    (["--host", "gr-a,gr-b", "--cmd", "train.py", "--key", "k"], "--key does not apply here"),
    (["--cmd", "train.py"], "--torchrun needs the gang's boxes: --host a,b"),
    (["--host", "gr-a", "--fleet", "f", "--cmd", "train.py"], "give --host or --fleet, not both: --fleet names the "
                                                               "gang's boxes"),
    (["--host", "gr-a,gr-b", "--cmd", "train.py", "--nproc-per-node", "0"], "--nproc-per-node takes"),
    (["--host", "gr-a,gr-b", "--cmd", "train.py", "--rdzv-host", "a b"], "--rdzv-host: rendezvous host 'a b'"),
])
def test_command_line_mistakes_are_exit_2_before_any_box_is_asked(cli, gang_rig, args, words):
    r = cli("launch", "--torchrun", *args, "--json", env=gang_rig.env())
    assert r.returncode == 2, r.stdout + r.stderr
    assert words in json.loads(r.stdout)["error"]["message"]


def test_a_fleet_group_that_is_not_there_is_named_before_any_box_is_asked(cli, gang_rig, tmp_path):
    (tmp_path / "gpuops").mkdir()
    (tmp_path / "gpuops" / "fleet.toml").write_text('[[host]]\nalias = "gr-a"\n\n[fleet.pair]\nhosts = ["gr-a"]\n')
    r = cli("launch", "--torchrun", "--fleet", "trio", "--cmd", "train.py", "--json",
            env={**gang_rig.env(), "XDG_CONFIG_HOME": str(tmp_path)})
    assert r.returncode == 4, r.stdout + r.stderr
    assert "no fleet 'trio' in " in json.loads(r.stdout)["error"]["message"] and "known: pair" in r.stdout
    assert _nothing_started(gang_rig, "gr-a")


def test_gang_verbs_on_an_unknown_gang(cli, gang_rig):
    r = cli("status", "--gang", "gang-20260101-000000-abcdef", env=gang_rig.env())
    assert r.returncode == 4 and "no record of gang gang-20260101-000000-abcdef" in r.stderr
    r = cli("stop", "--gang", "not-a-gang", env=gang_rig.env())
    assert r.returncode == 2 and "is not a gang id" in r.stderr
    r = cli("logs", "--gang", "gang-20260101-000000-abcdef", "--host", "gr-a", env=gang_rig.env())
    assert r.returncode == 2 and "leave out --host and --job" in r.stderr


@pytest.mark.anyio
async def test_a_refused_gang_is_an_answer_for_an_agent_and_readonly_launches_nothing(gang_rig, boxes, monkeypatch,
                                                                                      tmp_path):
    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from mcp import Client

    from gpuops.mcp import server

    monkeypatch.delenv("GPUOPS_MODE", raising=False)
    (tmp_path / "gpuops").mkdir()
    (tmp_path / "gpuops" / "fleet.toml").write_text(
        f'[[host]]\nalias = "{boxes["a"]}"\n\n[[host]]\nalias = "{boxes["old"]}"\n\n'
        f'[fleet.pair]\nhosts = ["{boxes["old"]}", "{boxes["a"]}"]\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as client:
        refused = await client.call_tool("gang_launch", {"hosts": [boxes["a"], boxes["old"]], "cmd": "train.py",
                                                         "rdzv_port": free_port()})
        grouped = await client.call_tool("gang_launch", {"fleet": "pair", "cmd": "train.py", "rdzv_port": free_port()})
        neither = await client.call_tool("gang_launch", {"cmd": "train.py"})
        unknown = await client.call_tool("gang_status", {"gang": "gang-20260101-000000-abcdef"})
        monkeypatch.setenv("GPUOPS_MODE", "readonly")  # set after the start: refused when the call comes
        stop = await client.call_tool("gang_stop", {"gang": "gang-20260101-000000-abcdef", "yes": True})
    doc = refused.structured_content
    assert refused.is_error is False and doc["ok"] is False
    assert any(f["id"] == "gang.torch-mismatch" for f in doc["findings"])
    table = next(f for f in grouped.structured_content["findings"] if f["id"] == "gang.torch-mismatch")
    assert [row["host"] for row in table["evidence"]["table"]] == [boxes["old"], boxes["a"]]  # the group's order
    assert neither.is_error and json.loads(neither.content[0].text)["error"]["kind"] == "usage"
    assert unknown.is_error and json.loads(unknown.content[0].text)["error"]["kind"] == "not-found"
    assert stop.is_error and json.loads(stop.content[0].text)["error"]["kind"] == "refused"
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert "gang_launch" not in names and "gang_stop" not in names and "gang_status" in names
