"""`gpuops triage` as a user and an agent run it: inputs, exit codes, the JSON envelope, markdown."""

import json
import os
import subprocess
import sys

import pytest

from gpuops.onbox.triage import signatures as S
from gpuops.ops.triage_locate import parse_scontrol
from tests.triage.helpers import EXPECTED, log

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_json(cli, *args):
    proc = cli("triage", *args, "--json")
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("name, state, code", [
    ("status_completed", None, 0),
    ("status_running", None, 0),
    ("status_hanging", "RUNNING", 1),
    ("oom_gpu", None, 1),
    ("status_cancelled", None, 1),
    ("status_unknown_death", None, 1),
])
def test_exit_code_follows_the_status(cli_inproc, name, state, code):
    args = ["--log", str(log(name)), "--now", EXPECTED[name]["now"]] + (["--slurm-state", state] if state else [])
    rc, doc = run_json(cli_inproc, *args)
    assert rc == code
    assert doc["command"] == "triage" and doc["ok"] is (code == 0)
    assert list(doc["data"]) == [k for k in S.DATA_KEYS if k not in ("next", "advice")]
    assert list(doc["data"]["progress"]) == list(S.PROGRESS_KEYS)
    assert doc["data"]["status"] == EXPECTED[name]["expect"]["status"]
    assert doc["advice"] and all(set(s) <= {"argv", "why"} for s in doc["next"])


def test_markdown_report_for_people(cli_inproc):
    proc = cli_inproc("triage", "--log", str(log("cascade_oom_nccl_heartbeat")), "--now", "2025-03-02T10:40:00",
               "--format", "md")
    assert proc.returncode == 1
    out = proc.stdout
    for piece in ("## Job triage:", "**Status:** failed", "**Primary failure:** oom-host", "### What happened",
                  "### Evidence", "| Last periodic checkpoint | step 200 |", "### Additional findings",
                  "- **nccl-timeout**", "### Recommended next steps", "1. Lower per_device_batch_size"):
        assert piece in out, piece


def test_the_report_is_doctor_style_like_every_verbs_and_markdown_when_asked(cli_inproc):
    """triage rendered as a different program (Markdown headings and tables) from every other verb."""
    args = ("triage", "--log", str(log("cascade_oom_nccl_heartbeat")), "--now", "2025-03-02T10:40:00")
    piped, rich = cli_inproc(*args), cli_inproc(*args, "--format", "rich")
    assert piped.returncode == 1 and piped.stdout == rich.stdout
    lines = piped.stdout.splitlines()
    assert lines[0] == lines[-1] and lines[0].endswith(": failed: oom-host (also nccl-timeout, "
                                                       "heartbeat-timeout, node-fail); 211 of 5000 steps")
    assert "✗ FAIL triage.oom-host" in piped.stdout and "  878: 1: Killed" in piped.stdout
    assert "**" not in piped.stdout and "##" not in piped.stdout and "|" not in piped.stdout
    assert "**Status:** failed" in cli_inproc(*args, "--format", "md").stdout
    detailed = cli_inproc(*args, "--verbose").stdout
    assert "what happened: The host ran out of memory" in detailed and "    text: 1: Killed" in detailed


@pytest.mark.parametrize("args, message", [
    ([], "exactly one of"),
    (["--log", "a.log", "--dir", "d"], "got --log, --dir"),
    (["--host", "box1", "--log", "a.log"], "--host needs --job"),
    (["--log", "x.log", "--now", "yesterday"], "--now must be an ISO 8601 time"),
    (["--slurm-id", "12ab"], "--slurm-id must be a Slurm job id"),
    (["--host", "a,b", "--job", "j1"], "triage takes one host at a time"),
    (["--log", "x.log", "--format", "html"], "--format takes rich or md"),
])
def test_usage_errors_exit_2_with_one_line(cli, args, message):
    proc = cli("triage", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_job_is_looked_up_like_status_does_by_id_key_or_name(cli_inproc, tmp_path):
    """A --job is resolved by the job's own records on the box, as for status and logs: a path-like
    name is just a name nobody has."""
    env = {**os.environ, "GPUOPS_JOBS_DIR": str(tmp_path)}
    proc = cli_inproc("triage", "--job", "../etc", "--json", env=env)
    assert proc.returncode == 4 and "no job '../etc'" in json.loads(proc.stdout)["error"]["message"]


def test_missing_things_exit_4(cli_inproc, tmp_path):
    (tmp_path / "outputs" / "ckpt-shared").mkdir(parents=True)
    for args in (["--log", str(tmp_path / "nope.log")], ["--dir", str(tmp_path / "nope")],
                 ["--dir", str(tmp_path / "outputs" / "ckpt-shared")],
                 ["--slurm-id", "42", "--outputs", str(tmp_path / "outputs")],
                 ["--slurm-id", "42", "--outputs", str(tmp_path / "missing")]):
        rc, doc = run_json(cli_inproc, *args)
        assert rc == 4, args
        assert doc["error"]["kind"] == "not-found" and doc["ok"] is False


@pytest.fixture
def outputs(tmp_path):
    """The harness layout: <id>-<config>/ with a `log` link to the sibling <id>-<config>.log."""
    out = tmp_path / "outputs"
    out.mkdir()
    (out / "7877-llama2-7b.log").write_bytes(log("heartbeat_false_positive").read_bytes())
    (out / "7877-llama2-7b").mkdir()
    os.symlink("../7877-llama2-7b.log", out / "7877-llama2-7b" / "log")
    (out / "7877-llama2-7b" / "ray_logs" / "session_1").mkdir(parents=True)
    (out / "7877-llama2-7b" / "ray_logs" / "session_1" / "worker-01.out").write_text(
        "INFO No existing checkpoints found, not restoring checkpoint.\n")
    (out / "7990-mixtral.log").write_bytes(log("oom_gpu").read_bytes())  # a log without a job directory
    (out / "checkpoints-llama2").mkdir()  # a shared checkpoint directory: no `log`, not a job
    return out


def test_job_directory_and_slurm_id_resolve_to_the_same_log(cli_inproc, outputs):
    now = EXPECTED["heartbeat_false_positive"]["now"]
    rc1, by_dir = run_json(cli_inproc, "--dir", str(outputs / "7877-llama2-7b"), "--now", now)
    rc2, by_id = run_json(cli_inproc, "--slurm-id", "7877", "--outputs", str(outputs), "--now", now)
    assert rc1 == rc2 == 1
    assert by_dir["data"] == by_id["data"]
    assert by_dir["data"]["primary"] == "heartbeat-timeout"
    ctx = [f for f in by_id["findings"] if f["id"] == "triage.context"][0]["evidence"]
    assert ctx["log"] == os.path.realpath(outputs / "7877-llama2-7b.log")
    assert ctx["job_dir"] == str(outputs / "7877-llama2-7b") and ctx["slurm_id"] == "7877"
    assert ctx["restore_confirmed"] == "fresh start: ray_logs/session_1/worker-01.out"


def test_slurm_id_finds_a_bare_log_file(cli_inproc, outputs):
    rc, doc = run_json(cli_inproc, "--slurm-id", "7990", "--outputs", str(outputs))
    assert rc == 1 and doc["data"]["primary"] == "oom-gpu"


def test_relative_outputs_default(cli_inproc, outputs):
    proc = subprocess.run([sys.executable, "-m", "gpuops", "triage", "--slurm-id", "7990", "--json"],
                          capture_output=True, text=True, cwd=outputs.parent,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 1 and json.loads(proc.stdout)["data"]["primary"] == "oom-gpu"


def test_json_mode_imports_no_ui_or_ssh_libraries():
    code = ("import sys; sys.argv = ['gpuops', 'triage', '--log', %r, '--json'];\n"
            "from gpuops.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED', sorted(m for m in ('rich', 'fabric', 'paramiko') if m in sys.modules), file=sys.stderr)"
            % str(log("status_completed")))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "LOADED []" in proc.stderr, proc.stderr[-500:]


def test_scontrol_output_parsing():
    sample = ("JobId=7877 JobName=llama2\n   UserId=me(1000) GroupId=me(1000)\n"
              "   JobState=CANCELLED Reason=None Dependency=(null)\n   RunTime=01:02:03 TimeLimit=2-00:00:00\n")
    assert parse_scontrol(sample) == "CANCELLED"
    assert parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None


def test_now_past_the_stall_bar_says_the_log_stopped_logging_and_counts_the_steps_lost(cli_inproc):
    """Issue 41: with --now hours after the last step the steps since the last checkpoint are counted
    (the seed's projection), still without a death; without --now nothing of the kind is said."""
    path = os.path.join(ROOT, "tests", "fixtures", "triage", "shapes", "stopped_logging", "seed_harness_stale.log")
    rc, doc = run_json(cli_inproc, "--log", path, "--now", "2025-03-02T13:12:12")
    assert (doc["data"]["status"], doc["data"]["primary"]) == ("unknown", None) and rc == 1
    assert "stopped logging 3h 00m before now (5400 step times)" in doc["summary"]
    assert doc["data"]["progress"]["steps_lost"] == 16 and doc["data"]["progress"]["expected_step_now"] == 316 + 5400
    rc, plain = run_json(cli_inproc, "--log", path)
    assert "stopped logging" not in plain["summary"] and plain["data"]["progress"]["steps_lost"] is None


def test_a_log_with_no_end_says_so_and_claims_no_death(cli_inproc):
    """Issue 27: a log that simply stops while training was reported as `unknown-death`, "killed
    from outside": a death nobody observed, which sends a person to kill or restart a healthy run."""
    path = os.path.join(ROOT, "tests", "fixtures", "triage", "frameworks", "torch", "cut_off.log")
    rc, doc = run_json(cli_inproc, "--log", path, "--now", "2025-03-03T10:00:00")
    assert rc == 1 and (doc["data"]["status"], doc["data"]["primary"]) == ("unknown", None)
    assert doc["summary"].endswith("no end in the log") and "unknown-death" not in json.dumps(doc)
    md = cli_inproc("triage", "--log", path, "--now", "2025-03-03T10:00:00", "--format", "md").stdout
    assert "No end in the log" in md and "killed" not in md.split("### Recommended next steps")[0]
