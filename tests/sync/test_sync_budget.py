"""A destination that is too small: refused up front with the numbers; and when it fills up
mid-transfer anyway, a non-zero exit, a clear message, and no half-written file under its final
name. The destination is a real 2 MiB tmpfs with 64 inodes."""

import hashlib
import os
import re

import pytest

from gpuops.sync import plan
from tests.sync.conftest import run_cli


def _files(root):
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def test_too_many_bytes_is_refused_before_sending(rsync_box, small_fs, sync_env, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.bin").write_bytes(os.urandom(3 << 20))
    dst = small_fs / "run"
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(src), "--dst", str(dst))
    assert proc.returncode == 5, proc.stdout[-2000:]
    msg = doc["summary"]
    assert doc["error"]["kind"] == "refused" and "short of bytes" in msg
    # What is needed, and what is free: the 2 MiB tmpfs less the block of the destination's lock,
    # which lived beside it (on its filesystem) while the push was judged, and went with the push.
    st = os.statvfs(small_fs)
    said = [int(n) for n in re.findall(r"\((\d+) B\)", msg)]
    assert 3 << 20 in said, msg
    assert any(0 < st.f_bavail * st.f_frsize - n <= 2 * st.f_frsize for n in said), msg
    assert os.listdir(small_fs) == [], "no lock file stays once the push ended"
    assert str(small_fs) in msg and "--no-budget" in msg
    assert not dst.exists(), "a refused push must not even create the destination"


def test_too_many_inodes_is_refused_before_sending(rsync_box, small_fs, sync_env, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(80):
        (src / f"sample-{i}.json").write_text("{}")
    proc, doc = run_cli(sync_env, "push", "--host", rsync_box.spec, "--src", str(src), "--dst", str(small_fs / "ev"))
    assert proc.returncode == 5
    assert "short of inodes" in doc["summary"] and "83 inodes" in doc["summary"]  # 80 files, the root, partial dir, temp file, doc["summary"]


def test_pull_checks_the_local_destination(rsync_box, small_fs, sync_env, tmp_path):
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "ckpt.pt").write_bytes(os.urandom(3 << 20))
    proc, doc = run_cli(sync_env, "pull", "--host", rsync_box.spec, "--src", str(remote), "--dst", str(small_fs / "c"))
    assert proc.returncode == 5 and "short of bytes" in doc["summary"]


@pytest.mark.parametrize("engine", ["rsync", "sftp"])
def test_filling_up_mid_transfer_fails_cleanly(engine, request, small_fs, sync_env, tmp_path):
    box = request.getfixturevalue("rsync_box" if engine == "rsync" else "sftp_box")
    src = tmp_path / "src"
    src.mkdir()
    (src / "a-first.bin").write_bytes(os.urandom(900 << 10))
    (src / "b-second.bin").write_bytes(os.urandom(1500 << 10))   # 2.3 MiB in all: cannot fit in 2 MiB
    dst = small_fs / "run"
    proc, doc = run_cli(sync_env, "push", "--host", box.spec, "--src", str(src), "--dst", str(dst), "--no-budget")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert doc["data"]["engine"] == engine and not doc["data"]["verified"]
    assert "filled up" in doc["summary"] and "nothing half-written" in doc["summary"], doc["summary"]
    assert any(f["id"] == "sync.disk-full" and f["gotcha"] == "U7" for f in doc["findings"])
    landed = _files(dst)
    wanted = _files(src)
    final_names = {k: v for k, v in landed.items() if "/" not in k and not k.startswith(".")}
    assert final_names, "nothing arrived at all: the test did not exercise a mid-transfer fill"
    for name, digest in final_names.items():
        assert digest == wanted[name], f"{name} is under its final name but incomplete"
    assert "b-second.bin" not in final_names


def test_rsync_exit_11_without_its_message_is_judged_by_the_free_space_left():
    # Seen in CI: the receiver's "No space left on device" never reached the client, and the push
    # was reported as a bare "rsync exit 11 (file I/O error)".
    from gpuops.ops.sync import full_by_measure
    from gpuops.sync.outcome import Attempt, Outcome

    src = plan.by_path([["a.bin", "f", 900 << 10, None, None], ["b.bin", "f", 1500 << 10, None, None]])

    def failed():
        o = Outcome("rsync", attempts=[Attempt(11, "fatal", "file I/O error", 0.1, 0)])
        o.fail("fatal", "rsync exit 11 (file I/O error): ")
        return o

    full = failed()
    full_by_measure(full, lambda: 4096, src, ["a.bin", "b.bin"])
    assert full.failure["kind"] == "disk-full" and "4096 B free" in full.failure["message"]
    roomy = failed()
    full_by_measure(roomy, lambda: 64 << 20, src, ["a.bin", "b.bin"])
    assert roomy.failure["kind"] == "fatal"


def test_many_small_files_are_named_before_sending_with_the_shard_advice():
    from gpuops.sync import diskfit

    tiny = plan.by_path([[f"d/{i}.json", "f", 200, None, None] for i in range(diskfit.SMALL_FILES_MIN)])
    evidence = diskfit.small_files(tiny, list(tiny))
    assert evidence["files"] == diskfit.SMALL_FILES_MIN and evidence["median_size"] == "200 B"
    assert diskfit.small_files(tiny, list(tiny)[:-1]) is None, "fewer files than the threshold"
    big = plan.by_path([[f"d/{i}.bin", "f", 1 << 20, None, None] for i in range(diskfit.SMALL_FILES_MIN)])
    assert diskfit.small_files(big, list(big)) is None, "many files, but not small ones"


def test_a_push_of_ten_thousand_tiny_files_warns_with_u25(sync_env, tmp_path):
    from gpuops.sync import diskfit

    src = tmp_path / "src"
    for i in range(diskfit.SMALL_FILES_MIN):
        d = src / f"d{i // 1000}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i}.json").write_text('{"label": %d}\n' % i)
    proc, doc = run_cli(sync_env, "push", "--host", "local", "--src", str(src), "--dst", str(tmp_path / "dst"))
    assert proc.returncode == 0, proc.stdout[-1500:]
    (warn,) = [f for f in doc["findings"] if f["id"] == "sync.small-files"]
    assert warn["gotcha"] == "U25" and warn["evidence"]["files"] == diskfit.SMALL_FILES_MIN and "tar" in warn["fix"]
    # on a terminal: said once, after the verdict (it opened the push above the bar, then came again)
    from tests import terminal

    code, raw = terminal.run("push", "--host", "local", "--src", str(src), "--dst", str(tmp_path / "dst2"),
                             cols=140, env=sync_env)
    lines = terminal.frames(raw)
    said = [i for i, line in enumerate(lines) if "files of median size" in line]
    verdict = next(i for i, line in enumerate(lines) if line.startswith("local: push verified"))
    assert code == 0 and len(said) == 1 and said[0] > verdict, lines[-8:]
