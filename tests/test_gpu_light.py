"""Light GPU readings (gpuops.onbox.gpu_light) against the fake nvidia-smi, which refuses every
field a real driver 580 refuses."""

from gpuops.onbox import gpu_light
from tests.fixtures.fakegpu.boxes import compose


def _box(tmp_path, monkeypatch, scenario="healthy"):
    _, env = compose(tmp_path, "v2-healthy", scenario)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_minor_numbers_come_from_the_driver_not_from_a_csv_field(tmp_path, monkeypatch):
    """The bug: the light query asked nvidia-smi for `minor_number`, which driver 580 refuses, so a
    box without pynvml had no GPU reading at all for reap's idle window or the fleet view."""
    _box(tmp_path, monkeypatch)
    doc = gpu_light.read_smi(apps=True, names=True)
    assert doc["error"] is None
    assert [(d["index"], d["minor"], d["name"]) for d in doc["devices"]] == [
        (0, 0, "NVIDIA H100 80GB HBM3"), (1, 1, "NVIDIA H100 80GB HBM3")]


def test_a_field_the_driver_refuses_is_an_error_not_an_empty_reading(tmp_path, monkeypatch):
    _box(tmp_path, monkeypatch)
    monkeypatch.setattr(gpu_light, "FIELDS", gpu_light.FIELDS + [("minor_number", "minor", int)])
    doc = gpu_light.read_smi(apps=False)
    assert doc["devices"] == []
    assert doc["error"] == 'nvidia-smi --query-gpu: Field "minor_number" is not a valid field to query.'


def test_reader_under_the_overlay_samples_through_nvidia_smi(tmp_path, monkeypatch):
    _box(tmp_path, monkeypatch)
    reader = gpu_light.Reader()
    first, peak, samples = gpu_light.sample(reader, 0)
    assert reader.nvml is None and samples == 1
    assert peak == {0: 0.0, 1: 0.0}
    assert [d["minor"] for d in first["devices"]] == [0, 1]
