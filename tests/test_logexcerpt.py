"""gpuops.onbox.triage.logexcerpt: the head, step lines and tail of a log that triage reads, on the box
and through `triage --job`, against the plain definition of what it keeps, line by line.

The bug this prevents: the step-line search skips lines or numbers them wrong where its 8 MiB
reads split a line, where a line holds the step literal twice, or at the tail's edge; triage then
projects from a wrong last step, or its evidence points at the wrong line of the real file.
"""

import io
import random

import pytest

from gpuops.onbox.triage import logexcerpt, steps


def _defined(data, head, tail, keep):
    """What the excerpt is, spelled out: the head up to its last newline; of the lines after it
    that start before the tail and hold a step line's literal, the first and the last `keep` others
    (cut to their first 4096 bytes), numbered as in the file; the tail from its first line start
    (which may be where it starts)."""
    size = len(data)
    first = data[:head][:data[:head].rfind(b"\n") + 1]
    tail_start = size - tail
    found, pos, number = [], len(first), first.count(b"\n") + 1
    while pos < size:
        nl = data.find(b"\n", pos)
        end = size if nl < 0 else nl
        if pos < tail_start and steps.STEP_LITERAL in data[pos:end]:
            found.append((number, data[pos:min(end, pos + 4096)] + b"\n"))
        pos, number = end + 1, number + 1
    starts = [i for i in range(tail_start, size + 1) if data[i - 1:i] == b"\n"]
    tail_piece = [(data[:starts[0]].count(b"\n") + 1, data[starts[0]:])] if starts else []
    return [(1, first)] + found[:1] + found[1:][-keep:] + tail_piece, data.count(b"\n")


def _log(rnd, lines):
    words = [b"0: completed step: %d, seconds: 2.0" % rnd.randrange(999), b"0: NCCL INFO ring", b"\r",
             b"completed step: 1 completed step: 2", b"x" * 5000 + b" completed step: 7", b"loss 2.5"]
    text = b"\n".join(b" ".join(rnd.choice(words) for _ in range(rnd.randrange(0, 4))) for _ in range(lines))
    return text + (b"\n" if rnd.random() < 0.5 else b"")


@pytest.mark.parametrize("chunk", [16, 300, 8 << 20])
def test_the_excerpt_keeps_exactly_the_step_lines_it_says_wherever_its_reads_split_lines(chunk, monkeypatch):
    monkeypatch.setattr(logexcerpt, "_SCAN_CHUNK", chunk)
    rnd = random.Random(chunk)
    compared = 0
    for _ in range(150):
        data = _log(rnd, rnd.randrange(1, 250))
        head, tail, keep = rnd.randrange(1, 300), rnd.randrange(1, 3000), rnd.choice([1, 2, 300])
        if len(data) <= head + tail:
            continue
        monkeypatch.setattr(logexcerpt, "STEP_LINES", keep)
        got = logexcerpt._pieces(io.BytesIO(data), len(data), head, tail)
        assert got == _defined(data, head, tail, keep), (head, tail, keep)
        compared += 1
    assert compared > 10


def test_a_small_log_is_one_piece(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"a\ncompleted step: 1\nb")
    assert logexcerpt.read(path) == (21, 2, [(1, b"a\ncompleted step: 1\nb")])


def test_millions_of_step_lines_keep_the_first_and_the_last_ones_numbered_as_in_the_file(tmp_path):
    """A long healthy run: every line a step line. Only the first and the last STEP_LINES before
    the tail are kept (the search reads the rest, but does not walk it line by line)."""
    lines = [b"0: completed step: %d, seconds: 2.0" % i for i in range(300_000)]
    path = tmp_path / "log"
    path.write_bytes(b"config\n" * 10 + b"\n".join(lines) + b"\n")
    size, count, pieces = logexcerpt.read(path, head=64, tail=4096)
    assert count == 300_010 and size == path.stat().st_size
    steps_kept = pieces[1:-1]
    assert len(steps_kept) == 1 + logexcerpt.STEP_LINES
    numbers = [n for n, _ in steps_kept]
    assert all(b == a + 1 for a, b in zip(numbers[1:], numbers[2:]))
    for number, text in steps_kept:
        assert text == lines[number - 11] + b"\n"
    first_in_tail = pieces[-1][0]
    assert numbers[-1] < first_in_tail <= numbers[-1] + 2


@pytest.mark.parametrize("chunk", [5, 8 << 20])
def test_a_step_line_that_starts_in_the_tail_is_the_tails_and_one_that_crosses_into_it_is_not(chunk, monkeypatch):
    monkeypatch.setattr(logexcerpt, "_SCAN_CHUNK", chunk)
    before, crossing, inside = b"completed step: 1\n", b"completed step: 2\n", b"completed step: 3\n"
    data = b"head\n" + before + crossing + inside + b"end\n"
    # The tail starts inside the crossing line: it is kept, the tail's pieces start after it.
    tail = len(data) - data.index(crossing) - 3
    assert logexcerpt._pieces(io.BytesIO(data), len(data), 5, tail)[0][1:] == [
        (2, before), (3, crossing), (4, inside + b"end\n")]
    # The tail starts exactly where a step line does: that line is the tail's, not a step line kept
    # (it was once in neither: the tail skipped its first line as if it were cut).
    tail = len(data) - data.index(inside)
    assert logexcerpt._pieces(io.BytesIO(data), len(data), 5, tail)[0][1:] == [(2, before), (3, crossing),
                                                                              (4, inside + b"end\n")]
