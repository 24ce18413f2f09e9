"""A connection cut mid-transfer (the sshd child serving it is killed): the command resumes on
its own, the final verify passes, and only a small fraction of the payload crosses the wire twice.
The wire is measured by a relay in front of sshd, not by the code under test."""

import os
import signal
import time

import pytest

from tests.sync.conftest import cut_when, freeze_sessions, run_cli, snapshot

BIG = 16 << 20
RATE = 12 << 20          # ~1.3 s for the big file, so the cut lands near its middle
RESENT_BOUND = 0.10      # of the payload, beyond what the cut left to send


def _payload(src):
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(BIG))
    (src / "small").mkdir()
    for i in range(20):
        (src / "small" / f"f{i}").write_bytes(os.urandom(1000 + i))
    return BIG + sum(1000 + i for i in range(20))


def _check_resumed(proc, doc, record, meter_bytes, payload):
    """What the cut itself destroys is the data in flight: past the meter but not yet on the
    receiver's disk (socket buffers, ssh's 2 MiB channel window, rsync's own buffers). That
    depends on the kernel and OpenSSH, not on gpuops, and on a busy CI machine it alone has
    reached 13% of this payload. The bound is on the rest: what the resume sends again."""
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    assert record["cut_at"] and record["killed"], "the transfer finished before it could be cut"
    data = doc["data"]
    assert data["verified"] and data["mismatch_count"] == 0
    assert data["retries"] >= 1 and data["attempts"][0]["outcome"] == "retry"
    assert data["bytes_verified"] == payload
    in_flight = max(0, record["wire_at_cut"] - record["cut_at"])
    resent = meter_bytes - payload - in_flight
    assert resent <= RESENT_BOUND * payload, (
        f"{resent} bytes beyond the payload and the {in_flight} in flight at the cut crossed the wire "
        f"({resent / payload:.1%})")
    return resent


def _cut_run(env, verb, box, alias, meter, src, dst):
    """Run push/pull through the metered alias, cutting the box's connections halfway through
    the big file (rsync writes it as .big.bin.XXXXXX, the SFTP engine as .big.bin.gpuops-part)."""
    direction = "up" if verb == "push" else "down"
    watch, record = cut_when(dst, ".big.bin.*", BIG // 2, box, wire=lambda: getattr(meter, direction))
    proc, doc = run_cli(env, verb, "--host", alias, "--src", str(src), "--dst", str(dst), "--retry-for", "60")
    watch.join(1)
    return proc, doc, record


@pytest.mark.parametrize("engine", ["rsync", "sftp"])
def test_push_resumes_after_cut(engine, request, metered, sync_env, tmp_path):
    box = request.getfixturevalue("rsync_box" if engine == "rsync" else "sftp_box")
    alias, meter = metered(box, RATE)
    payload = _payload(tmp_path / "src")
    proc, doc, record = _cut_run(sync_env, "push", box, alias, meter, tmp_path / "src", tmp_path / "dst")
    assert doc["data"]["engine"] == engine
    _check_resumed(proc, doc, record, meter.up, payload)
    assert snapshot(tmp_path / "dst") == snapshot(tmp_path / "src")


def test_pull_resumes_after_cut(rsync_box, metered, sync_env, tmp_path):
    alias, meter = metered(rsync_box, RATE)
    payload = _payload(tmp_path / "remote")
    proc, doc, record = _cut_run(sync_env, "pull", rsync_box, alias, meter, tmp_path / "remote", tmp_path / "back")
    _check_resumed(proc, doc, record, meter.down, payload)
    assert snapshot(tmp_path / "back") == snapshot(tmp_path / "remote")


@pytest.mark.parametrize("engine", ["rsync", "sftp"])
def test_stalled_link_is_noticed_within_the_io_timeout(engine, request, metered, sync_env, tmp_path):
    """The sshd serving the transfer is frozen, not killed: the connection stays up and silent.
    The transfer must notice within --io-timeout seconds and go on over a new connection."""
    box = request.getfixturevalue("rsync_box" if engine == "rsync" else "sftp_box")
    alias, meter = metered(box, RATE)
    payload = _payload(tmp_path / "src")
    watch, record = cut_when(tmp_path / "dst", ".big.bin.*", BIG // 2, box, how=freeze_sessions)
    started = time.monotonic()
    try:
        proc, doc = run_cli(sync_env, "push", "--host", alias, "--src", str(tmp_path / "src"), "--dst",
                            str(tmp_path / "dst"), "--io-timeout", "2", "--retry-for", "60")
    finally:
        watch.join(1)
        for pid in record["killed"]:
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0 and record["killed"], proc.stdout[-2000:]
    stalled = doc["data"]["attempts"][0]
    assert stalled["outcome"] == "retry" and "timeout" in stalled["meaning"], stalled
    assert time.monotonic() - started < 25
    assert doc["data"]["bytes_verified"] == payload


@pytest.mark.parametrize("engine", ["rsync", "sftp"])
def test_a_link_that_freezes_after_everything_was_sent_is_noticed(engine, request, metered, sync_env, tmp_path):
    """The freeze comes when the whole (small) payload already sits in the link's buffers: the
    sender has nothing left to write and waits for the box. rsync's own --timeout never fires
    then (its keepalives, written into ssh's buffers, count as I/O), so the push hung until ssh's
    keepalives gave up on the kept master (~60 s) and then had no retry budget left. The relay
    freezes the link itself, at a byte count it decides, once part of the file has crossed."""
    box = request.getfixturevalue("rsync_box" if engine == "rsync" else "sftp_box")
    alias, meter = metered(box, 128 << 10)
    src = tmp_path / "src"
    src.mkdir()
    (src / "tail.bin").write_bytes(os.urandom(512 << 10))
    meter.freeze_after(192 << 10)
    started = time.monotonic()
    proc, doc = run_cli(sync_env, "push", "--host", alias, "--src", str(src), "--dst", str(tmp_path / "dst"),
                        "--io-timeout", "2", "--retry-for", "60")
    assert meter.frozen.is_set(), f"the push ended before the link froze: {proc.stdout[-2000:]}"
    assert proc.returncode == 0, proc.stdout[-2000:]
    first = doc["data"]["attempts"][0]
    assert first["outcome"] == "retry" and "timeout" in first["meaning"], first
    assert time.monotonic() - started < 25
    assert doc["data"]["bytes_verified"] == 512 << 10
