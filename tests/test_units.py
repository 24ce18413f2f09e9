"""One formatter per quantity: every screen shows durations and sizes the same way; and durations
are read back the one way every flag takes them."""

import pytest

from gpuops.units import duration, gib, human_bytes, parse_duration


def test_duration_words():
    assert [duration(s) for s in (5, 125, 3 * 3600 + 300, 3 * 86400)] == ["5s", "2m 05s", "3h 05m", "3d 00h"]
    assert duration(None) == "unknown" and duration(-3) == "0s"


def test_bytes_in_binary_units():
    assert [human_bytes(n) for n in (None, 12, 1536, 5 * 1024 ** 3)] == ["?", "12 B", "1.5 KiB", "5.0 GiB"]
    assert gib(None) is None and gib(3 * 1024 ** 3 // 2) == 1.5


# ---------------------------------------------------------------- durations people write


@pytest.mark.parametrize("text,seconds", [
    ("90", 90), ("1.5", 1.5), (" 15s ", 15), ("10m", 600), ("4h", 14400), ("2d", 172800),
    ("1h30m", 5400), ("2m30s", 150), ("1d2h3m4s", 93784), ("1.5m", 90), ("4H", 14400), ("0", 0), (90, 90),
])
def test_a_duration_takes_seconds_or_a_unit(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["10x", "-5", "m", "", None, "1 h", "30m1h", "1h1h", "1h30", "nan", "inf", "1e3",
                                  "10ms", "4 hours"])
def test_a_duration_that_does_not_parse_is_refused_not_guessed(text):
    """The bug this prevents: `--stall-after 30m1h` or `--max-runtime 1h30` read as something else
    kills a healthy run early or never fires; each is refused, naming the forms that work."""
    with pytest.raises(ValueError) as e:
        parse_duration(text)
    assert "15s, 10m, 4h, 1h30m" in str(e.value)


def test_a_long_bad_duration_is_cut_in_the_message():
    with pytest.raises(ValueError) as e:
        parse_duration("9" * 30 + "x" * 100)
    assert len(str(e.value)) < 200 and "..." in str(e.value)
