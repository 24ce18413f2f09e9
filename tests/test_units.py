"""One formatter per quantity: every screen shows durations and sizes the same way."""

from gpuops.units import duration, gib, human_bytes


def test_duration_words():
    assert [duration(s) for s in (5, 125, 3 * 3600 + 300, 3 * 86400)] == ["5s", "2m 05s", "3h 05m", "3d 00h"]
    assert duration(None) == "unknown" and duration(-3) == "0s"


def test_bytes_in_binary_units():
    assert [human_bytes(n) for n in (None, 12, 1536, 5 * 1024 ** 3)] == ["?", "12 B", "1.5 KiB", "5.0 GiB"]
    assert gib(None) is None and gib(3 * 1024 ** 3 // 2) == 1.5
