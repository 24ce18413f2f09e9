"""push, pull and verify against a real sshd with real rsync (and SFTP on a box without it)."""

import json
import os
from pathlib import Path

import pytest

from gpuops import pullindex
from tests.sync.conftest import make_tree, run_cli, snapshot

ENGINES = ["rsync", "sftp"]


def _box(request, engine):
    return request.getfixturevalue("rsync_box" if engine == "rsync" else "sftp_box")


def _expected(src: Path):
    """The source as a sync should carry it: without .git and what .gpuopsignore leaves out."""
    return {k: v for k, v in snapshot(src).items()
            if not (k == ".git" or k.startswith(".git/") or k.endswith(".log") and k != "keep.log")}


@pytest.mark.parametrize("engine", ENGINES)
def test_push_verify_pull_round_trip_exactly(engine, request, sync_env, tmp_path):
    box = _box(request, engine)
    src = make_tree(tmp_path / "src")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (src / ".gpuopsignore").write_text("# logs stay home\n*.log\n!keep.log\n")
    (src / "noise.log").write_text("x")
    (src / "keep.log").write_text("kept")
    remote = tmp_path / "remote dir $(x)"
    for marker in (Path.home() / "pwned", tmp_path / "pwned"):
        marker.unlink(missing_ok=True)

    proc, doc = run_cli(sync_env, "push", "--host", box.spec, "--src", str(src), "--dst", str(remote))
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    data = doc["data"]
    assert data["engine"] == engine and data["verified"] and data["retries"] == 0
    assert data["files"] == data["files_verified"] and data["bytes_verified"] == data["payload_bytes"] > 70_000
    assert snapshot(remote) == _expected(src)

    proc, doc = run_cli(sync_env, "verify", "--host", box.spec, "--local", str(src), "--remote", str(remote))
    assert proc.returncode == 0 and doc["data"]["mismatch_count"] == 0, proc.stdout[-2000:]

    back = tmp_path / "back"
    proc, doc = run_cli(sync_env, "pull", "--host", box.spec, "--src", str(remote), "--dst", str(back))
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    assert doc["data"]["engine"] == engine
    assert snapshot(back) == _expected(src)
    assert not (Path.home() / "pwned").exists() and not (tmp_path / "pwned").exists()

    # A verified pull leaves its manifest next to the data and in the pull index (teardown-check).
    manifest = json.loads(Path(pullindex.manifest_for(str(back))).read_text())
    files = {f["path"]: f for f in manifest["files"]}
    assert manifest["schema"] == 1 and manifest["remote"] == str(remote) and manifest["local"] == str(back)
    assert set(files) == {k for k, v in _expected(src).items() if v[0] == "f"}
    assert files["bin.dat"]["sha256"] == _expected(src)["bin.dat"][2]
    entries = [json.loads(line) for line in open(Path(sync_env["GPUOPS_STATE_DIR"]) / "pulls.jsonl")]
    assert entries[-1]["manifest"] == pullindex.manifest_for(str(back)) and entries[-1]["host"] == box.spec

    # Nothing changed: a second push sends nothing and still verifies.
    proc, doc = run_cli(sync_env, "push", "--host", box.spec, "--src", str(src), "--dst", str(remote))
    assert proc.returncode == 0 and doc["data"]["sent_paths"] == 0 and doc["data"]["verified"]


@pytest.mark.parametrize("engine", ENGINES)
def test_tampered_byte_is_reported_exactly_then_push_repairs_it(engine, request, sync_env, tmp_path):
    box = _box(request, engine)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"weights-{i}.bin").write_bytes(os.urandom(50_000))
    remote = tmp_path / "remote"
    assert run_cli(sync_env, "push", "--host", box.spec, "--src", str(src), "--dst", str(remote))[0].returncode == 0

    victim = remote / "weights-3.bin"
    st = victim.stat()
    with open(victim, "r+b") as f:
        f.seek(12_345)
        byte = f.read(1)
        f.seek(12_345)
        f.write(bytes([byte[0] ^ 0x01]))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: a quick check misses it

    proc, doc = run_cli(sync_env, "verify", "--host", box.spec, "--local", str(src), "--remote", str(remote))
    assert proc.returncode == 1
    assert [(m["path"], m["problem"]) for m in doc["data"]["mismatches"]] == [("weights-3.bin", "content")]
    assert "weights-3.bin" in doc["summary"]

    proc, doc = run_cli(sync_env, "push", "--host", box.spec, "--src", str(src), "--dst", str(remote),
                        "--engine", engine)
    assert proc.returncode == 0 and doc["data"]["verified"], proc.stdout[-2000:]
    assert victim.read_bytes() == (src / "weights-3.bin").read_bytes()


def test_destination_directory_is_created(rsync_box, sync_env, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    deep = tmp_path / "not" / "yet" / "there"
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(src), "--dst", str(deep))
    assert proc.returncode == 0 and (deep / "f").read_text() == "x"


def test_crlf_scripts_reported_then_fixed_and_profile_destination_warning(rsync_box, sync_env, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "run.sh").write_bytes(b"#!/bin/bash\r\nset -e\r\necho ok\r\n")
    (src / "launcher").write_bytes(b"#!/usr/bin/env sh\r\necho ok\r\n")
    (src / "train.py").write_bytes(b"print('ok')\r\n")  # Python does not care: not reported
    remote = tmp_path / "remote"
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(src), "--dst", str(remote),
                        "--profile", "runpod")
    assert proc.returncode == 0
    lost = [f for f in doc["findings"] if f["id"] == "sync.destination-lost-on-stop"]
    assert lost and lost[0]["severity"] == "warn" and "container disk" in lost[0]["evidence"]["reason"]
    crlf = [f for f in doc["findings"] if f["id"] == "sync.crlf"]
    assert crlf and crlf[0]["severity"] == "warn" and crlf[0]["gotcha"] == "U26"
    assert sorted(crlf[0]["evidence"]["files"]) == ["launcher", "run.sh"]

    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(src), "--dst", str(remote),
                        "--fix-crlf", "--profile", "local")
    assert proc.returncode == 0 and doc["data"]["verified"]
    assert not [f for f in doc["findings"] if f["id"] in ("sync.crlf", "sync.destination-lost-on-stop")]
    assert (remote / "run.sh").read_bytes() == b"#!/bin/bash\nset -e\necho ok\n" == (src / "run.sh").read_bytes()
    assert (remote / "train.py").read_bytes() == b"print('ok')\r\n"


def test_excludes_and_delete_need_yes(rsync_box, sync_env, tmp_path):
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "data" / "keep").write_text("k")
    (src / "data" / "cache.tmp").write_text("t")
    remote = tmp_path / "remote"
    (remote / "old").mkdir(parents=True)
    (remote / "old" / "stale.py").write_text("s")
    (remote / "local.tmp").write_text("excluded at the source, so protected at the destination")
    args = ["push", "--host", rsync_box.spec, "--src", str(src), "--dst", str(remote), "--exclude", "*.tmp"]

    proc, doc = run_cli(sync_env, *args, "--delete")
    assert proc.returncode == 0 and doc["data"]["extras"] == ["old"] and doc["data"]["deleted"] == []
    assert (remote / "old" / "stale.py").exists() and not (remote / "data" / "cache.tmp").exists()

    proc, doc = run_cli(sync_env, *args, "--delete", "--yes")
    assert proc.returncode == 0 and doc["data"]["deleted"] == ["old"]
    assert not (remote / "old").exists() and (remote / "local.tmp").exists()


def test_bad_inputs_exit_with_distinct_codes(rsync_box, sync_env, tmp_path):
    missing = tmp_path / "nope"
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(missing), "--dst", str(tmp_path))
    assert proc.returncode == 4 and "does not exist" in doc["summary"]
    proc, doc = run_cli(sync_env, "pull", "--host", rsync_box.spec, "--src", str(missing), "--dst", str(tmp_path / "b"))
    assert proc.returncode == 4 and str(missing) in doc["summary"]
    proc, doc = run_cli(sync_env, "push", "--src", str(tmp_path), "--dst", "x")
    assert proc.returncode == 2 and "--host" in doc["summary"]
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(tmp_path), "--dst", "x",
                        "--engine", "scp")
    assert proc.returncode == 2 and "--engine" in doc["summary"]
    proc, doc = run_cli(sync_env, "pull", "--host", f"{rsync_box.spec},{rsync_box.spec}", "--src", "x", "--dst", "y")
    assert proc.returncode == 2


def test_forcing_rsync_on_a_box_without_it_is_a_usage_error(sftp_box, sync_env, tmp_path):
    proc, doc = run_cli(sync_env, "push", "--host", sftp_box.spec, "--src", str(tmp_path), "--dst",
                        str(tmp_path / "r"), "--engine", "rsync")
    assert proc.returncode == 2 and "rsync is not installed on norsync" in doc["summary"]


def test_unreachable_box_fails_fast_with_exit_3(rig, sync_env, tmp_path):
    rig.alias("sync-nowhere")  # a port nobody listens on
    src = tmp_path / "src"
    src.mkdir()
    proc, doc = run_cli(sync_env, "push", "--host", "sync-nowhere", "--src", str(src), "--dst", "/tmp/x", timeout=60)
    assert proc.returncode == 3 and doc["error"]["kind"] == "unreachable", proc.stdout[-1000:]


@pytest.mark.parametrize("engine", ["rsync", "sftp"])
def test_a_users_file_named_like_the_pull_manifest_is_synced_and_never_replaced(engine, request, sync_env,
                                                                                 tmp_path):
    """A user file named `.gpuops-manifest.json` was silently left out of a push and replaced by
    gpuops' own manifest on pull; both said verified."""
    box = request.getfixturevalue("rsync_box" if engine == "rsync" else "sftp_box")
    src, remote, back = tmp_path / "src", tmp_path / "remote", tmp_path / "back"
    src.mkdir()
    (src / ".gpuops-manifest.json").write_text('{"mine": "the run config"}\n')
    (src / "weights.bin").write_bytes(os.urandom(1000))
    proc, doc = run_cli(sync_env, "push", "--host", box.spec, "--src", str(src), "--dst", str(remote))
    assert proc.returncode == 0 and doc["data"]["engine"] == engine, proc.stderr + proc.stdout[-2000:]
    assert snapshot(remote) == snapshot(src)
    proc, doc = run_cli(sync_env, "pull", "--host", box.spec, "--src", str(remote), "--dst", str(back))
    assert proc.returncode == 0 and doc["data"]["verified"], proc.stderr + proc.stdout[-2000:]
    assert snapshot(back) == snapshot(src), "the user's file came back as it was"
    kept = json.loads(Path(pullindex.manifest_for(str(back))).read_text())
    assert {f["path"] for f in kept["files"]} == {".gpuops-manifest.json", "weights.bin"}
