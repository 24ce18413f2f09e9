"""A launch watches the job it started for a second: one that died at once is FAILED with the
line that says why, never a green "started"."""

import json

import pytest

from gpuops.jobs.errorline import first_error
from tests.jobs.test_jobs_cli import run

pytestmark = pytest.mark.usefixtures("launch_confirms")


def test_a_typo_is_failed_127_with_the_shells_words_not_started(jobs_box, jobs_dir):
    """`launch --cmd 'pythn train.py'` printed a green `started`; the job was FAILED 127 a second later."""
    common = ("--host", jobs_box.spec, "--jobs-dir", str(jobs_dir))
    p = run("launch", *common, "--cmd", "pythn train.py")
    assert p.returncode == 1 and "started" not in p.stdout, p.stdout
    head = p.stdout.splitlines()[0]
    assert head.endswith(": FAILED (exit 127) at launch: pythn: command not found"), p.stdout
    assert "  next: gpuops diagnose --host " in p.stdout
    doc = json.loads(run("launch", *common, "--cmd", "python3 -c 'import no_such_module_here'", "--json").stdout)
    assert doc["ok"] is False and doc["data"]["job"]["state"] == "FAILED"
    assert doc["data"]["first_error"] == "ModuleNotFoundError: No module named 'no_such_module_here'"


def test_a_job_that_lives_past_the_first_second_is_started(jobs_box, jobs_dir):
    p = run("launch", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--cmd", "sleep 30", "--json")
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["summary"].startswith("started ") and doc["data"]["job"]["state"] == "RUNNING"


@pytest.mark.parametrize("log,line", [
    ("/root/.gpuops/jobs/20261124-1-ab/cmd: line 1: pythn: command not found\n", "pythn: command not found"),
    ("loading\nTraceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n    import x\n"
     "ModuleNotFoundError: No module named 'x'\n", "ModuleNotFoundError: No module named 'x'"),
    ("python3: can't open file '/w/train.py': [Errno 2] No such file or directory\n",
     "python3: can't open file '/w/train.py': [Errno 2] No such file or directory"),
    ("starting\nusage: train.py [-h]\ntrain.py: error: unrecognized arguments: --lr\n",
     "train.py: error: unrecognized arguments: --lr"),
    ("just some output\nand the end\n", "and the end"),
    ("", None),
])
def test_the_first_error_line_is_the_one_that_says_why(log, line):
    assert first_error(log) == line
