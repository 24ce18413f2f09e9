"""A slow link and data that compresses (gotcha U15): the transfer measures the link from what it
saw, says so with the rate and the exact flag, and --compress then sends less. The link is a real
rate-limited relay in front of the box's sshd; what crossed it is counted there, not by gpuops."""

import json
import os

from tests.sync.conftest import run_cli, snapshot

RATE = 1 << 20   # a slow link: 1 MiB/s


def _text(root, mib=3):
    root.mkdir()
    line = b"step 0000 loss=2.3451 lr=3.0e-4 grad_norm=0.812 tokens/s=41230 {\"epoch\": 1, \"split\": \"train\"}\n"
    for i in range(3):
        (root / f"log-{i}.jsonl").write_bytes(line * (mib * (1 << 20) // len(line) // 3))
    return sum(p.stat().st_size for p in root.iterdir())


def test_a_slow_link_offers_compression_and_compression_sends_less(rsync_box, metered, sync_env, tmp_path):
    alias, meter = metered(rsync_box, RATE)
    payload = _text(tmp_path / "src")
    proc, doc = run_cli(sync_env, "push", "--host", alias, "--src", str(tmp_path / "src"), "--dst",
                        str(tmp_path / "plain"))
    assert proc.returncode == 0, proc.stderr + proc.stdout[-1500:]
    [offer] = [f for f in doc["findings"] if f["id"] == "sync.slow-link"]
    link = doc["data"]["link"]
    assert link["bytes_per_s"] < 2 * RATE and offer["evidence"]["bytes_per_s"] == link["bytes_per_s"]
    assert offer["gotcha"] == "U15" and offer["fix"].endswith(" --compress") and offer["evidence"]["sample_ratio"] < 0.5
    assert "/s over" in offer["title"] and "--compress would have sent about" in offer["title"]

    meter.reset()
    proc, doc = run_cli(sync_env, "push", "--host", alias, "--src", str(tmp_path / "src"), "--dst",
                        str(tmp_path / "packed"), "--compress")
    assert proc.returncode == 0 and doc["data"]["verified"], proc.stderr + proc.stdout[-1500:]
    assert meter.up < 0.5 * payload, f"{meter.up} bytes on the wire for a {payload}-byte payload"
    assert not [f for f in doc["findings"] if f["id"] == "sync.slow-link"]
    assert snapshot(tmp_path / "packed") == snapshot(tmp_path / "src")


def test_data_that_does_not_compress_is_not_offered_compression(rsync_box, metered, sync_env, tmp_path):
    alias, _ = metered(rsync_box, RATE)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "weights.bin").write_bytes(os.urandom(3 << 20))
    proc, doc = run_cli(sync_env, "push", "--host", alias, "--src", str(tmp_path / "src"), "--dst",
                        str(tmp_path / "dst"))
    assert proc.returncode == 0, proc.stderr
    assert doc["data"]["link"]["bytes_per_s"] < 2 * RATE
    assert not [f for f in doc["findings"] if f["id"] == "sync.slow-link"], json.dumps(doc["findings"])[:500]


def test_compress_with_the_sftp_engine_is_a_usage_error(rsync_box, sync_env, tmp_path):
    (tmp_path / "src").mkdir()
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(tmp_path / "src"), "--dst",
                        str(tmp_path / "dst"), "--engine", "sftp", "--compress")
    assert proc.returncode == 2 and "--compress needs the rsync engine" in doc["error"]["message"]
