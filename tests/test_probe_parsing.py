"""The probe's parsers and its NVML choke point, on text and objects shaped like the real ones."""

import time
from pathlib import Path

from gpuops.onbox.host import gpu, kernlog, smi
from tests.fixtures.fakegpu import fields


def test_xid_lines_of_every_driver_generation():
    doc = kernlog.scan([
        "[ 10.1] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "[ 11.2] NVRM: Xid (0000:03:00): 14, Channel 00000001",
        "[ 12.3] NVRM: Xid (PCI:0000:3B:00): 79, pid=12, name=x, GPU has fallen off the bus.",
        "[ 13.4] NVRM: GPU 0000:af:00.0: GPU has fallen off the bus.",
        "[ 14.5] NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000)",
        "[ 15.6] nvidia 0000:3b:00.0: enabling device (0000 -> 0003)",
    ])
    assert [(x["code"], x["pci"], x["count"]) for x in doc["xid"]] == [
        (14, "0000:03:00", 1), (79, "0000:3b:00", 2), (149, "0018:01:00", 1)]
    assert [f["pci"] for f in doc["fallen_off_bus"]] == ["0000:af:00"]


def test_oom_lines_global_memcg_and_old_kernels():
    doc = kernlog.scan([
        "Out of memory: Killed process 101 (python) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB",
        "Memory cgroup out of memory: Killed process 202 (pt_data_worker) total-vm:1kB, anon-rss:1kB",
        "Killed process 303 (java) total-vm:1kB, anon-rss:1kB, file-rss:0kB",
        "oom_reaper: reaped process 101 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
    ])
    assert [(o["pid"], o["comm"], o["kind"]) for o in doc["oom_kills"]] == [
        (101, "python", "global"), (202, "pt_data_worker", "cgroup"), (303, "java", "global")]


def test_file_log_without_banner_is_cut_at_btime():
    now = time.time()
    btime = now - 3600
    old = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(btime - 86400))
    new = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(btime + 60))
    lines = [f"{old}.1+00:00 box kernel: NVRM: Xid (PCI:0000:3b:00): 48, x",
             f"{new}.1+00:00 box kernel: NVRM: Xid (PCI:0000:3b:00): 31, x",
             "a line without any timestamp is kept"]
    assert kernlog.since_boot(lines, btime, now) == lines[1:]


def test_csv_cells_not_available_become_null():
    fields = [("a", "a", float), ("b", "b", "hex"), ("c", "c", int), ("d", "d", "yesno"), ("e", "e", str)]
    rows = gpu.parse_csv("[N/A], 0x0000000000000048, [Not Supported], Yes, NVIDIA A100-SXM4-40GB\n"
                         "this line is a warning, not data\n", fields)
    assert rows == [{"a": None, "b": 0x48, "c": None, "d": True, "e": "NVIDIA A100-SXM4-40GB"}]


REAL_580 = Path(__file__).resolve().parent / "fixtures" / "nvidia-smi-580"


def test_every_csv_field_asked_is_one_a_real_nvidia_smi_lists():
    """Driver 580 refuses `minor_number` (exit 2, "not a valid field to query"), which the light
    readings asked for: reap and the fleet view then read no GPU at all on a box without pynvml."""
    listed = fields.valid("gpu")
    asked = [f for f, _, _ in gpu.CORE_FIELDS + gpu.OPTIONAL_FIELDS + smi.FIELDS + [smi.NAME_FIELD]]
    assert [f for f in asked if f not in listed] == []
    assert [f for f, _, _ in gpu.APP_FIELDS if f not in fields.valid("compute-apps")] == []
    assert 'Field "minor_number" is not a valid field to query.' in (REAL_580 / "query-gpu-minor-number.txt").read_text()


def test_probe_csv_row_of_a_real_h200_parses():
    row, = gpu.parse_csv((REAL_580 / "query-gpu-core.csv").read_text(), gpu.CORE_FIELDS + gpu.OPTIONAL_FIELDS)
    assert (row["name"], row["driver"], row["memory_total_mib"], row["compute_cap"]) == (
        "NVIDIA H200", "580.159.04", 143771.0, "9.0")
    assert row["throttle_mask"] == 0x1 and row["retired_pages_dbe"] is None and row["remap_failure"] is False


def test_temperature_report_of_driver_580_gives_slowdown_from_tlimit_offsets():
    """Driver 580 prints no "GPU Slowdown Temp" line on an H200, only T.Limit offsets; NVML said 89 C
    on the same GPU, and the offsets give 38 + 49 - (-2) = 89."""
    cuda, slow = gpu.parse_temperature_report((REAL_580 / "q-temperature.txt").read_text())
    assert (cuda, slow) == ("13.0", {"0000:00:06": 89.0})


def test_temperature_report_gives_cuda_version_and_slowdown_per_bus():
    text = ("Driver Version : 535.104.05\nCUDA Version : 12.2\n\nAttached GPUs : 1\nGPU 00000000:3B:00.0\n"
            "    Temperature\n        GPU Current Temp : 34 C\n        GPU Shutdown Temp : 92 C\n"
            "        GPU Slowdown Temp : 89 C\n        GPU Slowdown T.Limit Temp : -2 C\n")
    assert gpu.parse_temperature_report(text) == ("12.2", {"0000:3b:00": 89.0})


class FakeNVMLError(Exception):
    pass


class Struct:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FakeNvml:
    """Shaped like pynvml on a two-GPU box where GPU 1 has fallen off the bus and this pynvml
    predates remapped rows; only the calls the probe makes exist."""

    NVMLError = FakeNVMLError

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass
    def nvmlSystemGetDriverVersion(self): return b"550.54.15"
    def nvmlSystemGetCudaDriverVersion(self): return 12040
    def nvmlDeviceGetCount(self): return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        if i == 1:
            raise FakeNVMLError("GPU is lost")
        return "h0"

    def nvmlDeviceGetName(self, h): return "NVIDIA H100 80GB HBM3"
    def nvmlDeviceGetUUID(self, h): return "GPU-0"
    def nvmlDeviceGetPciInfo(self, h): return Struct(busId=b"00000000:1B:00.0")
    def nvmlDeviceGetMinorNumber(self, h): return 0
    def nvmlDeviceGetCudaComputeCapability(self, h): return (9, 0)
    def nvmlDeviceGetMemoryInfo(self, h): return Struct(total=80 * 2**30, used=2**30)
    def nvmlDeviceGetUtilizationRates(self, h): return Struct(gpu=3)
    def nvmlDeviceGetTemperature(self, h, sensor): return 40
    def nvmlDeviceGetTemperatureThreshold(self, h, kind): return 87 if kind == 1 else 92
    def nvmlDeviceGetClockInfo(self, h, clock): return 1755
    def nvmlDeviceGetMaxClockInfo(self, h, clock): return 1980
    def nvmlDeviceGetPowerUsage(self, h): raise FakeNVMLError("Not Supported")
    def nvmlDeviceGetEnforcedPowerLimit(self, h): return 700000
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h): return 0x4
    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter): return 0
    def nvmlDeviceGetRetiredPages(self, h, cause): return []
    def nvmlDeviceGetRetiredPagesPendingStatus(self, h): return 0
    def nvmlDeviceGetComputeRunningProcesses(self, h): return [Struct(pid=77, usedGpuMemory=2**30)]


def test_nvml_choke_point_degrades_per_call_and_per_gpu():
    doc, err = gpu.from_nvml(FakeNvml())
    assert err is None
    assert (doc["source"], doc["driver"], doc["cuda_max"]) == ("nvml", "550.54.15", "12.4")
    ok, lost = doc["devices"]
    assert ok["bus_id"] == "00000000:1B:00.0" and ok["compute_cap"] == "9.0" and ok["slowdown_temp_c"] == 87
    assert ok["throttle_mask"] == 0x4, "older pynvml: the throttle-reasons name is the fallback"
    assert ok["power_w"] is None and ok["unavailable"]["nvmlDeviceGetPowerUsage"] == "Not Supported"
    assert ok["remap_failure"] is None and "not in this pynvml" in ok["unavailable"]["nvmlDeviceGetRemappedRows"]
    assert ok["power_limit_w"] == 700.0 and ok["memory_used_mib"] == 1024.0
    assert lost["index"] == 1 and lost["name"] is None
    assert lost["unavailable"] == {"nvmlDeviceGetHandleByIndex": "GPU is lost"}
    assert doc["processes"] == [{"pid": 77, "name": None, "bus_id": "00000000:1B:00.0", "used_mib": 1024.0}]


def test_nvml_that_cannot_start_hands_over_to_nvidia_smi():
    class NoDriver(FakeNvml):
        def nvmlInit(self):
            raise FakeNVMLError("NVML Shared Library Not Found")

    assert gpu.from_nvml(NoDriver()) == (None, "NVML Shared Library Not Found")


class NvmlWithMemoryV2(FakeNvml):
    """pynvml 11.5+ on driver 580: version 2 of the memory query counts the driver's reserved memory
    apart (an idle H200: 143771 MiB total, 616 MiB reserved, 0 MiB used, as nvidia-smi says)."""

    nvmlMemory_v2 = 0x02000028

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        if version == self.nvmlMemory_v2:
            return Struct(total=143771 * 2**20, reserved=616 * 2**20, used=0, free=143155 * 2**20)
        return Struct(total=143771 * 2**20, used=616 * 2**20)


def test_nvml_memory_in_use_excludes_what_the_driver_reserves():
    doc, _ = gpu.from_nvml(NvmlWithMemoryV2())
    ok = doc["devices"][0]
    assert (ok["memory_total_mib"], ok["memory_used_mib"]) == (143771.0, 0.0)
    assert "nvmlDeviceGetMemoryInfo" not in ok["unavailable"]
