"""Ctrl-C during a transfer (SIGINT to the whole foreground process group, as a terminal sends it):
exit 130, one line that says nothing was claimed and the exact command that resumes, and the
re-run does resume and verify."""

import os
import signal
import subprocess
import sys
import time

import pytest

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
    proc = subprocess.Popen([sys.executable, "-m", "gpuops", *argv], cwd=ROOT, env=sync_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 30
    while not any(p.stat().st_size > (1 << 20) for p in dst.rglob("*big.bin*") if p.is_file()):
        assert time.monotonic() < deadline and proc.poll() is None, "the transfer never got going"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out[-500:], err[-500:])
    line = [x for x in err.splitlines() if x.startswith("gpuops: push interrupted")]
    assert line and line[0].endswith("gpuops " + " ".join(argv)), err
    assert "Traceback" not in err
    done, doc = run_cli(sync_env, *argv)
    assert done.returncode == 0 and doc["data"]["verified"], done.stdout[-1500:]
    assert snapshot(dst) == snapshot(src)
