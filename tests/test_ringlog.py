"""The bounded JSON-lines file a run's telemetry and events live in (gpuops.onbox.host.ringlog)."""

import json
import os

import pytest

from gpuops.onbox.host import ringlog


def test_a_weeks_long_run_never_grows_its_file_past_the_limit(tmp_path):
    """The bug this prevents: a sample every 5 s for weeks fills the disk the checkpoints need (U6)."""
    path = str(tmp_path / "t.jsonl")
    ring = ringlog.Ring(path, max_bytes=4096, max_rows=50)
    sizes = []
    for n in range(2000):
        ring.append({"n": n, "pad": "x" * (n % 40)})
        sizes.append(os.path.getsize(path))
    rows = ringlog.read(path)
    assert max(sizes) <= 4096 and len(rows) <= 50
    assert rows[-1]["n"] == 1999 and [r["n"] for r in rows] == list(range(rows[0]["n"], 2000)), "newest kept, in order"
    assert ring.dropped == 2000 - len(rows)


def test_rows_limit_holds_even_when_bytes_do_not_bind(tmp_path):
    path = str(tmp_path / "t.jsonl")
    ring = ringlog.Ring(path, max_bytes=1 << 20, max_rows=8)
    for n in range(100):
        ring.append({"n": n})
    assert 1 <= len(ringlog.read(path)) <= 8 and ringlog.last(path) == {"n": 99}


def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path):
    """A supervisor killed mid-write leaves half a record; glued to it, the next writer's first
    record would be unreadable too."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(ringlog.encode({"n": 1}) + b'{"n": 2, "half')
    assert ringlog.read(str(path)) == [{"n": 1}]
    ringlog.Ring(str(path)).append({"n": 3})
    assert ringlog.read(str(path)) == [{"n": 1}, {"n": 3}]
    assert path.read_bytes().endswith(b"\n")


def test_a_box_string_with_control_characters_stays_one_record(tmp_path):
    """A checkpoint or process name from the box is untrusted: a newline or escape inside it must
    neither split the record nor reach a terminal raw."""
    path = str(tmp_path / "t.jsonl")
    nasty = "ckpt\n{\"forged\": 1}\x1b[2J\udcff"
    ringlog.Ring(path).append({"name": nasty})
    raw = open(path, "rb").read()
    assert raw.count(b"\n") == 1 and b"\x1b" not in raw
    assert ringlog.read(path) == [{"name": nasty}]


def test_a_file_left_larger_by_an_older_writer_is_cut_to_this_limit(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(ringlog.encode({"n": n, "pad": "y" * 50}) for n in range(500)))
    ring = ringlog.Ring(str(path), max_bytes=2048, max_rows=100)
    ring.append({"n": 500})
    assert os.path.getsize(path) <= 2048 and ringlog.last(str(path)) == {"n": 500}


def test_an_oversize_record_is_refused_not_written(tmp_path):
    path = str(tmp_path / "t.jsonl")
    ring = ringlog.Ring(path, max_bytes=4096)
    with pytest.raises(ValueError):
        ring.append({"blob": "z" * 2000})
    assert ringlog.read(path) == []


def test_a_refused_write_is_raised_for_the_caller_to_report(tmp_path):
    ring = ringlog.Ring(str(tmp_path / "gone" / "t.jsonl"))
    with pytest.raises(OSError):
        ring.append({"n": 1})


def test_last_reads_from_the_end_of_a_large_file(tmp_path):
    path = tmp_path / "t.jsonl"
    body = b"".join(ringlog.encode({"n": n, "pad": "p" * 200}) for n in range(2000))
    path.write_bytes(body + ringlog.encode({"n": "end"}))
    assert ringlog.last(str(path)) == {"n": "end"}
    assert ringlog.last(str(tmp_path / "missing")) is None
    assert len(ringlog.read(str(path), max_bytes=1000)) < 10


def test_a_line_that_is_json_but_not_a_record_is_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'[1, 2]\n"x"\n' + json.dumps({"ok": True}).encode() + b"\n")
    assert ringlog.read(str(path)) == [{"ok": True}]
