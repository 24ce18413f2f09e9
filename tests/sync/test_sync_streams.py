"""Several streams (gpuops.sync.striped) against the real sshd, on loopback and through an emulated
long link (tests/rig/longlink.py): a file cut into ranges comes back byte-identical both ways, a
copy cut mid-range resumes from the ranges' parts and verifies, a corrupted range is caught by
verification and repaired, and the number of streams follows the link."""

import os
import re

import pytest

from gpuops.ops.pull import pull as pull_op
from gpuops.ops.push import push as push_op
from gpuops.ops.sync import Options
from gpuops.remote.targets import target_for
from gpuops.sync import lanes, stripes
from gpuops.sync.progress import Silent
from tests.rig.longlink import alias as long_alias
from tests.conftest import _close_masters
from tests.sync.conftest import cut_when, run_cli, snapshot

BIG = 48 << 20                    # cut into 16 ranges of 3 MiB
STEP = 3 << 20
_PART = re.compile(r"^\.big\.bin\.(\d+)-(\d+)\.gpuops-part$")


def _tree(root):
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(BIG))
    os.chmod(root / "big.bin", 0o750)
    (root / "sub" / "deeper").mkdir(parents=True)
    for i in range(6):
        (root / "sub" / f"f{i}").write_bytes(os.urandom(300_000 + i))
    (root / "sub" / "deeper" / "run.sh").write_text("#!/bin/sh\necho ok\n")
    os.chmod(root / "sub" / "deeper" / "run.sh", 0o755)
    (root / "link").symlink_to("sub/f0")
    return root


@pytest.fixture
def local_state(monkeypatch, tmp_path):
    """This machine's digest cache and pull index in the test's own directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path / "state"))


class Stages(Silent):
    def __init__(self):
        self.said = []

    def stage(self, text):
        self.said.append(text)


def _run(op, host, src, dst, **options):
    target = target_for(host)
    try:
        return op(target, str(src), str(dst), Options(**options))
    finally:
        target.close()


def _parts(where):
    return sorted(p.name for p in where.iterdir() if _PART.match(p.name)) if where.exists() else []


def _complete(part):
    start, end = map(int, _PART.match(part.name).groups())
    return part.stat().st_size == end - start


def test_a_file_split_into_ranges_comes_back_byte_identical(rsync_box, local_state, tmp_path):
    src = _tree(tmp_path / "src")
    doc = _run(push_op, rsync_box.spec, src, tmp_path / "dst", streams=4)
    data = doc["data"]
    assert doc["ok"] and data["verified"], doc["summary"]
    assert data["link"]["streams"]["count"] == 4
    assert sum(1 for a in data["attempts"] if a["meaning"].startswith("range ")) == len(stripes.ranges("big.bin", BIG))
    assert snapshot(tmp_path / "dst") == snapshot(src)
    assert _parts(tmp_path / "dst") == []
    back = _run(pull_op, rsync_box.spec, tmp_path / "dst", tmp_path / "back", streams=3)
    assert back["ok"] and back["data"]["verified"], back["summary"]
    assert back["data"]["link"]["streams"]["count"] == 3
    assert snapshot(tmp_path / "back") == snapshot(src)
    assert _parts(tmp_path / "back") == []


def test_the_number_of_streams_follows_the_measured_link(rig, rsync_box, local_state, tmp_path):
    """Over a link that holds each connection to 8 MB/s and adds 25 ms each way, the measurement
    opens several streams; on loopback, one (the single-stream engine, exactly as before)."""
    src = _tree(tmp_path / "src")
    with long_alias(rig, rsync_box, "far-measured", delay_s=0.025, rate_bytes_s=8e6, lifetime_s=300) as link:
        far = _run(push_op, "far-measured", src, tmp_path / "far")
        assert far["ok"] and far["data"]["verified"], far["summary"]
        streams = far["data"]["link"]["streams"]
        assert streams["count"] > 1 and streams["rate_bytes_s"] < stripes.FAST_BYTES_S, streams
        assert link.most_open > 2  # the target's own connection and the streams', at once
    near = _run(push_op, rsync_box.spec, src, tmp_path / "near")
    assert near["ok"] and near["data"]["link"]["streams"]["count"] == 1, near["data"]["link"]
    assert snapshot(tmp_path / "far") == snapshot(tmp_path / "near") == snapshot(src)


def test_a_multi_stream_push_cut_mid_range_resumes_and_verifies(rig, rsync_box, local_state, tmp_path):
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    with long_alias(rig, rsync_box, "far-cut", delay_s=0.002, rate_bytes_s=8e6, lifetime_s=300):
        watch, record = cut_when(dst, ".big.bin.*-*.gpuops-part", STEP // 2, rsync_box)
        doc = _run(push_op, "far-cut", src, dst, streams=4, retry_for=60)
        watch.join(1)
    data = doc["data"]
    assert record["cut_at"] and record["killed"], "the transfer finished before it could be cut"
    assert doc["ok"] and data["verified"], doc["summary"]
    assert data["retries"] >= 1 and any(a["outcome"] == "retry" for a in data["attempts"])
    assert data["bytes_reused"] > 0  # ranges went on from their parts, not from their starts
    assert data["bytes_sent"] < data["payload_bytes"] + BIG // 4
    assert snapshot(dst) == snapshot(src) and _parts(dst) == []


def test_a_multi_stream_pull_cut_mid_range_resumes_from_its_parts_here(rig, rsync_box, local_state, tmp_path):
    remote = _tree(tmp_path / "remote")
    back = tmp_path / "back"
    with long_alias(rig, rsync_box, "far-pull-cut", delay_s=0.002, rate_bytes_s=8e6, lifetime_s=300):
        watch, record = cut_when(back, ".big.bin.*-*.gpuops-part", STEP // 2, rsync_box)
        doc = _run(pull_op, "far-pull-cut", remote, back, streams=4, retry_for=60)
        watch.join(1)
    data = doc["data"]
    assert record["cut_at"] and record["killed"], "the transfer finished before it could be cut"
    assert doc["ok"] and data["verified"], doc["summary"]
    assert data["retries"] >= 1 and data["bytes_reused"] > 0
    assert snapshot(back) == snapshot(remote) and _parts(back) == []


def test_verification_catches_a_corrupted_range(rig, rsync_box, local_state, tmp_path):
    """A push cut with no retries left leaves its ranges' parts; one complete part is corrupted on
    the box; the next push takes that range as done, joins the file, and verification finds it
    different and sends it again."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    with long_alias(rig, rsync_box, "far-corrupt", delay_s=0.002, rate_bytes_s=8e6, lifetime_s=300):
        watch, record = cut_when(dst, ".big.bin.*-*.gpuops-part", STEP, rsync_box)
        first = _run(push_op, "far-corrupt", src, dst, streams=4, retry_for=0)
        watch.join(1)
        assert record["cut_at"] and not first["ok"], first["summary"]
        complete = [p for p in _parts(dst) if _complete(dst / p)]
        assert complete, _parts(dst)
        with open(dst / complete[0], "r+b") as f:
            f.seek(1000)
            f.write(b"\0corrupted\0")
        stages = Stages()
        again = _run(push_op, "far-corrupt", src, dst, streams=4, retry_for=60, progress=stages)
    assert again["data"]["bytes_reused"] > 0
    assert any("differ after the transfer" in s for s in stages.said), stages.said
    assert again["ok"] and again["data"]["verified"], again["summary"]
    assert snapshot(dst) == snapshot(src) and _parts(dst) == []


def test_streams_prefer_aes_gcm_only_among_the_ciphers_ssh_config_allows(rig, rsync_box):
    rig.alias("only-chacha", port=rsync_box.port, Ciphers="chacha20-poly1305@openssh.com")
    rig.alias("chacha-or-gcm", port=rsync_box.port, Ciphers="chacha20-poly1305@openssh.com,aes256-gcm@openssh.com")
    assert lanes.cipher_order(target_for("only-chacha")) == []
    order = lanes.cipher_order(target_for("chacha-or-gcm"))
    assert order == ["-o", "Ciphers=aes256-gcm@openssh.com,chacha20-poly1305@openssh.com"]
    assert lanes.cipher_order(target_for(rsync_box.spec))[1].startswith("Ciphers=aes128-gcm@openssh.com,")


def test_a_symlink_on_the_way_to_a_range_is_replaced_never_followed(rsync_box, local_state, tmp_path):
    """The box has a symlink where the source has a directory holding a big file: the ranges'
    parts go into a directory put in its place (as rsync's receiver does), nothing where it
    points."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "big.bin").write_bytes(os.urandom(stripes.SPLIT_MIN + 12345))
    outside = tmp_path / "outside"
    outside.mkdir()
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "sub").symlink_to(outside)
    doc = _run(push_op, rsync_box.spec, src, dst, streams=3)
    assert doc["ok"] and doc["data"]["verified"], doc["summary"]
    assert list(outside.iterdir()) == []
    assert (dst / "sub").is_dir() and not (dst / "sub").is_symlink()
    assert snapshot(dst) == snapshot(src)


def _logins(box):
    return box.log.read_text(errors="replace").count("Accepted publickey")


def test_the_measurement_rides_a_master_still_shaking_hands(rsync_box, fresh_logins):
    """The measurement starts as soon as the local tree is walked, often while the master the CLI
    started first (gpuops.remote.warmup) is still shaking hands; it waits for it: on its own, the
    measuring ssh opened a connection of its own, a whole handshake more on both ends' CPUs
    (loopback pushes measured slower than with --streams 1)."""
    target = target_for(rsync_box.spec)
    before = _logins(rsync_box)
    try:
        target.start_master()
        measured = lanes.measure(target)
        target.run("true")
    finally:
        target.close()
    assert measured["rtt_s"] < stripes.NEAR_RTT_S and "probe_s" not in measured, measured
    assert _logins(rsync_box) - before == 1


def test_a_near_link_is_measured_once_per_kept_master_and_streams_1_measures_nothing(rsync_box, sync_env,
                                                                                     tmp_path):
    _close_masters()
    src = _tree(tmp_path / "src")
    said = []
    for dst in ("a", "b"):
        proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(src), "--dst",
                            str(tmp_path / dst))
        assert doc and doc["ok"], proc.stderr
        said.append(doc["data"]["link"]["streams"])
    assert said[0]["count"] == 1 and "rtt_s" in said[0] and "kept" not in said[0], said
    assert said[1] == {**said[0], "kept": True}, said  # the same master: the round trip it measured
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(src), "--dst", str(tmp_path / "c"),
                        "--streams", "1")
    assert doc and doc["ok"], proc.stderr
    assert doc["data"]["link"]["streams"] == {"count": 1, "why": "asked for"}


@pytest.mark.parametrize("verb", ["push", "pull"])
@pytest.mark.parametrize("argv", [["--streams", "9"], ["--streams", "0"], ["--streams", "2", "--engine", "sftp"]])
def test_a_stream_count_out_of_bounds_is_a_usage_error(verb, argv, tmp_path):
    proc, doc = run_cli(dict(os.environ), verb, "--host", "nowhere", "--src", str(tmp_path), "--dst", "/d", *argv)
    assert proc.returncode == 2 and doc and not doc["ok"], (proc.returncode, proc.stdout, proc.stderr)


def test_a_pull_with_the_sftp_engine_and_no_stream_count_is_no_usage_error(rsync_box, sync_env, tmp_path):
    remote = _tree(tmp_path / "remote")
    proc, doc = run_cli(sync_env, "pull", "--host", rsync_box.spec, "--src", str(remote), "--dst",
                        str(tmp_path / "back"), "--engine", "sftp")
    assert proc.returncode == 0 and doc["ok"] and doc["data"]["link"]["streams"] == {"count": 1}, proc.stdout[-2000:]
