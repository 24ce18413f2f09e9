"""The pure rules of gangs and placement, on fact documents: no SSH, exact words and numbers."""

import json
import os

import pytest

from gpuops import errors, placement
from gpuops.jobs import gang, gangcheck, gangstore
from gpuops import states
from gpuops.remote import knownkeys
from tests.test_fleet_rules import planted

NOW = 1_790_000_000.0


def node_facts(index, *, role=None, torch="2.13.0+cpu", cuda=None, driver="550.54.15", cuda_max="12.4", gpus=0,
               boot="boot-a", netns="net:[1]", iface="lo", address="127.0.0.1", now=NOW, code=None, plane=None,
               **rdzv):
    role = role or ("head" if index == 0 else "worker")
    if role == "head":
        r = {"role": "head", "port": 29500, "free": True, "error": None, "holders": [], "heard": [], "strangers": 0,
             "interface": iface}
    else:
        r = {"role": "worker", "connected": True, "answered": True, "error": None, "seconds": 0.01, "local": address,
             "attempts": 1, "interface": iface}
    r.update(rdzv)
    return {"node": index, "hostname": f"h{index}", "boot_id": boot, "netns": netns, "python": "3.11.7",
            "interfaces": [{"name": iface, "ipv4": address, "up": True, "loopback": iface == "lo"}],
            "route": {"address": address, "interface": iface}, "rendezvous": r, "code": code,
            "dataplane": dict({"address": address, "port": 40000 + index, "error": None, "peers": None, "probes": [],
                               "heard": [], "port_range": [32768, 60999]}, **(plane or {})),
            "gpu": {"driver": driver, "cuda_max": cuda_max, "error": None, "count": gpus,
                    "names": ["NVIDIA H100 80GB HBM3"] * gpus},
            "torch": {"installed": True, "version": torch, "cuda": cuda, "error": None}, "now": now}


def nodes(*facts, received=NOW, mesh=True):
    """Checked node documents; with `mesh`, a node whose data-plane table is not given got it and
    reached every other node."""
    for f in facts:
        plane = f["dataplane"]
        if mesh and plane["peers"] is None and not plane["probes"]:
            plane["probes"] = [{"node": o["node"], "address": o["dataplane"]["address"] or "127.0.0.1",
                                "port": o["dataplane"]["port"] or 1, "connected": True, "answered": True, "error": None,
                                "seconds": 0.001, "attempts": 1} for o in facts if o is not f]
            plane["peers"] = len(facts)
    out = []
    for f in facts:
        host = f"box{f['node']}"
        checked = gangcheck.checked(json.loads(json.dumps(f)), host)
        out.append({"index": f["node"], "host": host, "facts": checked, "error": None, "received_at": received})
    if out and out[0]["facts"]["rendezvous"]["role"] == "head":
        out[0]["facts"]["rendezvous"]["heard"] = [{"node": n["index"], "from": "127.0.0.1", "at": "127.0.0.1"}
                                                  for n in out[1:]]
    return out


def judge(ns, nproc=1, **kw):
    return gangcheck.judge(ns, port=29500, rdzv_host="127.0.0.1", nproc_per_node=nproc, **kw)


def failed(verdict):
    """{finding id: the first fail finding of that id}."""
    out = {}
    for f in verdict["findings"]:
        if f.severity == "fail":
            out.setdefault(f.id, f)
    return out


def test_a_gang_on_one_machine_passes_and_keeps_loopback():
    v = judge(nodes(node_facts(0), node_facts(1)))
    assert v["ok"] and v["multi_host"] is False and not failed(v)
    assert v["nodes"] == [{"index": 0, "host": "box0", "interface": "lo", "address": "127.0.0.1"},
                          {"index": 1, "host": "box1", "interface": "lo", "address": "127.0.0.1"}]


def test_loopback_between_hosts_is_refused():
    v = judge(nodes(node_facts(0), node_facts(1, boot="boot-b")))
    assert v["multi_host"] is True
    assert failed(v)["gang.interface"].title == ("node 0 (box0): its gang traffic would leave through lo: lo is "
                                                 "loopback: other hosts cannot reach this one through it")


def test_docker0_between_hosts_is_refused_and_a_real_interface_is_kept():
    v = judge(nodes(node_facts(0, iface="ens5", address="10.0.0.5"),
                    node_facts(1, boot="b", iface="docker0", address="172.17.0.2")))
    assert list(failed(v)) == ["gang.interface"] and "docker0 is a container or VM bridge" in \
        failed(v)["gang.interface"].title
    ok = judge(nodes(node_facts(0, iface="ens5", address="10.0.0.5"),
                     node_facts(1, boot="b", iface="ens5", address="10.0.0.6")))
    assert ok["ok"] and [n["interface"] for n in ok["nodes"]] == ["ens5", "ens5"]


def test_torch_that_differs_is_refused_with_the_table():
    v = judge(nodes(node_facts(0), node_facts(1, torch="2.12.0+cpu")))
    f = failed(v)["gang.torch-mismatch"]
    assert f.title == "the nodes run different torch builds: box0 2.13.0+cpu (CUDA none), box1 2.12.0+cpu (CUDA none)"
    assert [(r["host"], r["torch"]) for r in f.evidence["table"]] == [("box0", "2.13.0+cpu"), ("box1", "2.12.0+cpu")]
    assert not v["ok"]


def test_torch_missing_a_driver_too_old_and_more_processes_than_gpus():
    missing = node_facts(1)
    missing["torch"] = {"installed": False, "version": None, "cuda": None, "error": None}
    v = judge(nodes(node_facts(0, cuda="12.8", gpus=2), missing, node_facts(2, cuda="12.8", gpus=2)), nproc=4)
    assert failed(v)["gang.torch-missing"].title == "node 1 (box1): python3 cannot import torch"
    v = judge(nodes(node_facts(0, cuda="12.8", gpus=2), node_facts(1, cuda="12.8", gpus=2)), nproc=4)
    assert failed(v)["gang.driver-too-old"].title == ("node 0 (box0): its driver 550.54.15 supports CUDA 12.4, "
                                                      "torch needs 12.8")
    assert failed(v)["gang.gpus"].fix == "--nproc-per-node 2"


def test_drivers_that_differ_are_a_warning_only():
    v = judge(nodes(node_facts(0), node_facts(1, driver="535.104.05")))
    assert v["ok"] and [f.id for f in v["findings"]] == ["gang.driver-mismatch"]


def test_a_busy_port_names_its_holder():
    head = node_facts(0, free=False, error="Address already in use",
                      holders=[{"pid": 4242, "comm": "pt_elastic", "cmd": "python -m torch.distributed.run"}])
    f = failed(judge(nodes(head, node_facts(1))))["gang.port-busy"]
    assert f.title == "port 29500 is busy on the head box0: held by pid 4242 (pt_elastic)"
    assert f.fix == "kill 4242   # a leftover torchrun? or --rdzv-port 29501"


def test_a_node_that_cannot_reach_the_head_or_reached_someone_else():
    head = node_facts(0)
    head["interfaces"] += [{"name": "ens5", "ipv4": "10.0.0.5", "up": True, "loopback": False},
                           {"name": "docker0", "ipv4": "172.17.0.1", "up": True, "loopback": False}]
    v = judge(nodes(head, node_facts(1, connected=False, answered=False, error="Connection refused", local=None,
                                     attempts=12, interface=None)))
    unreachable = failed(v)["gang.unreachable-rendezvous"]
    assert unreachable.title.startswith(
        "node 1 (box1) cannot reach 127.0.0.1:29500 on the head: Connection refused (12 tries)")
    assert unreachable.fix.endswith("--rdzv-host ADDR (the head has 10.0.0.5 (ens5))")
    v = judge(nodes(node_facts(0), node_facts(1, answered=False, error="something answered at 127.0.0.1:29500, but "
                                                                       "not this preflight's head")))
    assert "gang.wrong-head" in failed(v)


def _probe(node, port, connected=True, answered=True, error=None):
    return {"node": node, "address": "10.0.0.%d" % (5 + node), "port": port, "connected": connected,
            "answered": answered, "error": error, "seconds": 0.01 if connected else None, "attempts": 1 if connected else 9}


def _planed(*probes_by_node, **kw):
    return [node_facts(i, boot=f"b{i}", iface="ens5", address=f"10.0.0.{5 + i}",
                       plane={"peers": len(probes_by_node), "probes": probes, "port_range": [32768, 60999]}, **kw)
            for i, probes in enumerate(probes_by_node)]


def test_a_pair_refused_on_the_data_plane_is_refused_with_the_listeners_side_fix():
    # Seed 004's firewall: the rendezvous port is open, box2's ephemeral ports are not.
    v = judge(nodes(*_planed([_probe(1, 40001), _probe(2, 40002, False, False, "Connection refused")],
                             [_probe(0, 40000), _probe(2, 40002, False, False, "Connection refused")],
                             [_probe(0, 40000), _probe(1, 40001)])))
    bad = [f for f in v["findings"] if f.id == "gang.dataplane"]
    assert [f.title for f in bad] == [
        "node 0 (box0) cannot connect to node 2 (box2) on its data-plane port 10.0.0.7:40002: Connection refused",
        "node 1 (box1) cannot connect to node 2 (box2) on its data-plane port 10.0.0.7:40002: Connection refused"]
    assert bad[0].fix.startswith("on box2: allow TCP from 10.0.0.5 to ports 32768-60999 (its ephemeral range")
    assert "iptables -I INPUT -p tcp -s 10.0.0.5 --dport 32768:60999 -j ACCEPT" in bad[0].fix and bad[0].gotcha == "VAST6"
    assert not v["ok"] and len(v["dataplane"]) == 6
    assert [(p["from"], p["to"], p["ok"]) for p in v["dataplane"] if not p["ok"]] == [(0, 2, False), (1, 2, False)]


def test_a_data_plane_port_answered_by_something_else_and_a_node_that_cannot_listen():
    v = judge(nodes(*_planed([_probe(1, 40001, True, False, "something answered at 10.0.0.6:40001, but not node 1")],
                             [_probe(0, 40000)])))
    [nat] = [f for f in v["findings"] if f.id == "gang.dataplane"]
    assert "NAT or port mapping" in nat.fix
    broken = node_facts(1, plane={"port": None, "error": "Cannot assign requested address", "address": "10.9.9.9"})
    v = judge(nodes(node_facts(0), broken))
    assert failed(v)["gang.dataplane"].title == ("node 1 (box1) cannot listen on an ephemeral port of 10.9.9.9, as "
                                                 "NCCL and Gloo will: Cannot assign requested address")


def test_a_node_that_got_no_table_is_left_to_the_rendezvous_finding_and_all_pairs_passing_is_quiet():
    head = node_facts(0, plane={"peers": 1, "probes": []})
    worker = node_facts(1, connected=False, answered=False, local=None, error="Connection refused",
                        plane={"port": None, "peers": None, "probes": []})
    v = judge(nodes(head, worker, mesh=False))
    assert "gang.unreachable-rendezvous" in failed(v) and not [f for f in v["findings"] if f.id == "gang.dataplane"]
    assert v["dataplane"] == []
    ok = judge(nodes(node_facts(0), node_facts(1), node_facts(2)))
    assert ok["ok"] and len(ok["dataplane"]) == 6 and all(p["ok"] for p in ok["dataplane"])


def test_clocks_apart_more_than_the_tolerance():
    v = judge(nodes(node_facts(0), node_facts(1, now=NOW + 9.0)))
    f = failed(v)["gang.clock"]
    assert f.title.startswith("the nodes' clocks are 9.0s apart") and f.evidence["skew_s"] == {"box0": 0.0,
                                                                                                  "box1": 9.0}
    assert judge(nodes(node_facts(0), node_facts(1, now=NOW + 2.0)))["ok"]


def _code(files, exists=True):
    entries = sorted([name, digest] for name, digest in files.items())
    return {"dir": "/root/code", "exists": exists, "files": len(files), "bytes": 10, "digest": repr(entries),
            "entries": entries, "truncated": False, "errors": 0}


def test_code_that_differs_names_the_paths_and_a_missing_tree_is_its_own_finding():
    head = _code({"train.py": "aa", "util.py": "bb"})
    v = judge(nodes(node_facts(0, code=head), node_facts(1, code=_code({"train.py": "cc", "util.py": "bb"})),
                    node_facts(2, code=_code({}, exists=False))))
    differs = failed(v)["gang.code-differs"]
    assert differs.evidence["paths"] == ["train.py"] and differs.title.startswith("node 1 (box1): /root/code differs")
    assert failed(v)["gang.code-missing"].title == "node 2 (box2): /root/code does not exist"


def test_a_node_not_asked_and_a_shared_host_key_stop_the_judging_early():
    ns = nodes(node_facts(0))
    ns.append({"index": 1, "host": "box1", "facts": None, "error": {"kind": "unreachable", "message": "refused"},
               "received_at": NOW})
    v = judge(ns, shared_keys={"box0": "box9"})
    assert set(failed(v)) == {"gang.unreachable", "gang.same-box"} and v["nodes"] == []


@pytest.mark.parametrize("path,value,words", [
    (("rendezvous", "heard"), [{"node": 1, "from": "not an ip", "at": "127.0.0.1"}], "peer address 'not an ip'"),
    (("interfaces",), [{"name": "x", "ipv4": "1.2.3.4", "up": "yes", "loopback": False}], "'up' is a str"),
    (("torch", "version"), "x" * 600, "a text's length is 600"),
    (("now",), float("nan"), "now is nan"),
    (("dataplane", "port"), 70000, "the data-plane port is 70000"),
    (("dataplane", "probes"), [dict(_probe(1, 1), address="../../x")], "data-plane address '../../x'"),
    (("dataplane", "heard"), [True], "data-plane hellos [True]"),
    (("code",), {"dir": "/c", "exists": True, "files": 1, "bytes": 1, "digest": "d", "entries": [["a", 1]],
                 "truncated": False, "errors": 0}, "a code entry is ['a', 1]"),
])
def test_an_answer_gpuops_did_not_write_is_a_bad_answer(path, value, words):
    with pytest.raises(errors.BadAnswer) as e:
        gangcheck.checked(planted(node_facts(0), path, value), "box0")
    assert words in e.value.message


# ------------------------------------------------------------------ the gang's state


def row(state, **kw):
    return dict({"state": state, "exit_code": None, "signal": None, "reason": None, "ended_at": None}, **kw)


def agg(*rows):
    return gang.aggregate([{"index": i, "host": f"box{i}", "row": r} for i, r in enumerate(rows)])


def test_running_only_when_every_node_runs():
    assert agg(row(states.RUNNING), row(states.RUNNING)) == {"state": states.RUNNING, "first_failed": None,
                                                             "reason": None}
    assert agg(row(states.RUNNING), row(states.STARTING))["state"] == states.STARTING
    stalled = agg(row(states.RUNNING), row(states.STALLED, reason="no progress line for 900s"))
    assert stalled["state"] == states.STALLED and stalled["reason"] == ("node 1 (box1) STALLED: no progress line "
                                                                        "for 900s")
    assert agg(row(states.COMPLETED), row(states.RUNNING))["reason"] == "node 0 (box0) completed; waiting on the rest"
    assert agg(row(states.COMPLETED), row(states.COMPLETED))["state"] == states.COMPLETED


def test_one_node_gone_while_others_run_is_degraded_naming_it():
    told = agg(row(states.RUNNING), row(states.KILLED, signal="SIGKILL", ended_at=5.0), row(states.RUNNING))
    assert told["state"] == states.DEGRADED and told["first_failed"] == 1
    assert told["reason"] == ("node 1 (box1) KILLED (SIGKILL); 2 node(s) still running, but the gang cannot finish "
                              "as launched")


def test_every_node_ended_names_the_first_by_its_exit_time():
    told = agg(row(states.FAILED, exit_code=1, ended_at=12.0), row(states.FAILED, exit_code=1, ended_at=10.5))
    assert told["state"] == states.FAILED and told["first_failed"] == 1
    assert told["reason"] == "node 1 (box1) FAILED (exit 1) first; then node 0 (box0) FAILED (exit 1)"
    mixed = agg(row(states.FAILED, exit_code=1, ended_at=12.0), row(states.KILLED, signal="SIGKILL", ended_at=10.0))
    assert mixed["state"] == states.FAILED and mixed["reason"].startswith("node 1 (box1) KILLED (SIGKILL) first")
    stopped = agg(row(states.KILLED, signal="SIGTERM", ended_at=3.0), row(states.KILLED, signal="SIGTERM", ended_at=3.1))
    assert stopped["state"] == states.KILLED  # a stop took every node down alike


def test_a_node_that_cannot_be_asked_says_nothing_about_the_job():
    told = agg(row(states.RUNNING), row(states.UNREACHABLE, reason="ssh: connect: Connection refused"))
    assert told["state"] == states.UNREACHABLE
    assert told["reason"] == ("node 1 (box1) UNREACHABLE: ssh: connect: Connection refused (this says nothing about "
                              "the job there)")


def test_gang_ids_and_labels():
    gid = gang.new_id(now=0)
    assert gid.startswith("gang-19700101-000000-") and gang.is_id(gid) and not gang.is_id("gang-1; rm")
    assert gang.labels(gid, 1, 3) == {"gang": gid, "gang_node": "1", "gang_nodes": "3"}


# ------------------------------------------------------------------ the record


def test_the_record_round_trips_and_never_follows_a_planted_link(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path / "state"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "state").mkdir()
    os.symlink(outside, tmp_path / "state" / "gangs")  # someone made gangs/ point elsewhere
    gid = gang.new_id()
    record = {"gang_id": gid, "created_at": NOW, "spec": {}, "rendezvous": {}, "nodes": [{"index": 0, "host": "a"}]}
    path = gangstore.save(record)
    assert gangstore.load(gid) == record and not any(outside.iterdir())
    assert os.stat(path).st_mode & 0o777 == 0o600
    with pytest.raises(errors.NotFound, match="label gang=gang-20260101-000000-abcdef"):
        gangstore.load("gang-20260101-000000-abcdef")
    with pytest.raises(errors.UsageError, match="is not a gang id"):
        gangstore.load("../../etc/passwd")
    (tmp_path / "state" / "gangs" / f"{gid}.json").write_text('{"gang_id": 1}')
    with pytest.raises(errors.UsageError, match="'gang_id' is missing or of the wrong type"):
        gangstore.load(gid)


# ------------------------------------------------------------------ placement


def dev(i, name="NVIDIA H100 80GB HBM3", used=1, total=81559, util=0.0):
    return {"index": i, "name": name, "memory_used_mib": used, "memory_total_mib": total, "util_peak_pct": util}


def box(host, devices, jobs=(), pins=(), ok=True):
    return {"host": host, "ok": ok, "devices": devices, "running_jobs": list(jobs), "running_gpus": list(pins),
            "jobs_running": len(jobs), "error": None if ok else {"kind": "unreachable", "message": "refused"}}


FLEET = [box("a100", [dev(i, "NVIDIA A100-SXM4-80GB") for i in range(8)]),
         box("h100", [dev(0, util=97.0), dev(1, used=20480)]),
         box("h100b", [dev(0), dev(1)], jobs=["20261124-000000-aaaaaa"], pins=["0"]),
         box("down", [], ok=False)]


def test_nothing_fits_is_said_plainly():
    chosen = placement.place(FLEET, placement.request(4, "H100"))
    assert chosen["host"] is None
    assert chosen["summary"] == ("asked for 4x H100; fleet has 8x A100-SXM4-80GB, 1x H100 80GB HBM3 free, "
                                 "3x H100 80GB HBM3 busy; 1 box not answering")
    why = {b["host"]: b["why"] for b in chosen["boxes"]}
    assert why["a100"] == "has 8x A100-SXM4-80GB; asked for 4x H100"
    assert why["h100"] == "0 of 2 matching GPU(s) free (GPU 0 at 97%; GPU 1 20.0 GiB in use)"
    assert why["h100b"] == "1 of 2 matching GPU(s) free (GPU 0 pinned by a running gpuops job)"
    assert why["down"] == "not answering (unreachable): refused"


def test_the_least_loaded_box_that_fits_gets_its_lowest_free_gpus():
    chosen = placement.place(FLEET, placement.request(1, "h100"))
    assert (chosen["host"], chosen["gpus"]) == ("h100b", [1])
    fits = [box("busy", [dev(0), dev(1, util=5.0), dev(2)]), box("idle", [dev(0), dev(1), dev(2)])]
    chosen = placement.place(fits, placement.request(2))
    assert (chosen["host"], chosen["gpus"]) == ("idle", [0, 1])
    why = {b["host"]: (b["verdict"], b["why"]) for b in chosen["boxes"]}
    assert why["busy"] == ("fits", "fits too, but more loaded (1 of 3 GPUs busy, 0 gpuops job(s))")
    assert why["idle"] == ("chosen", "least loaded: 0 of 3 GPUs busy, 0 gpuops job(s)")


def test_an_unpinned_job_takes_the_whole_box_and_memory_is_a_floor():
    loose = [box("loose", [dev(0), dev(1)], jobs=["20261124-000000-bbbbbb"], pins=[None])]
    assert placement.place(loose, placement.request(1))["boxes"][0]["why"] == (
        "0 of 2 matching GPU(s) free (GPU 0 gpuops job 20261124-000000-bbbbbb runs without --gpus (it may use any "
        "GPU); GPU 1 gpuops job 20261124-000000-bbbbbb runs without --gpus (it may use any GPU))")
    small = [box("small", [dev(0, "NVIDIA A10G", total=23028)])]
    assert placement.place(small, placement.request(1, min_vram_gib=40))["summary"] == (
        "asked for 1x GPU with at least 40 GiB; fleet has 1x A10G free")
    with pytest.raises(errors.UsageError, match="1 to 64"):
        placement.request(0)


# ------------------------------------------------------------------ known_hosts


def test_known_hosts_names_match_as_openssh_matches_them(tmp_path):
    assert knownkeys.matches("[127.0.0.1]:2222", "[127.0.0.1]:2222")  # brackets are literal, not a class
    assert not knownkeys.matches("[127.0.0.1]:2222", "1:2222")
    assert knownkeys.matches("*.example.com,!bad.example.com", "gpu.EXAMPLE.com")
    assert not knownkeys.matches("*.example.com,!bad.example.com", "bad.example.com")
    key = "AAAAC3NzaC1lZDI1NTE5AAAAIJDgEfmgP970YE6cOql3Irej9eXO4rCIa9q/aemdnjoX"
    f = tmp_path / "known_hosts"
    f.write_text(f"[127.0.0.1]:2222 ssh-ed25519 {key}\n@revoked * ssh-ed25519 {key}\nb,c ssh-ed25519 {key}\n"
                 "d ssh-ed25519 not-base64!\n")
    assert knownkeys.trusted([f], "[127.0.0.1]:2222") == knownkeys.trusted([f], "c") == {knownkeys.fingerprint_of(key)}
    assert knownkeys.trusted([f], "d") == set()
    assert knownkeys.shared({"a": {"k1"}, "b": {"k2"}, "c": {"k1"}, "d": set()}) == {"c": "a"}


def test_a_script_named_like_python_is_no_interpreter():
    from gpuops.ops import gang as op

    op.check_request(["a", "b"], "python_tools.py --x 1", 1)  # a script, run by torchrun's python
    with pytest.raises(errors.UsageError, match="drop the leading 'python'"):
        op.check_request(["a", "b"], "python -u train.py", 1)
