"""The small pure parts: flag parsing, stream frames, log scanning, growth lookup, queue lines."""

import pytest

from gpuops import errors
from gpuops.jobs import frames, spec
from gpuops.onbox.jobs import job_queue
from gpuops.onbox.triage import logscan, steps
from gpuops.remote.base import Target


def test_pairs_keep_equals_in_values_and_reject_bad_names():
    assert spec.pairs(["a=b=c", "x="], "--label") == {"a": "b=c", "x": ""}
    with pytest.raises(errors.UsageError):
        spec.pairs(["novalue"], "--label")
    with pytest.raises(errors.UsageError):
        spec.pairs(["1BAD=x"], "--env", env_names=True)


def test_gpus_accepts_indices_and_uuids_only():
    assert spec.gpus(" 0, 1") == "0,1"
    assert spec.gpus("GPU-8f3a1c2e-aaaa") == "GPU-8f3a1c2e-aaaa"
    assert spec.gpus(None) is None
    with pytest.raises(errors.UsageError):
        spec.gpus("0;rm -rf /")


def test_secret_values_come_from_the_local_environment():
    assert spec.secrets(["TOKEN"], {"TOKEN": "s3"}) == {"TOKEN": "s3"}
    with pytest.raises(errors.UsageError) as e:
        spec.secrets(["MISSING"], {})
    assert "MISSING" in e.value.message
    with pytest.raises(errors.UsageError):
        spec.secrets(["TOKEN"], {"TOKEN": "s3"}, taken={"TOKEN": "x"})


def test_crlf_scripts_are_caught_when_they_would_break():
    assert spec.script_problem(b"echo hi\r\necho there\r\n") is not None  # bash would see $'\r'
    assert spec.script_problem(b"#!/usr/bin/env python3\r\nprint(1)\r\n") is not None  # bad #! line
    assert spec.script_problem(b"#!/usr/bin/env python3\nprint(1)\r\n") is None  # python copes
    assert spec.script_problem(b"#!/bin/bash\necho a\r\n") is not None
    assert spec.script_problem(b"echo unix\n") is None


def test_frames_survive_arbitrary_chunking():
    wire = (logscan.frame(b"H", {"start": 5}) + logscan.frame(b"D", b"abc\n") + logscan.frame(b"K")
            + logscan.frame(b"D", b"\xff\x00") + logscan.frame(b"E", {"next": 11}))
    for cut in range(1, 9):
        r, got = frames.FrameReader(), []
        for i in range(0, len(wire), cut):
            got += r.feed(wire[i:i + cut])
        assert [k for k, _ in got] == [b"H", b"D", b"K", b"D", b"E"]
        assert b"".join(p for k, p in got if k == b"D") == b"abc\n\xff\x00"
    partial = frames.FrameReader()
    assert partial.feed(wire[:-3]) and partial.pending > 0  # an incomplete frame is held back


def test_tail_offset_counts_lines_from_the_end(tmp_path):
    f = tmp_path / "log"
    f.write_bytes(b"one\ntwo\nthree\n")
    assert logscan.tail_offset(str(f), 2) == 4
    assert logscan.tail_offset(str(f), 10) == 0
    assert logscan.tail_offset(str(f), 0) == 14
    f.write_bytes(b"one\ntwo\npartial")
    assert logscan.tail_offset(str(f), 1) == 8


def test_progress_lines_including_carriage_return_updates(tmp_path):
    f = tmp_path / "log"
    f.write_bytes(b"boot\nwarning: noise\n"
                  b" 10%|# | 20/200 [00:02<00:18]\r 11%|# | 22/200 [00:02<00:18]\rnoise\n")
    events = logscan.progress(str(f), steps.compile_patterns(), 1 << 20)
    assert [e["step"] for e in events] == [20, 22]
    custom = logscan.progress(str(f), steps.compile_patterns(r"noise"), 1 << 20, user=True)
    assert [e["text"] for e in custom][-1] == "noise" and custom[-1]["step"] is None


def test_a_maxtext_log_is_judged_by_its_step_lines_alone(tmp_path):
    """A hung MaxText job kept printing `rccl busy wait, iteration N`: status read that as progress
    while triage, which reads only `completed step:` lines, called the job hanging."""
    f = tmp_path / "log"
    f.write_bytes(b"completed step: 4, seconds: 1.5\n 10%|# | 20/200 [00:02<00:18]\n"
                  b"(raylet) rccl busy wait, iteration 99\n")
    events = logscan.progress(str(f), steps.compile_patterns(), 1 << 20)
    assert [(e["step"], e["seconds"]) for e in events] == [(4, 1.5)]
    assert logscan.first_step(str(f), steps.compile_patterns()) == 4


def test_written_at_maps_offsets_to_first_covering_sample(tmp_path):
    g = tmp_path / "growth"
    g.write_text("100.0 10\n101.0 50\n102.0 80\n")
    assert logscan.written_at(str(g), [5, 10, 11, 80, 81]) == {5: 100.0, 10: 100.0, 11: 101.0, 80: 102.0,
                                                               81: None}


def test_queue_lines_keep_physical_numbers():
    text = "# header\necho a\n\n  echo b\n#skip\necho c"
    assert job_queue.queue_entries(text) == [(2, "echo a"), (4, "  echo b"), (6, "echo c")]


class _ScriptedTarget(Target):
    """Stands in for a transport whose link dies mid-stream by raising (as ssh exit 255 does)."""

    name = "scripted"

    def __init__(self, log):
        self.log, self.calls, self.closed = log, [], 0

    def run(self, line, stdin=b"", timeout_s=None, on_stdout=None, max_bytes=None, stream=False, later=None):
        import json

        from gpuops.remote.result import Result

        from gpuops import onbox

        opts = json.loads(stdin[len(onbox.script("job_stream")):])  # the options follow the shipped source
        self.calls.append(opts)
        start = opts.get("from_offset", 0)
        on_stdout(logscan.frame(b"H", {"job_id": "j", "start": start, "size": len(self.log)}))
        if len(self.calls) == 1:
            on_stdout(logscan.frame(b"D", self.log[start:start + 7]) + b"D\x00\x00")  # cut inside a frame
            raise errors.Unreachable("scripted: connection reset")
        on_stdout(logscan.frame(b"D", self.log[start:]))
        on_stdout(logscan.frame(b"E", {"reason": "exited", "next": len(self.log), "exit": {"exit_code": 0}}))
        return Result(b"", b"", 0)

    def close(self):
        self.closed += 1


def test_follow_resumes_exactly_when_the_transport_raises_mid_stream(monkeypatch):
    from gpuops.ops import joblogs as op

    monkeypatch.setattr(op.time, "sleep", lambda s: None)
    log = b"0123456789abcdef\n"
    t, got = _ScriptedTarget(log), bytearray()
    doc = op.logs(t, job="j", follow=True, from_offset=0, sink=got.extend)
    assert bytes(got) == log and [c.get("from_offset") for c in t.calls] == [0, 7]
    assert doc["data"]["reconnects"] == 1 and doc["data"]["next_offset"] == len(log) and t.closed == 1
