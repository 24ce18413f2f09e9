"""One writer per destination (gpuops.sync.lock over gpuops.onbox.sync.destlock): a second push or
pull to a destination that one is writing is refused with exit 5, naming the holder, and the
destination is one tree; a holder that was killed is taken over. Real sshd, real processes."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

from gpuops.onbox.sync import destlock
from gpuops.sync import lock
from tests.sync.conftest import ROOT, run_cli, snapshot

SLOW = 1 << 20  # bytes/s through the metered alias: a 4 MiB push takes seconds


def _tree(root, tag, size=4 << 20):
    (root / "sub").mkdir(parents=True)
    (root / "weights.bin").write_bytes(os.urandom(size))
    (root / "sub" / "tag.txt").write_text(tag)
    return root


def _start(env, *args):
    return subprocess.Popen([sys.executable, "-m", "gpuops", *args, "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)


def _held_by(lock_files, pid, timeout=30):
    """The record in the first of `lock_files` that process `pid` holds, once it does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for lock_file in lock_files:
            try:
                with open(lock_file) as f:
                    record = json.loads(f.read() or "{}")
            except (OSError, ValueError):
                record = {}
            if record.get("pid") == pid:
                return record
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} never took {lock_files}")


def _box_lock(box_cache, dst):
    """Where the box keeps the lock of `dst` (beside it; before, under the login's own HOME)."""
    return [destlock.beside(str(dst)),
            destlock.file_for(str(dst), destlock.directory({"XDG_CACHE_HOME": str(box_cache)}))]


def test_a_second_push_to_a_destination_being_written_is_refused_naming_the_holder(sftp_box, metered, sync_env,
                                                                                   box_cache, tmp_path):
    """Two pushes to one destination both ended "verified", exit 0, and the destination was a mix
    of both trees; SFTP pushes even shared their .name.gpuops-part files."""
    alias, _ = metered(sftp_box, SLOW)
    a, b, dst = _tree(tmp_path / "a", "a"), _tree(tmp_path / "b", "b"), tmp_path / "dst"
    first = _start(sync_env, "push", "--host", alias, "--src", str(a), "--dst", str(dst))
    holder = _held_by(_box_lock(box_cache, dst), first.pid)
    proc, doc = run_cli(sync_env, "push", "--host", sftp_box.spec, "--src", str(b), "--dst", str(dst))
    still_running = first.poll() is None
    out, err = first.communicate(timeout=120)
    assert proc.returncode == 5 and doc["error"]["kind"] == "busy", proc.stderr + proc.stdout[-2000:]
    assert doc["error"]["retryable"] is True and doc["error"]["retry_after_s"] > 0
    assert doc["next"] == [{"argv": ["gpuops", "push", "--host", sftp_box.spec, "--src", str(b), "--dst", str(dst),
                                     "--json"], "why": f"the same, once the other transfer has ended (in about "
                                                       f"{doc['error']['retry_after_s']:g}s)"}]
    message = doc["error"]["message"]
    assert f"gpuops push, pid {first.pid} on {socket.gethostname()}, started {holder['started_at']}" in message
    assert still_running and first.returncode == 0, err + out[-2000:]
    assert snapshot(dst) == snapshot(a)


def test_two_logins_with_different_homes_pushing_into_one_directory_are_one_writer_at_a_time(
        rig, sftp_box, no_rsync_path, metered, sync_env, box_cache, tmp_path):
    """Two pushes into one directory from logins with different HOMEs (two accounts, or two boxes
    sharing an NFS path) ran at once: 33 files of one tree and 7 of the other, and one push exited
    0 "verified". The lock lived under each login's HOME; it lives beside the destination now."""
    (tmp_path / "home-b").mkdir()
    other = rig.box("norsync-home-b", env={"PATH": str(no_rsync_path), "HOME": str(tmp_path / "home-b"),
                                           "XDG_CACHE_HOME": str(tmp_path / "cache-b")})
    try:
        alias, _ = metered(sftp_box, SLOW)
        a, b, dst = _tree(tmp_path / "a", "a"), _tree(tmp_path / "b", "b"), tmp_path / "dst"
        first = _start(sync_env, "push", "--host", alias, "--src", str(a), "--dst", str(dst))
        _held_by(_box_lock(box_cache, dst), first.pid)
        proc, doc = run_cli(sync_env, "push", "--host", other.spec, "--src", str(b), "--dst", str(dst))
        out, err = first.communicate(timeout=120)
        assert proc.returncode == 5 and doc["error"]["kind"] == "busy", proc.stderr + proc.stdout[-2000:]
        assert f"gpuops push, pid {first.pid}" in doc["error"]["message"]
        assert first.returncode == 0, err + out[-2000:]
        assert snapshot(dst) == snapshot(a)
        assert not any(".gpuops-lock" in name for name in snapshot(dst)), "the lock is not in the tree"
    finally:
        other.stop()


def test_the_lock_of_a_push_that_was_killed_is_taken_over(sftp_box, metered, sync_env, box_cache, tmp_path):
    """A push killed mid-transfer must not leave its destination locked: the kernel drops the
    flock with the process on the box once the dead client's channel is gone."""
    alias, _ = metered(sftp_box, SLOW)
    a, b, dst = _tree(tmp_path / "a", "a"), _tree(tmp_path / "b", "b"), tmp_path / "dst"
    first = _start(sync_env, "push", "--host", alias, "--src", str(a), "--dst", str(dst))
    _held_by(_box_lock(box_cache, dst), first.pid)
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    proc, doc = run_cli(sync_env, "push", "--host", sftp_box.spec, "--src", str(b), "--dst", str(dst))
    assert proc.returncode == 0 and doc["data"]["verified"], proc.stderr + proc.stdout[-2000:]
    assert {k: v for k, v in snapshot(dst).items() if not k.endswith(".gpuops-part")} == snapshot(b)


def test_a_second_pull_into_a_destination_being_written_is_refused(rsync_box, sync_env, tmp_path, monkeypatch):
    remote = _tree(tmp_path / "remote", "r", size=1000)
    back = tmp_path / "back"
    args = ["pull", "--host", rsync_box.spec, "--src", str(remote), "--dst", str(back)]
    monkeypatch.setenv("GPUOPS_STATE_DIR", sync_env["GPUOPS_STATE_DIR"])
    held = lock.Here(str(back), "pull")
    try:
        proc, doc = run_cli(sync_env, *args)
    finally:
        held.release()
    assert proc.returncode == 5 and f"gpuops pull, pid {os.getpid()} on " in doc["error"]["message"], proc.stdout
    assert not back.exists()

    # A holder killed outright is no holder: its flock went with it.
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from gpuops.sync import lock; "
                               "lock.Here(sys.argv[1], 'pull'); print('held', flush=True); time.sleep(60)", str(back)],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT, env=sync_env)
    assert holder.stdout.readline() == "held\n"
    assert run_cli(sync_env, *args)[0].returncode == 5
    holder.kill()
    holder.wait()
    proc, doc = run_cli(sync_env, *args)
    assert proc.returncode == 0 and snapshot(back) == snapshot(remote), proc.stdout[-2000:]
