"""nvidia-smi's CSV answers read without NVML (gpuops.onbox.host.smi) against the fake nvidia-smi, which
refuses every field a real driver 580 refuses."""

from gpuops.onbox.host import smi
from tests.test_gpu_light import _box


def test_minor_numbers_come_from_the_driver_not_from_a_csv_field(tmp_path, monkeypatch):
    """The bug: the light query asked nvidia-smi for `minor_number`, which driver 580 refuses, so a
    box without pynvml had no GPU reading at all for reap's idle window or the fleet view."""
    _box(tmp_path, monkeypatch)
    doc = smi.read_smi(apps=True, names=True)
    assert doc["error"] is None
    assert [(d["index"], d["minor"], d["name"]) for d in doc["devices"]] == [
        (0, 0, "NVIDIA H100 80GB HBM3"), (1, 1, "NVIDIA H100 80GB HBM3")]


def test_a_field_the_driver_refuses_is_an_error_not_an_empty_reading(tmp_path, monkeypatch):
    _box(tmp_path, monkeypatch)
    monkeypatch.setattr(smi, "FIELDS", smi.FIELDS + [("minor_number", "minor", int)])
    doc = smi.read_smi(apps=False)
    assert doc["devices"] == []
    assert doc["error"] == 'nvidia-smi --query-gpu: Field "minor_number" is not a valid field to query.'
