"""Light GPU readings (gpuops.onbox.host.gpu_light) against the fake nvidia-smi."""

from gpuops.onbox.host import gpu_light
from tests.fixtures.fakegpu.boxes import compose


def _box(tmp_path, monkeypatch, scenario="healthy"):
    _, env = compose(tmp_path, "v2-healthy", scenario)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_reader_under_the_overlay_samples_through_nvidia_smi(tmp_path, monkeypatch):
    _box(tmp_path, monkeypatch)
    reader = gpu_light.Reader()
    first, peak, samples = gpu_light.sample(reader, 0)
    assert reader.nvml is None and samples == 1
    assert peak == {0: 0.0, 1: 0.0}
    assert [d["minor"] for d in first["devices"]] == [0, 1]
