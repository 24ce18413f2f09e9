"""The pure rules of several streams (gpuops.sync.stripes): how many, and how a payload is cut."""

import pytest

from gpuops.sync import stripes
from gpuops.sync.stripes import Range

MIB = 1 << 20
FAR = 0.05     # a round trip between continents
BENCH = {"big.bin": 96 * MIB} | {f"shard-{i}.bin": 8 * MIB for i in range(8)}


@pytest.mark.parametrize("payload,rate,rtt,expect", [
    (16 * MIB, 1e6, FAR, 1),                   # too small to pay for more handshakes
    (160 * MIB, None, FAR, 1),                 # not measured: as before
    (160 * MIB, 8e6, None, 1),
    (160 * MIB, 8e6, 0.0004, 1),               # loopback or a LAN: the CPUs hold it back, not the path
    (160 * MIB, 120e6, FAR, 1),                # one stream is fast already
    (160 * MIB, 8e6, FAR, 8),                  # the benchmark's link: capped at MAX_STREAMS
    (40 * MIB, 8e6, FAR, 2),                   # each stream carries LANE_S seconds at least
])
def test_the_number_of_streams_follows_the_link(payload, rate, rtt, expect):
    assert stripes.choose(payload, rate, rtt)[0] == expect


def test_a_number_asked_for_wins_within_bounds():
    assert stripes.choose(1, None, None, requested=4) == (4, "asked for")
    assert stripes.choose(1, None, None, requested=99)[0] == stripes.MAX_STREAMS


def test_one_streams_rate_is_its_bytes_over_its_time():
    assert stripes.rate(4 * MIB, 0.5) == 8 * MIB
    assert stripes.rate(4 * MIB, 0) is None and stripes.rate(0, 1.0) is None


def test_ranges_cover_the_file_once_in_aligned_pieces():
    size = 96 * MIB + 12345
    cut = stripes.ranges("big.bin", size)
    assert len(cut) <= stripes.RANGES and len(stripes.ranges("big.bin", 96 * MIB)) == stripes.RANGES
    assert cut[0].start == 0 and cut[-1].end == size
    assert all(a.end == b.start for a, b in zip(cut, cut[1:]))
    assert all(r.start % stripes.ALIGN == 0 for r in cut)
    assert stripes.ranges("small", stripes.SPLIT_MIN - 1) == [Range("small", 0, stripes.SPLIT_MIN - 1)]


def test_the_benchmarks_payload_fills_eight_streams_evenly():
    lanes = stripes.lanes(BENCH, ["sub", "link"], 8)
    assert [lane.nbytes for lane in lanes] == [20 * MIB] * 8
    assert lanes[0].whole[:2] == ["link", "sub"] or {"link", "sub"} <= set(lanes[0].whole)
    whole = sorted(r for lane in lanes for r in lane.whole if r in BENCH)
    assert whole == sorted(r for r in BENCH if r != "big.bin")
    split = stripes.split_files(lanes)
    assert list(split) == ["big.bin"] and split["big.bin"] == stripes.ranges("big.bin", 96 * MIB)


def test_more_streams_than_items_leaves_none_empty():
    lanes = stripes.lanes({"a": 10, "b": 20}, [], 8)
    assert len(lanes) == 2 and sorted(r for lane in lanes for r in lane.whole) == ["a", "b"]
    assert len(stripes.lanes({}, ["d"], 4)) == 1


def test_a_ranges_part_file_is_hidden_from_walks():
    part = Range("d/big.bin", 0, 6 * MIB).part_name(b"big.bin")
    assert part == b".big.bin.0-6291456.gpuops-part" and part.endswith(b".gpuops-part")
