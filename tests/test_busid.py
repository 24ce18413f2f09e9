"""One GPU, one key: the bus id spellings of nvidia-smi, NVML, /proc and the kernel log agree."""

import pytest

from gpuops.checks.gpu import device_for_bus
from gpuops.onbox.host import busid

SPELLINGS = {
    "nvidia-smi": "00000000:3B:00.0",    # --query-gpu=pci.bus_id
    "nvml": b"00000000:3B:00.0",         # nvmlDeviceGetPciInfo().busId (bytes in older pynvml)
    "nvml legacy": "0000:3B:00.0",       # busIdLegacy
    "proc": "0000:3b:00.0",              # /proc/driver/nvidia/gpus/<here>
    "kernel log": "PCI:0000:3b:00",      # NVRM: Xid (PCI:0000:3b:00): 79, ...
    "old driver": "0000:3b:00",          # NVRM: Xid (0000:3b:00): 13, ...
}


def test_every_spelling_of_one_gpu_gives_the_same_key():
    keys = {where: busid.key(text) for where, text in SPELLINGS.items()}
    assert set(keys.values()) == {"0000:3b:00"}, keys
    assert busid.proc_name(SPELLINGS["nvidia-smi"]) == "0000:3b:00.0"


@pytest.mark.parametrize("other", ["00000000:3C:00.0", "00000001:3B:00.0", "0000:3b:01.0"])
def test_different_gpus_get_different_keys(other):
    assert busid.key(other) != busid.key(SPELLINGS["nvidia-smi"])


def test_no_address_no_key():
    assert busid.key(None) is None and busid.key("GPU-8f3a1c2e") is None and busid.proc_name("") is None


def test_the_kernel_log_finds_the_gpu_nvidia_smi_listed():
    devices = [{"index": 0, "bus_id": "00000000:1B:00.0"}, {"index": 1, "bus_id": SPELLINGS["nvidia-smi"]}]
    assert device_for_bus(devices, SPELLINGS["kernel log"])["index"] == 1
    assert device_for_bus(devices, "PCI:0000:5e:00") is None
