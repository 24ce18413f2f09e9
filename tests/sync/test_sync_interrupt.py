"""Ctrl-C during a push, a pull or a verify (SIGINT to the whole foreground process group, as a
terminal sends it): exit 130, a line that says what is kept and the exact command that
resumes, and the re-run does resume and verify."""

import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from gpuops.units import human_bytes
from tests.conftest import ROOT
from tests.sync.conftest import run_cli, snapshot

BIG = 8 << 20


@pytest.mark.parametrize("engine", ["rsync", "sftp"])
def test_ctrl_c_mid_push_says_how_to_resume_and_the_rerun_does(engine, request, metered, sync_env, tmp_path):
    box = request.getfixturevalue("rsync_box" if engine == "rsync" else "sftp_box")
    alias, _ = metered(box, 4 << 20)  # ~2 s for the file: time to interrupt it mid-way
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(BIG))
    argv = ["push", "--host", alias, "--src", str(src), "--dst", str(dst), "--engine", engine]
    _interrupt_mid_transfer(argv, sync_env, dst)
    done, doc = run_cli(sync_env, *argv)
    assert done.returncode == 0 and doc["data"]["verified"], done.stdout[-1500:]
    assert snapshot(dst) == snapshot(src)
    _says_it_resumed(doc, "on the box")


def test_ctrl_c_mid_pull_says_how_to_resume_and_the_rerun_does(rsync_box, metered, sync_env, tmp_path):
    alias, _ = metered(rsync_box, 4 << 20)
    src, dst = tmp_path / "on-box", tmp_path / "here"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(BIG))
    argv = ["pull", "--host", alias, "--src", str(src), "--dst", str(dst)]
    _interrupt_mid_transfer(argv, sync_env, dst)
    done, doc = run_cli(sync_env, *argv)
    assert done.returncode == 0 and doc["data"]["verified"], done.stdout[-1500:]
    assert snapshot(dst) == snapshot(src)
    _says_it_resumed(doc, "here")


def _says_it_resumed(doc, where):
    """A resumed transfer never said so: it sent 87.6 of 190.7 MiB and called it a plain push."""
    reused = doc["data"]["bytes_reused"]
    assert (1 << 20) < reused < BIG and doc["data"]["bytes_sent"] + reused >= BIG, doc["data"]
    moved = "sent" if where == "on the box" else "received"
    assert f"({moved} 1 files, " in doc["summary"], doc["summary"]  # a pull said it sent them
    assert f"; {human_bytes(reused)} of partial files resumed" in doc["summary"], doc["summary"]


def test_ctrl_c_mid_verify_says_nothing_was_claimed_and_how_to_run_it_again(rsync_box, metered, sync_env, tmp_path):
    alias, _ = metered(rsync_box, 2 << 10)  # the on-box walker alone takes seconds to arrive at this rate
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("a\n")
    argv = ["verify", "--host", alias, "--local", str(tree), "--remote", str(tree)]
    proc = _started(argv, sync_env)
    time.sleep(1.5)
    assert proc.poll() is None, "the verify ended before it could be interrupted"
    _ctrl_c(proc, "verify", argv)
    done, doc = run_cli(sync_env, "verify", "--host", rsync_box.spec, *argv[3:])
    assert done.returncode == 0 and doc["ok"], done.stdout[-1500:]


def _started(argv, env):
    return subprocess.Popen([sys.executable, "-m", "gpuops", *argv], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _interrupt_mid_transfer(argv, env, dst):
    """Ctrl-C once more than 1 MiB of big.bin has landed (in its partial file) under `dst`."""
    proc = _started(argv, env)
    deadline = time.monotonic() + 30
    while not any(p.stat().st_size > (1 << 20) for p in dst.rglob("*big.bin*") if p.is_file()):
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the transfer ended (exit {proc.returncode}) before it got going: {err[-1500:]}")
        assert time.monotonic() < deadline, "the transfer never got going"
        time.sleep(0.02)
    _ctrl_c(proc, argv[0], argv)


def _ctrl_c(proc, verb, argv):
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out[-500:], err[-500:])
    lines = err.splitlines()
    said = [i for i, x in enumerate(lines) if x.startswith(f"gpuops: {verb} interrupted; ")]
    assert said, err
    at = next(i for i in range(said[0], len(lines)) if lines[i].startswith("  next: gpuops "))
    command = [lines[at]]  # the `next:` line of its own, folded with backslashes where it is long
    while command[-1].endswith(" \\"):
        command.append(lines[at + len(command)])
    joined = " ".join(x.removesuffix(" \\").strip().removeprefix("next: ") for x in command)
    assert shlex.split(joined) == ["gpuops", *argv], err
    assert "Traceback" not in err
