"""Logs as they really are: CRLF, bare-CR progress bars, invalid UTF-8, NULs, 100k-character
lines, truncated last lines, and logs split over many chunks or read only in head+tail pieces."""

import pytest

from gpuops.onbox.triage import readers, signatures as S
from gpuops.onbox.triage.logtriage import classify_bytes, triage_bytes, triage_file, triage_pieces
from tests.triage.helpers import EXPECTED, log, now_of, state_of

NAMES = sorted(EXPECTED)
VERDICT = ("status", "primary", "also", "stage", "progress")


def verdict(data):
    return {k: data[k] for k in VERDICT}


def baseline(name):
    return triage_file(log(name), now=now_of(name), slurm_state=state_of(name), engine="python").data


@pytest.mark.parametrize("name", NAMES)
def test_crlf_gives_the_same_result(name):
    crlf = log(name).read_bytes().replace(b"\n", b"\r\n")
    assert triage_bytes(crlf, now=now_of(name), slurm_state=state_of(name)).data == baseline(name)


@pytest.mark.parametrize("name", ["status_hanging", "cascade_oom_nccl_heartbeat", "torchrun_cuda_oom", "restored_run"])
def test_invalid_utf8_and_nuls_change_nothing(name):
    noisy = []
    for i, line in enumerate(log(name).read_bytes().split(b"\n")):
        noisy.append(line + (b" \xff\xfe\x80\x00 \xc3(" if i % 3 == 0 else b""))
    data = triage_bytes(b"\n".join(noisy), now=now_of(name), slurm_state=state_of(name)).data
    assert verdict(data) == verdict(baseline(name))


@pytest.mark.parametrize("engine", ["python", "grep"])
def test_tiny_chunks_and_cut_long_lines_give_the_same_result(monkeypatch, engine):
    expected = {n: baseline(n) for n in NAMES}
    monkeypatch.setattr(readers, "CHUNK_BYTES", 4096)
    for name in NAMES:
        got = triage_file(log(name), now=now_of(name), slurm_state=state_of(name), engine=engine).data
        assert verdict(got) == verdict(expected[name]), name


def test_a_100k_character_line_is_scanned_and_quoted_in_bounds():
    long_line = b"0: " + b"x" * 90_000 + b" CUDA out of memory. Tried to allocate 4.00 GiB " + b"y" * 10_000
    data = classify_bytes(b"[2025-03-02 10:00:00] start\n" + long_line + b"\nnext line\n")
    assert data["primary"] == "oom-gpu"
    (ev,) = [e for e in data["evidence"] if e["line"] == 2]
    assert "CUDA out of memory" in ev["text"] and len(ev["text"]) <= S.EVIDENCE_CHARS


def test_a_line_longer_than_the_scan_limit_is_cut_not_held(monkeypatch):
    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 10_000)
    monkeypatch.setattr(readers, "CHUNK_BYTES", 4096)
    blob = b"z" * 50_000 + b" No space left on device " + b"z" * 50_000
    data = classify_bytes(b"first\n" + blob + b"\nlast\n")
    assert data["primary"] == "disk-full"
    assert data["evidence"][0]["line"] == 2


def test_bare_cr_progress_bar_then_killed():
    bar = b"\r".join(b" %d%%|####| %d/100" % (p, p) for p in range(0, 60, 10))
    data = classify_bytes(b"[2025-03-02 10:00:00] start\n" + bar + b"\rKilled\n")
    assert data["primary"] == "oom-host"
    assert data["evidence"][0]["text"] == "Killed"


def test_killed_inside_a_sentence_is_not_an_oom():
    data = classify_bytes(b"INFO: Killed 3 stale containers before start\nworker Killed by user request\n")
    assert data["primary"] is None or data["primary"] == "unknown-death"
    assert "oom-host" not in data["also"] and data["primary"] != "oom-host"


def test_truncated_last_line_is_noted_for_an_unknown_death():
    """A line cut short is a clue once the job is known to have ended; alone it is no death (a
    live process writing through a block buffer leaves one too)."""
    log = b"completed step: 0, seconds: 9.0\ncompleted step: 1, seconds: 2.0\nsaving to /ou"
    data = classify_bytes(log, slurm_state="COMPLETED")
    assert data["status"] == "unknown" and data["primary"] == "unknown-death"
    assert any("middle of a line" in s for s in data["advice"])
    assert data["evidence"][-1] == {"line": 3, "text": "saving to /ou"}
    data = classify_bytes(log)
    assert (data["status"], data["primary"]) == ("unknown", None)
    assert data["evidence"][-1] == {"line": 3, "text": "saving to /ou"}


@pytest.mark.parametrize("blob", [b"", b"\n", b"\r\r\r", b"\x00" * 1000, b"\xff" * 5000, b"no newline at all"])
def test_degenerate_logs_do_not_break_it(blob):
    data = classify_bytes(blob)
    assert tuple(data) == S.DATA_KEYS
    assert data["status"] == "unknown" and data["primary"] is None  # no end in the log, no death claimed
    assert data["progress"] == dict.fromkeys(S.PROGRESS_KEYS)


def test_many_matches_keep_bounded_facts():
    body = b"".join(b"%d: Traceback (most recent call last):\n%d: ValueError: bad %d\n" % (i % 8, i % 8, i)
                    for i in range(20_000))
    result = triage_bytes(body)
    hits = readers.scan_bytes(body).classes["python-exception"]
    assert hits.count == 20_000 and len(hits.all()) <= 5
    assert len(result.data["evidence"]) <= S.EVIDENCE_MAX


def test_a_tail_keeps_the_real_line_numbers_it_is_given():
    data = classify_bytes(b"step noise\n0: Killed\n", first_line=5001)
    assert data["evidence"][0] == {"line": 5002, "text": "0: Killed"}


def test_head_and_tail_pieces_keep_real_line_numbers(tmp_path, monkeypatch):
    import base64

    from gpuops.onbox.jobs import job_facts

    raw = log("status_hanging").read_bytes()
    (tmp_path / "j1").mkdir()
    (tmp_path / "j1" / "log").write_bytes(raw)
    monkeypatch.setenv("GPUOPS_JOBS_DIR", str(tmp_path))
    doc = job_facts.excerpt({"job": "j1", "head": 4096, "tail": 60_000})
    pieces = [(n, base64.b64decode(b)) for n, b in doc["pieces"]]
    assert doc["size"] == len(raw) and doc["lines"] == raw.count(b"\n") and len(pieces) > 2
    lines = raw.split(b"\n")
    for first_line, data in pieces:
        assert lines[first_line - 1] == data.split(b"\n")[0]
    name = "status_hanging"
    whole = baseline(name)
    part = triage_pieces(pieces, now=now_of(name), slurm_state=state_of(name)).data
    assert part["status"] == whole["status"] == "hanging"
    assert part["progress"]["last_step"] == 316 and part["progress"]["first_step"] == 0
    assert part["progress"]["total_steps"] == 2000
    assert [e for e in part["evidence"] if e["line"] > 100] == [e for e in whole["evidence"] if e["line"] > 100]


# The scan's own peak is VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across exec,
# so a child of a pytest process that has grown to 300 MiB reports 300 MiB before it does anything
# (seen in CI). grep's figure is fine: it is forked from this small child.
_PEAK_RSS = """
import resource, sys
from gpuops.onbox.triage.logtriage import triage_file
result = triage_file(sys.argv[1], engine="grep")
with open("/proc/self/status") as f:
    hwm_kb = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
print(result.data["primary"], result.context["engine"], hwm_kb,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_one_huge_line_keeps_grep_and_the_scan_small(tmp_path):
    """The `grep -o` child held a whole line: a 2 GB single-line log peaked at 4.2 GB. grep now
    runs under a memory cap and the python engine takes over, so the peak stays far below the line."""
    import subprocess
    import sys

    line = 3 * readers.GREP_AS_BYTES // 2
    path = tmp_path / "one-line.log"
    with open(path, "wb") as fh:
        fh.write(b"step 1 loss 2.0\n")
        block = b"x" * (1 << 20)
        for _ in range(line >> 20):
            fh.write(block)
        fh.write(b"\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    out = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(path)], capture_output=True, text=True, check=True)
    primary, engine, own_kb, child_kb = out.stdout.split()
    assert primary == "oom-gpu" and engine == "python"
    assert int(own_kb) << 10 < 200 << 20, f"the scan itself peaked at {int(own_kb) >> 10} MiB"
    assert int(child_kb) << 10 <= readers.GREP_AS_BYTES, f"grep peaked at {int(child_kb) >> 10} MiB"
