"""The real-GPU proof's pure parts (scripts/gpuproof: the nvidia-smi XML reader, the comparisons, the
report) on what a real driver printed, and the script's refusal on a machine without a GPU."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuops.checks import gpu as gpu_checks

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from gpuproof import compare, report, smixml  # noqa: E402

REAL_580 = ROOT / "tests" / "fixtures" / "nvidia-smi-580"


@pytest.fixture(scope="module")
def h200():
    return smixml.parse((REAL_580 / "q-x.xml").read_text())


def test_the_full_report_of_a_real_h200_reads_as_the_probe_document(h200):
    [d] = h200["devices"]
    assert (h200["driver"], h200["cuda_max"]) == ("580.159.04", "13.0")
    assert (d["name"], d["bus_id"], d["minor"], d["memory_total_mib"], d["memory_used_mib"]) == (
        "NVIDIA H200", "00000000:00:06.0", 0, 143771.0, 0.0)
    assert (d["sm_clock_max_mhz"], d["power_limit_w"], d["throttle_mask"]) == (1980.0, 700.0, 0x1)
    assert (d["ecc_dbe_volatile"], d["remap_failure"], d["remap_pending"]) == (0, False, False)
    assert d["retired_pages_dbe"] is None, "Hopper remaps rows; page retirement is N/A"
    assert d["slowdown_temp_c"] == 89.0, "T.Limit offsets: 38 + 49 - (-2), NVML's threshold on that GPU"


def test_older_drivers_throttle_block_and_absolute_slowdown():
    xml = ("<nvidia_smi_log><driver_version>535.104.05</driver_version><gpu id='00000000:3B:00.0'>"
           "<temperature><gpu_temp>91 C</gpu_temp><gpu_temp_slow_threshold>87 C</gpu_temp_slow_threshold></temperature>"
           "<clocks_throttle_reasons><clocks_throttle_reason_hw_slowdown>Active</clocks_throttle_reason_hw_slowdown>"
           "<clocks_throttle_reason_sw_thermal_slowdown>Active</clocks_throttle_reason_sw_thermal_slowdown>"
           "</clocks_throttle_reasons><ecc_errors><volatile><double_bit><total>3</total></double_bit></volatile>"
           "</ecc_errors><processes><process_info><pid>41</pid><used_memory>512 MiB</used_memory></process_info>"
           "</processes></gpu></nvidia_smi_log>")
    doc = smixml.parse(xml)
    [d] = doc["devices"]
    assert d["bus_id"] == "00000000:3B:00.0" and d["slowdown_temp_c"] == 87.0
    assert d["throttle_mask"] == 0x8 | 0x20 and d["ecc_dbe_volatile"] == 3
    assert doc["processes"] == [{"pid": 41, "name": None, "used_mib": 512.0, "bus_id": "00000000:3B:00.0",
                                 "type": None}]


def test_text_that_is_not_the_report_is_refused():
    with pytest.raises(ValueError, match="not <nvidia_smi_log>"):
        smixml.parse("<html/>")
    with pytest.raises(ValueError, match="did not print XML"):
        smixml.parse("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def _verdicts(rows):
    return dict(((r["scope"], r["field"]), r["verdict"]) for r in rows)


def test_nvml_counting_reserved_memory_as_used_is_a_mismatch(h200):
    """What the first run on the H200 found: NVML's first memory query said 615 MiB in use on an idle
    GPU where nvidia-smi says 0 (616 MiB reserved by the driver)."""
    ours = copy.deepcopy(h200)
    ours["devices"][0]["memory_used_mib"] = 615.06
    got = _verdicts(compare.devices(ours, h200))
    assert got[("GPU 0 (0000:00:06)", "memory_used_mib")] == compare.MISMATCH
    assert got[("GPU 0 (0000:00:06)", "name")] == compare.MATCH
    assert got[("GPU 0 (0000:00:06)", "retired_pages_dbe")] == compare.NEITHER
    assert got[("GPU 0 (0000:00:06)", "power_w")] == compare.SHOWN
    assert got[("box", "driver")] == compare.MATCH


def test_a_value_gpuops_misses_is_a_mismatch_one_the_reference_lacks_is_unconfirmed(h200):
    ours, ref = copy.deepcopy(h200), copy.deepcopy(h200)
    ours["devices"][0]["slowdown_temp_c"] = None
    ref["devices"][0]["minor"] = None
    got = _verdicts(compare.devices(ours, ref))
    assert got[("GPU 0 (0000:00:06)", "slowdown_temp_c")] == compare.MISMATCH
    assert got[("GPU 0 (0000:00:06)", "minor")] == compare.UNCONFIRMED


def test_a_gpu_one_side_lacks_and_an_unjudged_throttle_bit(h200):
    ours = copy.deepcopy(h200)
    ours["devices"][0]["throttle_mask"] = 0x1 | 0x4  # idle and power cap: neither is a verdict
    extra = dict(ours["devices"][0], bus_id="00000000:07:00.0", index=1)
    ours["devices"].append(extra)
    got = _verdicts(compare.devices(ours, h200))
    assert got[("GPU 0 (0000:00:06)", "throttle_mask")] == compare.MATCH
    assert got[("0000:07:00", "present")] == compare.MISMATCH


def test_processes_pair_by_pid_and_gpu():
    bus = "00000000:00:06.0"
    a = {"processes": [{"pid": 701, "bus_id": bus, "used_mib": 1634.0}, {"pid": 718, "bus_id": bus, "used_mib": 4706.0}]}
    b = {"processes": [{"pid": 701, "bus_id": "0000:00:06.0", "used_mib": 1634.0}]}
    got = _verdicts(compare.processes(a, b))
    assert got == {("pid 701 on 0000:00:06", "used_mib"): compare.MATCH,
                   ("pid 718 on 0000:00:06", "listed"): compare.MISMATCH}


def test_verdicts_differ_when_the_reference_sees_a_hot_gpu(h200):
    facts = {"gpu": copy.deepcopy(h200)}
    hot = copy.deepcopy(h200)
    hot["devices"][0]["temp_c"] = 88.0
    rows = compare.verdicts(facts, hot)
    temp = [r for r in rows if r["field"] == "gpu.temperature"]
    assert [r["verdict"] for r in temp] == [compare.MISMATCH]
    assert temp[0]["reference"]["severity"] == "warn" and temp[0]["gpuops"]["severity"] == "ok"
    same = compare.verdicts(facts, h200)
    assert {r["field"] for r in same} >= {"gpu.none", "gpu.throttle", "gpu.temperature", "gpu.ecc"}
    assert not compare.failures(same)
    assert len(gpu_checks.CHECKS) == 5, "a new GPU check needs its row in the proof"


def _doc(ok_steps=True):
    step = {"name": "preflight-nvml", "ok": ok_steps, "seconds": 4.0, "notes": ["preflight: box looks ready"],
            "checks": [{"what": "GPU facts came from nvml", "ok": True, "detail": None},
                       {"what": "the probe's light CSV query is accepted", "ok": ok_steps,
                        "detail": 'Field "minor_number" is not a valid field to query.'}],
            "rows": [{"scope": "GPU 0", "field": "memory_used_mib", "gpuops": 615.06, "reference": 0.0,
                      "rule": "mib 256", "verdict": compare.MATCH if ok_steps else compare.MISMATCH}],
            "error": None}
    skipped = {"name": "telemetry", "ok": True, "skipped": True, "seconds": 0, "notes": [], "checks": [],
               "rows": [], "error": None}
    return {"total_s": 46.3, "budget_s": 300.0, "steps": [step, skipped],
            "machine": {"gpus": ["GPU 0: NVIDIA H200 (UUID: GPU-x)"], "torch": "2.11.0+cu130"}}


def test_report_says_failed_first_and_shows_each_mismatch():
    text = report.markdown(_doc(ok_steps=False))
    assert text.splitlines()[2].startswith("**FAILED** in 46 s")
    assert "| preflight-nvml | FAILED | 4.0 | 1/2 | 1 of 1 |" in text
    assert "| telemetry | skipped |" in text
    assert "✗ the probe's light CSV query is accepted: `Field \"minor_number\" is not a valid field to query.`" in text
    assert "| GPU 0 | memory_used_mib | 615.06 | 0 | mib 256 | MISMATCH |" in text


def test_report_of_a_clean_run_passes():
    assert report.markdown(_doc()).splitlines()[2].startswith("**PASSED** in 46 s (budget 300 s)")


def test_without_a_gpu_the_proof_stops_at_once_with_exit_4(tmp_path):
    env = dict(os.environ, PATH="/usr/bin:/bin")
    r = subprocess.run([str(ROOT / "scripts" / "gpu-proof"), str(tmp_path / "out")], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 4
    assert r.stderr == "gpu-proof: no NVIDIA GPU on this machine: nvidia-smi is not on PATH\n"
    assert not (tmp_path / "out").exists()


def test_the_training_workloads_progress_lines_are_read_by_triage(tmp_path, real_processes):
    """The proof's CUDA training program, run on the CPU here: its lines are ones gpuops' progress
    reader understands, so on the GPU a miss is gpuops', not the workload's."""
    env = dict(os.environ, GPUPROOF_DEVICE="cpu")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpuproof" / "workloads" / "train.py"), "50",
                        str(tmp_path / "ckpt.pt"), "16"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    log = tmp_path / "train.log"
    log.write_text(r.stdout)
    t = subprocess.run([sys.executable, "-m", "gpuops", "triage", "--log", str(log), "--json"], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    data = json.loads(t.stdout)["data"]
    # "step 25/50" .. "step 50/50", read 0-indexed as the triage procedure counts: steps 24 .. 49 done
    assert (data["progress"]["first_step"], data["progress"]["last_step"]) == (24, 49)


def test_the_facts_step_asks_the_fake_for_the_fields_gpuops_reads(tmp_path, monkeypatch, real_processes):
    """The proof's first step names gpuops' CSV field lists; a module that moved them (gpu_light's to
    smi.py) broke it on the GPU, where a retry costs device minutes. The fake refuses any field the
    real nvidia-smi does not list, as the real one does."""
    from gpuproof import run
    from tests.fixtures.fakegpu.boxes import compose

    _, env = compose(tmp_path, "v2-healthy", "healthy")
    monkeypatch.setenv("PATH", env["PATH"])
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    p = run.Proof(tmp_path / "proof")
    rec = p.step("facts", lambda rec: run.step_facts(p, rec))
    assert rec["error"] is None, rec["error"]
    csv = [c for c in rec["checks"] if "CSV query" in c["what"]]
    assert len(csv) == 3 and all(c["ok"] for c in csv), csv


def test_the_qualify_step_compares_with_the_datasheet_a_second_opinion_and_the_xml(h200):
    from gpuproof import qualify

    rows = qualify.datasheet_rows({"rows": [
        {"gpu": 0, "what": "matmul bfloat16", "measured": 783.2, "reference": 989.5, "ratio": 0.79, "floor": 0.5,
         "verdict": "keep"},
        {"gpu": 0, "what": "host to device", "measured": 3.1, "reference": 63.0, "ratio": 0.05, "floor": 0.45,
         "verdict": "return"},
        {"kind": "disk", "gpu": None, "what": "home read (~)", "measured": 90.0, "reference": 200.0, "ratio": 0.45,
         "floor": 1.0, "verdict": "return"}]})
    assert [r["verdict"] for r in rows] == [compare.MATCH, compare.MISMATCH, compare.SHOWN]
    measured = {"gpus": [{"matmul_tflops": {"bfloat16": 783.2}, "h2d_gbps": 43.8, "memory_gbps": 4210.2}]}
    second = qualify.opinion_rows(measured, {"bf16_tflops": 760.0, "h2d_gbps": 30.0, "memory_gbps": 4100.0})
    assert [r["verdict"] for r in second] == [compare.MATCH, compare.MISMATCH, compare.MATCH]
    links = {"devices": [{"index": 0, "gen_max": 5, "gen_gpumax": 5, "width_max": 16}]}
    xml = (REAL_580 / "q-x.xml").read_text()
    assert {r["field"]: r["verdict"] for r in qualify.link_rows(links, xml)} == {
        "gen_max": compare.MATCH, "gen_gpumax": compare.MATCH, "width_max": compare.MATCH}
    links["devices"][0]["width_max"] = 4
    assert compare.failures(qualify.link_rows(links, xml))


def test_the_qualify_step_runs_to_its_end_without_a_gpu(tmp_path, monkeypatch, real_processes):
    """Here preflight --qualify measures only the disk: the step must record that, not break (a step
    that raises on the GPU costs device minutes to find)."""
    from gpuproof import qualify, run
    from tests.fixtures.fakegpu.boxes import compose

    _, env = compose(tmp_path, "v2-healthy", "healthy")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    p = run.Proof(tmp_path / "proof")
    rec = p.step("qualify", lambda rec: qualify.step_qualify(p, rec, run.check, run.WORKLOADS))
    assert rec["error"] is None, rec["error"]
    got = {c["what"]: c["ok"] for c in rec["checks"]}
    assert got["preflight --qualify printed an envelope"] and got["preflight read every GPU's link"] is False
    assert got["the link CSV query is accepted"] and got["preflight's P2P matrix is what topo -p2p r prints"]
    assert got["every GPU figure is at or above its datasheet floor"] is False
    assert got["every GPU figure was measured"] is False
