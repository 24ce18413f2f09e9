"""Link and topology findings (gpuops.onbox.host.gpulinks, gpuops.checks.link): the real probe against the fake
nvidia-smi on fake boxes, failing and passing, and the rules on fact documents."""

import json

import pytest

from gpuops.checks import link, shape
from gpuops.checks.thresholds import merged
from gpuops.onbox.host import gpulinks
from gpuops.ops import preflight as op
from gpuops.remote.local import LocalTarget
from tests.fixtures.fakegpu.boxes import FAKEGPU, compose


def _preflight(tmp_path, monkeypatch, scenario, scenario_doc=None):
    if scenario_doc is not None:  # a scenario of this test's own, next to the fixtures' ones
        own = tmp_path / "fakegpu" / scenario
        own.mkdir(parents=True)
        (own / "nvidia-smi").write_text((FAKEGPU / "healthy" / "nvidia-smi").read_text().replace(
            '"$here/../fake_nvidia_smi.py"', f'"{FAKEGPU}/fake_nvidia_smi.py"'))
        (own / "nvidia-smi").chmod(0o755)
        (own / "scenario.json").write_text(json.dumps(dict(scenario_doc, base=str(FAKEGPU / scenario_doc["base"]))))
        root, env = compose(tmp_path, "v2-healthy", None)
        env["PATH"] = f"{own}:{env['PATH']}"
    else:
        root, env = compose(tmp_path, "v2-healthy", scenario)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return root, (lambda: op.preflight(LocalTarget()))


def _found(doc, prefix=("gpu.pcie", "gpu.p2p", "gpu.numa", "gpu.nvlink", "gpu.fabric", "gpu.mig", "gpu.persistence")):
    return {(f["id"], f["severity"], f["evidence"].get("gpu")) for f in doc["findings"] if f["id"] in prefix}


def test_a_riser_box_fails_on_its_narrow_link_and_warns_of_no_peer_to_peer(tmp_path, monkeypatch):
    """GPU 1 reports x4 gen 3 of an x16 gen 5 link, and `topo -p2p r` says NS: the box the issue names,
    on which preflight found nothing."""
    _, run = _preflight(tmp_path, monkeypatch, "riser")
    doc = run()
    assert _found(doc) == {("gpu.pcie", "fail", 1), ("gpu.p2p", "warn", None)}
    [narrow] = [f for f in doc["findings"] if f["id"] == "gpu.pcie"]
    assert narrow["title"] == "GPU 1 on a x4 gen 3 link of x16 gen 5: copies 3.9 of 63 GB/s" and narrow["evidence"]["bus_id"] == "00000000:3B:00.0"
    assert doc["ok"] is False and "re-rent" in narrow["fix"]
    assert doc["data"]["links"]["p2p_read"] == {"0-1": "NS"}


def test_a_healthy_box_passes_every_link_check(tmp_path, monkeypatch):
    _, run = _preflight(tmp_path, monkeypatch, "healthy")
    doc = run()
    assert _found(doc) == {("gpu.pcie", "ok", None), ("gpu.p2p", "ok", None)}
    assert [d["width_current"] for d in doc["data"]["links"]["devices"]] == [16, 16]


def test_an_older_driver_that_rejects_the_newer_fields_is_asked_for_the_older_set(tmp_path, monkeypatch):
    _, run = _preflight(tmp_path, monkeypatch, "old-links", {
        "base": "riser", "rejects": ["pcie.link.gen.gpucurrent", "pcie.link.gen.hostmax"]})
    doc = run()
    links = doc["data"]["links"]
    assert any("older set" in n for n in links["notes"])
    assert [(d["gen_current"], d["gen_gpumax"]) for d in links["devices"]] == [(5, None), (3, None)]
    assert ("gpu.pcie", "fail", 1) in _found(doc)


def test_nvlink_down_and_an_unregistered_fabric_fail(tmp_path, monkeypatch):
    _, run = _preflight(tmp_path, monkeypatch, "nvswitch", {
        "base": "healthy", "nvlink": {"links": 18, "gbps": 26.562, "down": {"1": [3, 4]}},
        "patch": {"0": {"fabric.state": "Completed", "fabric.status": "Success"},
                  "1": {"fabric.state": "Not Started", "fabric.status": "N/A"}}})
    doc = run()
    assert _found(doc) >= {("gpu.nvlink", "fail", 1), ("gpu.fabric", "fail", 1)}
    assert doc["data"]["links"]["nvlink"]["0"] == {"active": 18, "inactive": 0, "gbps": 26.562}
    facts = LocalTarget().run_onbox("probe", timeout_s=60)
    assert shape.undeclared(facts) == [] and facts["links"]["devices"][1]["fabric_state"] == "Not Started"


def test_a_gpu_far_from_the_allowed_cpus_warns(tmp_path, monkeypatch):
    root, run = _preflight(tmp_path, monkeypatch, "healthy")
    for bus, node, cpus in (("0000:1b:00.0", 0, "0-1"), ("0000:3b:00.0", 1, "64-127")):
        d = root / "sys" / "bus" / "pci" / "devices" / bus
        d.mkdir(parents=True)
        (d / "numa_node").write_text(f"{node}\n")
        (d / "local_cpulist").write_text(cpus + "\n")
    for n in (0, 1):
        (root / "sys" / "devices" / "system" / "node" / f"node{n}").mkdir(parents=True)
    doc = run()
    assert {f for f in _found(doc) if f[0] == "gpu.numa"} == {("gpu.numa", "warn", 1)}


REAL_580 = FAKEGPU.parent / "nvidia-smi-580"
# Three GPUs in the form driver 580 printed for one (nvidia-smi-580/topo-p2p-r.txt): the header
# underlined with terminal escapes, a tab after every cell.
THREE_GPUS = """ \t\x1b[4mGPU0\tGPU1\tGPU2\t\x1b[0m
 GPU0\tX\tOK\tCNS\t
 GPU1\tOK\tX\tNS\t
 GPU2\tCNS\tNS\tX\t

Legend:

  X    = Self
  OK   = Status Ok
  CNS  = Chipset not supported
  NS   = Not supported
"""


def test_the_p2p_matrix_and_nvlink_status_parse():
    assert gpulinks.parse_p2p(THREE_GPUS) == {"0-1": "OK", "0-2": "CNS", "1-2": "NS"}
    real = (REAL_580 / "topo-p2p-r.txt").read_text()
    assert "\x1b[4mGPU0" in real and gpulinks.parse_p2p(real) == {}  # one H200: no pair, and the legend is not one
    assert gpulinks.parse_nvlink((REAL_580 / "nvlink-s.txt").read_text()) == {}
    text = "GPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\nGPU 1: NVIDIA H100 (UUID: GPU-2)\n"
    assert gpulinks.parse_nvlink(text) == {"0": {"active": 1, "inactive": 1, "gbps": 26.562},
                                           "1": {"active": 0, "inactive": 0, "gbps": None}}
    assert gpulinks.cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert link.parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11} and link.parse_cpulist("junk") == set()


def _dev(**kw):
    d = {"index": 0, "bus_id": "00000000:1B:00.0", "gen_current": 5, "gen_max": 5, "gen_gpumax": 5, "gen_hostmax": 5,
         "width_current": 16, "width_max": 16, "pstate": "P0", "util_pct": 90.0}
    d.update(kw)
    return {"links": {"devices": [d]}}


@pytest.mark.parametrize("kw,expected", [
    ({}, "ok"),
    ({"gen_current": 1, "pstate": "P8", "util_pct": 0.0}, "info"),  # an idle link downshifts
    ({"gen_current": 1, "pstate": "P0", "util_pct": 0.0}, "info"),  # no work on it: still idle
    ({"gen_current": 3}, "fail"),  # under load, gen 3 of 5
    ({"width_current": 4, "pstate": "P8", "util_pct": 0.0}, "fail"),  # lanes missing even idle
    ({"gen_max": 3, "gen_hostmax": 3, "gen_current": 3}, "warn"),  # a gen 5 GPU in a gen 3 slot
])
def test_pcie_rules(kw, expected):
    found = link.pcie(_dev(**kw), merged())
    assert max((f.severity for f in found), key=["ok", "info", "warn", "fail"].index) == expected


def test_modes_and_p2p_rules():
    facts = _dev(persistence="Disabled", mig_current="Enabled", mig_pending="Disabled")
    assert {(f.id, f.severity) for f in link.modes(facts, {})} == {
        ("gpu.mig", "warn"), ("gpu.mig", "info"), ("gpu.persistence", "info")}
    assert link.p2p({"links": {"p2p_read": {}}}, {}) == []
    assert [f.severity for f in link.p2p({"links": {"p2p_read": {"0-1": "OK"}}}, {})] == ["ok"]
    assert link.pcie_gbps(5, 16) == 63.0 and link.pcie_gbps(3, 4) == 3.9 and link.pcie_gbps(None, 16) is None


def test_a_gang_whose_ends_differ_in_mtu_or_nccl_is_told_so():
    from tests.gang.test_gang_rules import judge, node_facts, nodes

    def node(i, mtu, nccl):
        f = node_facts(i, boot=f"boot-{i}", iface="eth0", address=f"10.0.0.{i + 1}")
        f["interfaces"][0]["mtu"] = mtu
        f["torch"]["nccl"] = nccl
        return f

    v = judge(nodes(node(0, 9000, "2.28.9"), node(1, 1500, "2.21.5")))
    found = {f.id: f for f in v["findings"]}
    assert found["gang.mtu"].severity == "warn" and found["gang.mtu"].evidence["mtu"] == {"box0": 9000, "box1": 1500}
    assert "mtu 1500" in found["gang.mtu"].fix
    assert found["gang.nccl-mismatch"].severity == "fail" and "box1 2.21.5" in found["gang.nccl-mismatch"].title
    v = judge(nodes(node(0, 9000, "2.28.9"), node(1, 9000, "2.28.9")))
    assert not {f.id for f in v["findings"]} & {"gang.mtu", "gang.nccl-mismatch"}


def test_the_fake_answers_only_subcommands_the_real_help_lists():
    """`topo -p2p r` and `nvlink -s` as driver 580's own help gives them (nvidia-smi-580/help-*.txt)."""
    topo, nvlink = (REAL_580 / "help-topo.txt").read_text(), (REAL_580 / "help-nvlink.txt").read_text()
    assert "[-p2p | --p2pstatus]" in topo and "r - p2p read capabiity" in topo  # sic, the tool's spelling
    assert "[-s | --status]: Display link state (active/inactive)." in nvlink
    import subprocess

    def fake(*argv):
        return subprocess.run([str(FAKEGPU / "riser" / "nvidia-smi"), *argv], capture_output=True, text=True).returncode

    assert fake("topo", "-p2p", "r") == 0 and fake("nvlink", "-s") == 0
    assert fake("topo", "-p2p", "x") == 2 and fake("nvlink", "--bogus") == 2
