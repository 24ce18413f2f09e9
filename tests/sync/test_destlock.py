"""gpuops.onbox.sync.destlock, the flock one writer per destination holds: in-process, and as the
shipped entry whose lock lasts exactly as long as its client's channel."""

import json
import os
import subprocess
import threading

from gpuops import onbox
from gpuops.onbox.sync import destlock
from gpuops.remote import wrap

OWNER = {"verb": "push", "pid": 4242, "host": "laptop", "token": "t"}


def test_a_held_lock_names_its_holder_and_is_free_once_closed(tmp_path):
    path = destlock.beside(str(tmp_path / "dst"))
    fd, _ = destlock.take(path, OWNER)
    again, holder = destlock.take(path, {"pid": 1})
    assert again is None and holder["pid"] == 4242 and holder["host"] == "laptop" and holder["started_at"]
    os.close(fd)
    fd, holder = destlock.take(path, {"pid": 1})
    assert fd is not None and holder is None
    os.close(fd)


def test_a_taker_waits_for_a_holder_that_is_letting_go(tmp_path):
    path = destlock.beside(str(tmp_path / "dst"))
    fd, _ = destlock.take(path, OWNER)
    threading.Timer(0.2, os.close, [fd]).start()
    taken, holder = destlock.take(path, {"pid": 1}, wait_s=5)
    assert taken is not None and holder is None
    os.close(taken)


def test_a_released_lock_leaves_no_file_and_a_waiting_taker_never_holds_it_beside_another(tmp_path):
    """Lock files stayed beside every destination after every transfer. Now the holder removes its
    file as it lets go; a taker that was waiting on that file's inode takes the one at the path."""
    path = destlock.beside(str(tmp_path / "dst"))
    fd, _ = destlock.take(path, OWNER)
    got = {}

    def wait_for_it():
        got["fd"], got["holder"] = destlock.take(path, {"pid": 2}, wait_s=5)

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    destlock.release(fd, path)
    assert not os.path.exists(path) or got.get("fd") is not None
    waiter.join(10)
    assert got["fd"] is not None and os.path.exists(path), "the waiter holds the file at the path"
    third, holder = destlock.take(path, {"pid": 3})
    assert third is None and holder["pid"] == 2, "no second holder through another inode"
    destlock.release(got["fd"], path)
    assert not os.path.exists(path)


def test_a_taker_that_locked_a_removed_file_takes_the_one_at_the_path(tmp_path, monkeypatch):
    """The race a removed lock file opens: a taker opened the file, its holder removed it as it let
    go, then the taker's flock succeeds on an inode no path leads to. It must take again."""
    path = destlock.beside(str(tmp_path / "dst"))
    flock, opened = destlock.fcntl.flock, []

    def holder_lets_go_first(fd, op):
        if not opened:
            opened.append(os.fstat(fd).st_ino)
            os.unlink(path)
        return flock(fd, op)

    monkeypatch.setattr(destlock.fcntl, "flock", holder_lets_go_first)
    fd, _ = destlock.take(path, OWNER)
    assert os.fstat(fd).st_ino == os.stat(path).st_ino, "it holds the file at the path"
    assert json.loads(open(path).read())["pid"] == 4242
    destlock.release(fd, path)


def test_two_spellings_of_one_destination_share_a_lock(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    where = str(tmp_path / "locks")
    spellings = [str(tmp_path / "real"), str(tmp_path / "alias") + "/", str(tmp_path / "real" / ".." / "real")]
    assert len({destlock.file_for(p, where) for p in spellings}) == 1
    assert destlock.file_for(str(tmp_path / "other"), where) != destlock.file_for(spellings[0], where)
    assert len({destlock.beside(p) for p in spellings}) == 1


def _entry(env, path):
    src = onbox.script("destlock")
    proc = subprocess.Popen(["sh", "-c", wrap.python_line(len(src), (), site=False)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)
    proc.stdin.write(src + json.dumps({"path": path, "owner": OWNER}).encode())
    proc.stdin.close()
    return proc, json.loads(proc.stdout.readline())


def test_the_entry_holds_the_lock_until_its_client_is_gone(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    first, said = _entry(env, str(tmp_path / "dst"))
    assert said == {"holding": str(tmp_path / ".dst.gpuops-lock")}
    second, said = _entry(env, str(tmp_path / "dst"))
    assert second.wait(10) == 0 and said["held_by"]["pid"] == 4242 and said["held_by"]["lock_pid"]
    first.stdout.close()  # the channel is gone: stdout breaks, and the lock goes with the process
    assert first.wait(10) == 0
    third, said = _entry(env, str(tmp_path / "dst"))
    assert "holding" in said
    third.kill()
    third.wait()


def test_the_lock_lives_beside_the_destination_and_falls_back_where_its_parent_is_not_ours(tmp_path):
    """Two pushes into one directory through logins with different HOMEs both held "the" lock:
    each HOME had its own."""
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    lock, fd, _ = destlock.take_for(str(tmp_path / "alias" / "run"), OWNER, str(tmp_path / "home-a"))
    assert lock == str(tmp_path / "real" / ".run.gpuops-lock") and os.path.isfile(lock)
    _, again, holder = destlock.take_for(str(tmp_path / "real" / "run") + "/", {"pid": 1}, str(tmp_path / "home-b"))
    assert again is None and holder["pid"] == 4242, "another HOME sees the same lock"
    os.close(fd)
    # A directory no one may add a file to (even root: sysfs): the per-user lock is taken instead.
    lock, fd, _ = destlock.take_for("/sys/gpuops-test-run", OWNER, str(tmp_path / "home-a"))
    assert lock.startswith(str(tmp_path / "home-a") + "/")
    os.close(fd)
