"""`preflight --qualify`: its arithmetic and verdicts on recorded measurements (gpuops.datasheet),
the bounds on what a box sends (gpuops.ops.qualify), the verdict kept per host, and the on-box
measuring run for real on this machine's CPU path: its disks, and torch's calls on a CPU device."""

import json
from pathlib import Path

import pytest

from gpuops import errors, qualifystore
from gpuops import datasheet as rules
from gpuops.onbox.facts import qualify as onbox
from gpuops.ops import preflight as op
from gpuops.ops import qualify as ops
from gpuops.remote.local import LocalTarget

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "qualify"


def h200_measured(**changes):
    """The lead's H200 capture (fixtures/qualify/h200-580-measure.json) as the on-box entry answers."""
    raw = json.loads((FIXTURES / "h200-580-measure.json").read_text())
    gpu = {"index": 0, "name": "NVIDIA H200", "matmul_tflops": {
        "float32": raw["matmul_float32_tflops"], "float16": raw["matmul_float16_tflops"],
        "bfloat16": raw["matmul_bfloat16_tflops"]}, "memory_gbps": raw["dtod_copy_gbps"],
        "h2d_gbps": raw["h2d_gbps"], "d2h_gbps": raw["d2h_gbps"], "link_under_load": {"gen": 5, "width": 16}}
    gpu.update(changes)
    return {"seconds": 30.0, "torch": {"version": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.28.9", "error": None},
            "gpus": [gpu], "peers": [], "allreduce": None, "not_measured": [],
            "disks": [{"role": "data_dir", "path": "/data", "bytes": 1 << 28, "write_mbps": 900.0, "read_mbps": 2400.0,
                       "cached": False, "error": None}]}


FACTS = {"gpu": {"devices": [{"index": 0, "name": "NVIDIA H200"}]},
         "links": {"devices": [{"index": 0, "gen_max": 5, "width_max": 16}], "nvlink": {}}}


def _rows(judged):
    return {r["what"]: (r["ratio"], r["verdict"]) for r in judged["rows"]}


def test_the_h200_the_lead_measured_is_kept_with_each_figure_against_its_datasheet():
    judged, findings = rules.judge(h200_measured(), FACTS)
    rows = _rows(judged)
    assert judged["verdict"] == "keep"
    # 783.2 / 989.5 dense BF16, 4210 / 4800 GB/s, 43.8 / 63.0 GB/s (gen 5 x16, 3.938 GB/s a lane)
    assert rows["matmul bfloat16"] == (0.79, "keep") and rows["matmul float32"] == (0.76, "keep")
    assert rows["memory bandwidth"] == (0.88, "keep") and rows["host to device"] == (0.7, "keep")
    assert rows["PCIe link under load"] == (None, "keep")
    assert [f.id for f in findings if f.severity != "ok"] == []
    [src] = {r["source"] for r in judged["rows"] if r["kind"] == "matmul"}
    assert src.startswith("H200: https://www.nvidia.com/en-us/data-center/h200/")


def test_a_riser_and_a_throttled_gpu_return_the_box_with_the_evidence():
    judged, findings = rules.judge(h200_measured(h2d_gbps=3.1, d2h_gbps=3.3, link_under_load={"gen": 3, "width": 4},
                                                 matmul_tflops={"bfloat16": 402.0}), FACTS)
    assert judged["verdict"] == "return"
    failed = {f.id: f for f in findings if f.severity == "fail"}
    assert set(failed) == {"qualify.verdict", "qualify.h2d", "qualify.d2h", "qualify.pcie", "qualify.matmul"}
    assert failed["qualify.h2d"].title == "GPU 0 host to device: 3.1 of 63 GB/s (5%, floor 45%)"
    assert failed["qualify.matmul"].evidence["ratio"] == 0.41
    assert failed["qualify.pcie"].title == "GPU 0 PCIe link under load: x4 gen 3 of x16 gen 5"
    assert "re-rent" in failed["qualify.verdict"].fix


def test_peers_and_all_reduce_take_nvlink_when_it_is_up_else_the_pcie_link():
    measured = h200_measured()
    measured["gpus"].append(dict(measured["gpus"][0], index=1))
    measured["peers"] = [{"src": 0, "dst": 1, "gbps": 380.0, "p2p": True}, {"src": 1, "dst": 0, "gbps": 12.0, "p2p": False}]
    measured["allreduce"] = {"gpus": 2, "bytes": 1 << 28, "busbw_gbps": 300.0}
    facts = {"gpu": {"devices": [{"index": 0, "name": "NVIDIA H200"}, {"index": 1, "name": "NVIDIA H200"}]},
             "links": {"nvlink": {"0": {"active": 18, "inactive": 0}}}}
    rows = _rows(rules.judge(measured, facts)[0])
    assert rows["peer GPU 0 -> GPU 1"] == (0.84, "keep") and rows["peer GPU 1 -> GPU 0"] == (0.03, "return")
    assert rows["all-reduce bus bandwidth, 2 GPUs"] == (0.67, "keep")
    pcie_only = _rows(rules.judge(measured, dict(facts, links={"nvlink": {}}))[0])
    assert pcie_only["peer GPU 1 -> GPU 0"] == (0.19, "return")  # of 63 GB/s: a copy through host memory


def test_without_torch_or_a_known_model_the_box_is_neither_kept_nor_returned():
    measured = h200_measured()
    measured["gpus"] = []
    measured["not_measured"] = [{"what": "GPU: matmul, memory, host copies, peers, all-reduce",
                                 "why": "torch cannot be imported here (ModuleNotFoundError)"}]
    judged, findings = rules.judge(measured, {})
    assert judged["verdict"] == "unmeasured" and {r["kind"] for r in judged["rows"]} == {"disk"}
    assert any(f.id == "qualify.unmeasured" and "ModuleNotFoundError" in f.evidence["why"] for f in findings)
    odd = h200_measured(name="NVIDIA B300")
    judged, findings = rules.judge(odd, {"gpu": {"devices": [{"index": 0, "name": "NVIDIA B300"}]}})
    assert judged["verdict"] == "unmeasured" and judged["unknown_models"] == ["NVIDIA B300"]


def test_a_slow_disk_returns_the_box():
    measured = h200_measured()
    measured["disks"][0].update(read_mbps=50.0)
    judged, findings = rules.judge(measured, FACTS)
    assert judged["verdict"] == "return" and _rows(judged)["data_dir read (/data)"] == (0.25, "return")


@pytest.mark.parametrize("name,model", [("NVIDIA H200", "H200"), ("NVIDIA H200 NVL", "H200-NVL"),
                                        ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H100 PCIe", "H100-PCIe"),
                                        ("NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"),
                                        ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
                                        ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("Tesla T4", None)])
def test_each_model_finds_its_own_row_and_every_row_cites_a_source(name, model):
    assert rules.model_for(name)[0] == model
    for key, row in rules.references()["models"].items():
        assert row["source"] and set(row["matmul_tflops"]) == set(onbox.DTYPES), key


def test_what_a_box_sends_is_bounded():
    bad = h200_measured(memory_gbps=float("inf"))
    with pytest.raises(errors.BadAnswer, match="memory_gbps"):
        ops.checked(bad, "box")
    bad = h200_measured(matmul_tflops={"bfloat16": "fast"})
    with pytest.raises(errors.BadAnswer, match="matmul"):
        ops.checked(bad, "box")
    bad = h200_measured()
    bad["disks"][0]["path"] = "/x" * 1000
    with pytest.raises(errors.BadAnswer, match="characters"):
        ops.checked(bad, "box")


def test_the_verdict_is_kept_per_host(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path))
    judged, _ = rules.judge(h200_measured(h2d_gbps=3.1), FACTS)
    qualifystore.record("riser-box", judged, ["NVIDIA H200"], now=1000.0)
    assert qualifystore.verdict("riser-box") == {"verdict": "return", "at": 1000.0, "models": ["NVIDIA H200"],
                                                 "failed": ["host to device"]}
    assert qualifystore.verdict("other") is None
    (tmp_path / "qualify.json").write_text('{"riser-box": {"verdict": "sell", "at": 1}}')
    assert qualifystore.verdict("riser-box") is None


def test_the_measuring_calls_run_with_real_torch_on_a_cpu_device():
    torch = pytest.importorskip("torch")
    assert onbox.matmul(torch, "cpu", "bfloat16", n=64) >= 0 and onbox.matmul(torch, "cpu", "tf32", n=64) >= 0
    assert torch.backends.cuda.matmul.allow_tf32 is False, "the tf32 setting is put back"
    assert onbox.memory_bandwidth(torch, "cpu", n=1 << 20) > 0
    assert onbox.peer(torch, "cpu", "cpu", n=1 << 20) >= 0
    h2d, d2h, link = onbox.host_copies(torch, "cpu", 0, n=1 << 20, pinned=False)
    assert h2d >= 0 and d2h >= 0


def test_qualify_runs_for_real_here_measuring_the_disks_and_naming_what_it_could_not(tmp_path, monkeypatch):
    """This machine has no GPU: the run measures the named path and says the GPU figures were not
    measured; it leaves nothing behind in the directory it measured."""
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path / "state"))
    data = tmp_path / "data"
    data.mkdir()
    doc = op.preflight(LocalTarget(), paths=[str(data)], qualify=True)
    q = doc["data"]["qualify"]
    [disk] = q["measured"]["disks"]
    assert disk["path"] == str(data) and disk["bytes"] == 256 << 20 and disk["read_mbps"] > 0 and disk["write_mbps"] > 0
    assert list(data.iterdir()) == []
    assert q["verdict"] == "unmeasured" and any("GPU" in n["what"] for n in q["not_measured"])
    assert qualifystore.verdict("local")["verdict"] == "unmeasured"


def _fleet_row(host, qualify=None):
    return {"host": host, "ok": True, "error": None, "qualify": qualify, "jobs_running": 0, "running_jobs": [],
            "running_gpus": [], "devices": [{"index": 0, "name": "NVIDIA H200", "util_peak_pct": 0.0,
                                             "memory_used_mib": 0.0, "memory_total_mib": 143771.0}]}


def test_placement_passes_over_a_box_that_qualify_returned():
    from gpuops import placement

    returned = {"verdict": "return", "at": 1000.0, "models": ["NVIDIA H200"], "failed": ["host to device"]}
    got = placement.place([_fleet_row("riser-box", returned), _fleet_row("good-box", {"verdict": "keep", "at": 1.0})],
                          placement.request(1))
    assert got["host"] == "good-box"
    [passed] = [b for b in got["boxes"] if b["host"] == "riser-box"]
    assert passed["verdict"] == "passed" and "returned by preflight --qualify (host to device)" in passed["why"]
    alone = placement.place([_fleet_row("riser-box", returned)], placement.request(1))
    assert alone["host"] is None


def test_fleet_shows_the_kept_verdict_of_each_box(tmp_path, monkeypatch):
    from gpuops.fleetfile import Box
    from gpuops.ops import fleet
    from gpuops.render import fleet as render

    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path))
    judged, _ = rules.judge(h200_measured(h2d_gbps=3.1), FACTS)
    qualifystore.record("riser-box", judged, ["NVIDIA H200"], now=1000.0)
    row = fleet.row(Box(alias="riser-box"), error={"kind": "unreachable", "message": "no route"})
    assert row["qualify"]["verdict"] == "return" and fleet.row(Box(alias="other"), error=row["error"])["qualify"] is None
    shown = dict(row, ok=True, gpu_present=True, gpu_error=None, gpus=[{"model": "NVIDIA H200", "count": 1}])
    assert render._gpus(shown) == "1x H200 (qualify: return)"


class CudaOnCpu:
    """torch as a box with two CUDA devices would show it, every tensor on this machine's CPU: the
    measuring run's own steps (which GPU, which pair, what it records) are the code under test."""

    def __init__(self, torch):
        import types

        self._torch = torch
        self.version = types.SimpleNamespace(cuda="13.0")
        self.__version__ = torch.__version__

        def all_reduce(tensors):
            total = sum(tensors)
            for t in tensors:
                t.copy_(total)

        self.cuda = types.SimpleNamespace(
            is_available=lambda: True, device_count=lambda: 2, get_device_name=lambda i: "NVIDIA H200",
            synchronize=lambda d=None: None, can_device_access_peer=lambda a, b: True, empty_cache=lambda: None,
            nccl=types.SimpleNamespace(version=lambda: (2, 28, 9), all_reduce=all_reduce))

    def device(self, *args):
        return self._torch.device("cpu")

    def __getattr__(self, name):
        real = getattr(self._torch, name)
        if name in ("empty", "randn", "ones"):
            return lambda *a, **kw: real(*a, **dict(kw, device="cpu"))
        return real


def test_the_measuring_run_walks_every_gpu_and_pair(monkeypatch):
    torch = pytest.importorskip("torch")
    fake = CudaOnCpu(torch)
    monkeypatch.setattr(onbox, "_torch", lambda: (fake, None))
    for name, value in (("MATMUL_N", 32), ("MEMORY_BYTES", 1 << 16), ("COPY_BYTES", 1 << 16),
                        ("ALLREDUCE_FLOATS", 1 << 10), ("MIN_TIMED_S", 0.01)):
        monkeypatch.setattr(onbox, name, value)
    doc = {"torch": {"version": None, "cuda": None, "nccl": None, "error": None}, "gpus": [], "peers": [],
           "allreduce": None, "disks": [], "not_measured": []}
    onbox.gpus(doc, onbox.Clock(60))
    assert doc["torch"]["nccl"] == "2.28.9" and [g["index"] for g in doc["gpus"]] == [0, 1]
    assert set(doc["gpus"][0]["matmul_tflops"]) == set(onbox.DTYPES) and doc["gpus"][1]["memory_gbps"] is not None
    assert [(p["src"], p["dst"]) for p in doc["peers"]] == [(0, 1), (1, 0)]
    assert doc["allreduce"]["gpus"] == 2 and doc["allreduce"]["busbw_gbps"] >= 0
    # A CPU build cannot pin host memory: that one figure is named, the rest still measured.
    assert {n["what"] for n in doc["not_measured"]} <= {"GPU 0 host copies", "GPU 1 host copies"}
    ops.checked(dict(doc, seconds=1.0), "box")  # what it writes passes the workstation's bounds
    spent = onbox.Clock(0)
    doc2 = dict(doc, gpus=[], peers=[], not_measured=[])
    onbox.gpus(doc2, spent)
    assert doc2["gpus"][0]["matmul_tflops"] == {} and any("budget" in n["why"] for n in doc2["not_measured"])


def test_a_riser_box_over_ssh_is_qualified_and_fleet_shows_the_verdict(cli, rig, tmp_path):
    """The whole path on the sshd rig: the probe finds the narrow link, qualify ships and measures the
    box's disk (no GPU here), the verdict is kept under the host's name and `fleet` shows it."""
    from tests.fixtures.fakegpu.boxes import compose

    _, env = compose(tmp_path, "v2-healthy", "riser")
    box = rig.box("q-riser", env=env)
    data = tmp_path / "data"
    data.mkdir()
    r = cli("preflight", "--host", box.spec, "--qualify", "--path", str(data), "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and any(f["id"] == "gpu.pcie" and f["severity"] == "fail" for f in doc["findings"])
    q = doc["data"]["qualify"]
    assert [d["role"] for d in q["measured"]["disks"]] == ["path"] and q["measured"]["disks"][0]["write_mbps"] > 0
    assert q["verdict"] == "unmeasured" and list(data.iterdir()) == []
    fleet = json.loads(cli("fleet", "--host", box.spec, "--window", "0", "--json").stdout)
    [row] = fleet["data"]["hosts"]
    assert row["qualify"]["verdict"] == "unmeasured" and row["qualify"]["models"] == ["NVIDIA H100 80GB HBM3"]
