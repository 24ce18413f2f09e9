"""Run telemetry (gpuops.onbox.host.telemetry): rows the supervisor samples from the fake nvidia-smi
(which refuses every field a real driver 580 refuses) and the real /proc, and the judgements a
series allows: the busy-wait hang (seed 002, U21), a throttle during the run (U23), dataloader
starvation (U24/U38)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuops.onbox.host import gpu_light, ringlog, telemetry
from tests.fixtures.fakegpu.boxes import FAKEGPU, SYSTEM_PATH, compose
from tests.test_probe_parsing import FakeNvml


@pytest.fixture
def gpu_box(tmp_path, monkeypatch):
    """A box whose GPUs show `scenario`; call it again to change what they show."""
    _, env = compose(tmp_path, "v2-healthy", "training")
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    def show(scenario):
        monkeypatch.setenv("PATH", f"{FAKEGPU / scenario}:{SYSTEM_PATH}")

    return show


@pytest.fixture
def job(real_processes):
    """A real process standing for the job: idle unless asked to spin."""
    started = []

    def start(code="import time; time.sleep(60)"):
        p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()
        p.wait()


class Clock:
    def __init__(self, t=1000.0, step=10.0):
        self.t, self.step = t, step

    def __call__(self):
        self.t += self.step
        return self.t


def _rows(sampler, show, plan):
    rows = []
    for scenario, count in plan:
        show(scenario)
        rows += [sampler.take() for _ in range(count)]
    return rows


def test_a_hung_collective_reads_busy_at_idle_power_and_is_named(gpu_box, job):
    """Seed 002's signature: every rank spins in a stuck collective, so utilisation stays at 100 %
    while the power falls to near idle. A status that reads `util` alone calls it busy."""
    sampler = telemetry.Sampler(job().pid, gpus="0,1", cores=2, clock=Clock())
    rows = _rows(sampler, gpu_box, [("training", 3), ("collective-hang", 7)])
    found = telemetry.busy_wait(rows)
    assert found["signature"] == "busy-wait" and found["gotcha"] == "U21"
    assert found["gpus"] == [0, 1] and found["all_gpus"] is True
    assert found["evidence"]["0"]["power_max_w"] == 118.42 and found["evidence"]["0"]["power_limit_w"] == 700.0
    assert telemetry.busy_wait(rows[:3]) is None, "training at full power is not a hang"


def test_one_busy_wait_snapshot_is_not_a_verdict(gpu_box, job):
    """U21: never one snapshot. A single low-power reading at 100 % is a collective between steps."""
    sampler = telemetry.Sampler(job().pid, cores=2, clock=Clock())
    rows = _rows(sampler, gpu_box, [("training", 5), ("collective-hang", 1), ("training", 1)])
    assert telemetry.busy_wait(rows) is None
    assert telemetry.busy_wait(rows[5:6]) is None


def test_without_a_power_limit_the_runs_own_busy_power_is_the_yardstick():
    def row(t, util, power):
        return {"t": t, "gpus": [{"i": 0, "util": util, "power": power, "power_limit": None}]}

    busy = [row(t, 99, 610) for t in range(0, 50, 10)]
    spin = [row(t, 100, 120) for t in range(50, 120, 10)]
    assert telemetry.busy_wait(busy + spin)["evidence"]["0"]["power_busy_before_w"] == 610
    assert telemetry.busy_wait(spin) is None, "nothing to compare with: not claimed"


def test_a_throttle_during_the_run_is_reported_with_when_and_why(gpu_box, job):
    """U23: the run got slower with no error anywhere; the clocks-event mask says hardware slowdown
    and heat, for the rows it lasted. The healthy scenario's GPU-idle bit (0x1) is no throttle."""
    sampler = telemetry.Sampler(job().pid, cores=2, clock=Clock())
    rows = _rows(sampler, gpu_box, [("training", 2), ("hw-slowdown", 3), ("training", 2), ("healthy", 2)])
    (e,) = telemetry.throttled(rows)
    assert e["gpu"] == 0 and e["reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]
    assert (e["rows"], e["of_rows"]) == (3, 9)
    assert (e["first_t"], e["last_t"]) == (rows[2]["t"], rows[4]["t"])
    assert (e["sm_min_mhz"], e["temp_max_c"]) == (810.0, 88.0)


def test_a_gpu_at_its_power_cap_is_working_not_throttled():
    rows = [{"t": t, "gpus": [{"i": 0, "throttle": 0x4}]} for t in range(5)]
    assert telemetry.throttled(rows) == []


def test_gpus_idle_while_the_job_pegs_a_core_is_starvation(gpu_box, job):
    """U24/U38: a loop with num_workers=0 keeps one core at 100 % and the GPU waiting; real /proc
    CPU time of a spinning process, real time between rows."""
    sampler = telemetry.Sampler(job("while True: pass").pid, cores=1)
    gpu_box("dataloader-starved")
    rows = []
    for _ in range(4):
        rows.append(sampler.take())
        time.sleep(0.7)
    assert rows[0]["cpu"] is None and rows[-1]["cpu"] > 20, "CPU share needs a previous reading"
    found = telemetry.starved(rows, min_span_s=1.5, cpu_share=0.2, proc_pct=200)
    assert found["signature"] == "dataloader-starved" and found["gotcha"] == "U24"
    assert found["evidence"]["gpu_util_mean"] == 10.5


def test_an_idle_gpu_with_idle_cpus_is_not_starvation(gpu_box, job):
    sampler = telemetry.Sampler(job().pid, cores=1)
    gpu_box("dataloader-starved")
    rows = []
    for _ in range(3):
        rows.append(sampler.take())
        time.sleep(0.7)
    assert rows[-1]["cpu"] < 10
    assert telemetry.starved(rows, min_span_s=1.0) is None


def test_starvation_needs_a_loaded_model_and_a_busy_cpu():
    def row(t, util, mem, cpu, top):
        return {"t": t, "cpu": cpu, "cpu_top": top, "cores": 8, "gpus": [{"i": 0, "util": util, "mem": mem}]}

    pegged = [row(t, 2, 30000, 100, 99) for t in range(0, 60, 10)]
    assert telemetry.starved(pegged)["gotcha"] == "U38", "~0 % is the CPU-bound transform case"
    assert telemetry.starved([row(t, 2, 10, 100, 99) for t in range(0, 60, 10)]) is None, "no model on the GPU"
    assert telemetry.starved([row(t, 90, 30000, 700, 99) for t in range(0, 60, 10)]) is None, "GPU busy"
    all_cores = telemetry.starved([row(t, 20, 30000, 700, 90) for t in range(0, 60, 10)])
    assert all_cores["gotcha"] == "U24" and all_cores["evidence"]["cpu_mean_pct"] == 700, "7 of 8 cores busy"


def test_the_jobs_tree_includes_an_orphan_still_in_its_group(job):
    """A child the job orphaned is re-parented away from the job's leader: counted by descendants
    alone, its CPU and memory would vanish from the job's telemetry."""
    leader = subprocess.Popen(["bash", "-c", "(sleep 30 &) ; sleep 30 & wait"], start_new_session=True)
    try:
        deadline = time.time() + 10
        while time.time() < deadline and len(telemetry.members(leader.pid, leader.pid)) < 3:
            time.sleep(0.05)
        tree = telemetry.members(leader.pid, leader.pid)
        assert len(tree) == 3 and leader.pid in tree
        assert len(telemetry.members(leader.pid)) == 2, "the orphan is not a descendant of the leader"
        assert all(telemetry.rss_bytes(p) > 0 for p in tree)
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()


def test_workers_in_sessions_of_their_own_are_found_through_the_supervisor_that_adopted_them():
    """torchrun starts every worker with start_new_session: when torchrun dies, its workers are in
    no group of the job's and under no process of it but the supervisor (a child subreaper)."""
    supervisor = subprocess.Popen(["bash", "-c", "setsid sleep 30 & setsid sleep 30 & sleep 30"])
    try:
        deadline = time.time() + 10
        while time.time() < deadline and len(telemetry.members(-1, adopted_by=supervisor.pid)) < 3:
            time.sleep(0.05)
        workers = telemetry.members(-1, adopted_by=supervisor.pid)
        assert len(workers) == 3 and supervisor.pid not in workers
        assert telemetry.members(-1, adopted_by=supervisor.pid, exclude=workers[:1]) == workers[1:]
    finally:
        for pid in telemetry.members(-1, adopted_by=supervisor.pid):
            os.kill(pid, 9)
        supervisor.wait()


def test_rows_keep_only_the_jobs_own_gpus(gpu_box, job):
    sampler = telemetry.Sampler(job().pid, gpus="1", cores=1, clock=Clock())
    assert [g["i"] for g in sampler.take()["gpus"]] == [1]
    sampler.gpus = "GPU-0a1b2c3d-0000-4000-8000-000000000000"
    assert [g["i"] for g in sampler.take()["gpus"]] == [0]


def test_a_box_without_nvidia_smi_still_records_the_jobs_cpu(tmp_path, monkeypatch, job):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("GPUOPS_ROOT", str(tmp_path))
    recorder = telemetry.Recorder(str(tmp_path), telemetry.Sampler(job().pid, cores=1))
    row = recorder.tick()
    assert row["gpus"] == [] and row["src"] == "nvidia-smi" and "not found on PATH" in row["gpu_error"]
    assert row["nproc"] == 1 and row["rss"] > 0
    assert telemetry.latest(str(tmp_path)) == row


def test_nvml_readings_degrade_per_value_not_per_row(job):
    """Through NVML the same row keys come back; a call this pynvml lacks or a GPU that fell off
    the bus leaves None where that value goes."""
    reader = gpu_light.Reader()
    reader.nvml = FakeNvml()
    row = telemetry.Sampler(job().pid, reader=reader, cores=1, clock=Clock()).take()
    ok, lost = row["gpus"]
    assert row["src"] == "nvml"
    assert (ok["power"], ok["power_limit"], ok["throttle"], ok["sm"]) == (None, 700.0, 0x4, 1755)
    assert lost["i"] == 1 and lost["util"] is None


class _Rows:
    def __init__(self):
        self.n = 0

    def take(self):
        self.n += 1
        return {"t": float(self.n), "cpu": 1.0, "gpus": [{"i": i, "util": 50.0, "mem": 1000.0} for i in range(8)]}


def test_the_recorder_keeps_its_file_bounded_and_samples_on_its_interval(tmp_path):
    recorder = telemetry.Recorder(str(tmp_path), _Rows(), interval_s=5, max_bytes=16 << 10, max_rows=1000)
    taken = [recorder.tick(now=t) for t in range(0, 5000)]
    assert sum(1 for r in taken if r) == 1000, "one row per 5 s"
    assert os.path.getsize(tmp_path / telemetry.FILE) <= 16 << 10
    rows = telemetry.series(str(tmp_path))
    assert rows[-1]["t"] == 1000.0 and rows == sorted(rows, key=lambda r: r["t"])
    assert telemetry.series(str(tmp_path), since=990.0)[0]["t"] == 990.0


def test_a_recorder_whose_disk_refuses_keeps_going(tmp_path):
    recorder = telemetry.Recorder(str(tmp_path / "removed"), _Rows())
    assert recorder.tick(now=0) is None and "No such file" in recorder.error
    os.mkdir(tmp_path / "removed")
    assert recorder.tick(now=10)["t"] == 2.0 and recorder.error is None
    assert ringlog.last(str(tmp_path / "removed" / telemetry.FILE))["t"] == 2.0


def _real(name):
    path = Path(__file__).parent / "fixtures" / "telemetry" / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_real_h200_spinning_in_a_kernel_reads_as_the_busy_wait_hang():
    """The GPU proof's series (scripts/gpu-proof, driver 580.159.04): torch.cuda._sleep spinning after
    one step, sampled by the supervisor through nvidia-smi: 99-100 % busy at 122 W of 700 W."""
    found = telemetry.busy_wait(_real("h200-spin-580.jsonl"))
    assert found and found["gotcha"] == "U21" and found["gpus"] == [0]
    assert found["evidence"]["0"]["power_max_w"] < 0.4 * 700


def test_a_real_h200_holding_memory_idle_is_no_hang():
    """The same proof's VRAM holder: memory held, no kernels: 0 % busy, which is idle, not a hang."""
    rows = _real("h200-idle-holder-580.jsonl")
    assert telemetry.busy_wait(rows) is None and telemetry.throttled(rows) == []
