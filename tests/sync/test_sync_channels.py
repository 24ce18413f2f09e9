"""How many exec channels a push opens on the box (each one runs the login rc and starts an
interpreter: on a box with conda or pyenv in its rc, most of a call's cost). Counted in sshd's log."""

import time

import pytest

from tests.sync.conftest import run_cli

# Counted on calls that each make their own connection: a kept master's helper carries calls
# without exec channels, which test_resident.py counts on its own.
pytestmark = pytest.mark.usefixtures("fresh_logins")


def _tree(root):
    root.mkdir()
    for i in range(5):
        (root / f"f{i}.txt").write_text(f"file {i}\n" * 100)


def test_a_push_opens_the_lock_and_listing_transfer_follower_and_verifier_channels(rsync_box, sync_env, tmp_path):
    _tree(tmp_path / "src")
    before = rsync_box.exec_requests()
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(tmp_path / "src"), "--dst",
                        str(tmp_path / "dst"))
    assert proc.returncode == 0 and doc["data"]["verified"], proc.stderr
    # the lock (which also lists the destination), rsync, the landing follower, the verifier
    assert rsync_box.exec_requests() - before == 4


def test_a_push_with_nothing_to_send_opens_one_channel(rsync_box, sync_env, tmp_path):
    _tree(tmp_path / "src")
    # Digests are kept only for files whose ctime is safely in the past (gpuops.onbox.sync.digestcache):
    # the second push stores what the first wrote, and the third finds every digest cached.
    for _ in range(2):
        proc, _ = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(tmp_path / "src"), "--dst",
                          str(tmp_path / "dst"))
        assert proc.returncode == 0, proc.stderr
        time.sleep(0.3)
    before = rsync_box.exec_requests()
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(tmp_path / "src"), "--dst",
                        str(tmp_path / "dst"))
    assert proc.returncode == 0 and doc["data"]["verified"] and doc["data"]["sent_paths"] == 0, proc.stderr
    assert rsync_box.exec_requests() - before == 1, "the lock's channel also said what is at the destination"
