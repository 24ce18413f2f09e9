"""Ctrl-C as a terminal sends it (SIGINT to the whole foreground process group) on a real `logs
--follow` and a real `wait` over the sshd rig: exit 130, where the job stands, and the exact
command that goes on; and how a follow that saw the job end says so."""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading

from gpuops.ops import jobs as op
from tests.conftest import ROOT
from tests.jobs.helpers import wait_for

TICKS = "for i in $(seq 1 600); do echo tick $i; sleep 0.1; done"


def _started(argv):
    """The CLI in a session of its own, as a shell runs a foreground job; its output read as it comes."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuops", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    out = bytearray()
    threading.Thread(target=lambda: [out.extend(c) for c in iter(lambda: proc.stdout.read1(4096), b"")],
                     daemon=True).start()
    return proc, out


def _ctrl_c(proc):
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=30)
    return proc.stderr.read().decode()


def test_ctrl_c_on_a_follow_says_the_job_runs_on_and_how_to_resume(box, jobs_box, jobs_dir):
    job = op.launch(box, command=TICKS, name="ticker", jobs_dir=str(jobs_dir))["data"]["job"]["job_id"]
    common = ["--host", jobs_box.spec, "--jobs-dir", str(jobs_dir)]
    proc, out = _started(["logs", *common, "-j", "ticker", "-f"])
    try:
        assert wait_for(lambda: b"tick 3\n" in out, timeout=30), "the follow never printed"
        err = _ctrl_c(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    line = re.search(r"^gpuops: ticker is RUNNING; stopped following \(SIGINT\)\. Resume: (.*)$", err, re.M)
    assert line and "Traceback" not in err, err
    resume = shlex.split(line.group(1))
    offset = int(resume[resume.index("--from-offset") + 1])
    assert offset == len(out) and bytes(out) == (jobs_dir / job / "log").read_bytes()[:offset]
    again = subprocess.run([sys.executable, "-m", *resume, "--timeout", "1", "--json"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)  # the command it gave goes on from the very next byte
    assert again.returncode == 6 and json.loads(again.stdout)["data"]["start_offset"] == offset, again.stderr


def test_ctrl_c_on_a_wait_says_where_the_job_stands_and_how_to_wait_on(box, jobs_box, jobs_dir, fresh_logins):
    job = op.launch(box, command=TICKS, jobs_dir=str(jobs_dir))["data"]["job"]["job_id"]
    proc, out = _started(["wait", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "-j", job[-6:],
                        "--timeout", "300", "--after-event", "2"])
    try:
        assert wait_for(lambda: _waiting_on(jobs_box), timeout=30), "the wait never reached the box"
        err = _ctrl_c(proc)
        assert wait_for(lambda: b"next:" in out, timeout=10), (proc.returncode, err, out)
        out = out.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert f"{jobs_box.spec}: {job}: RUNNING; stopped waiting (SIGINT) after " in out, out
    command = re.sub(r" \\\n\s+", " ", out.split("next: ", 1)[1]).strip()  # folded to paste whole
    assert command.startswith(f"gpuops wait --host {jobs_box.spec} --job {job} --until terminal --timeout "), out
    assert re.search(r"--timeout \d+ --after-event 2\b", command), out  # the events it had not shown stay ahead


def test_a_follow_that_sees_the_job_end_says_how_it_ended_in_words(box, jobs_box, jobs_dir):
    """It printed `bytes 0..1343; next offset 1343` instead of how the job ended."""
    op.launch(box, command="echo one; sleep 1; echo two; exit 3", name="demo", jobs_dir=str(jobs_dir))
    r = subprocess.run([sys.executable, "-m", "gpuops", "logs", "--host", jobs_box.spec, "--jobs-dir",
                        str(jobs_dir), "demo", "-f"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.stdout == "one\ntwo\n" and r.returncode == 1
    assert re.fullmatch(r"gpuops: demo FAILED \(exit 3\) after [12]s\n", r.stderr), r.stderr


def _waiting_on(jobs_box):
    """True once the on-box `wait` entry (python3 ... -c BOOTSTRAP N wait) runs under this box's sshd."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"-c" in argv and argv[-2:] == [b"wait", b""] and jobs_box.proc.pid in _ancestors(int(pid)):
            return True
    return False


def _ancestors(pid):
    seen = []
    while pid > 1:
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
        seen.append(pid)
    return seen
