"""`gpuops triage --host H --job J` on gpuops jobs: a real sshd box, real launched jobs."""

import json
import time

import pytest

from gpuops.ops.triage import read_excerpt
from gpuops.remote.local import LocalTarget
from gpuops.onbox.triage.logtriage import triage_pieces
from tests.jobs.helpers import kill_everything
from tests.triage.helpers import EXPECTED, log, long_noisy_hanging_log, now_of


@pytest.fixture(scope="module")
def jobs_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("triage-jobs")
    yield d
    kill_everything(d)


@pytest.fixture(scope="module")
def triagebox(rig, jobs_dir):
    return rig.box("triagebox", env={"GPUOPS_JOBS_DIR": str(jobs_dir)})


def launch(cli, box, command):
    proc = cli("launch", "--host", box.spec, "--cmd", command, "--json")
    doc = json.loads(proc.stdout)
    assert doc["data"]["meta"].get("pid"), proc.stderr  # started (a quick one may have ended already)
    return doc["data"]["job"]["job_id"]


def wait_state(cli, box, job, states, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = json.loads(cli("status", "--host", box.spec, "--job", job, "--json").stdout)
        state = doc["data"]["jobs"][0]["state"]
        if state in states:
            return state
        time.sleep(0.2)
    raise AssertionError(f"job {job} never reached {states}")


def test_ended_job_uses_its_exit_record_in_one_round_trip(cli, triagebox, fresh_logins):
    job = launch(cli, triagebox, f"cat {log('bash_killed')}; exit 137")
    assert wait_state(cli, triagebox, job, ("FAILED",)) == "FAILED"
    before = triagebox.exec_requests()
    proc = cli("triage", "--host", triagebox.spec, "--job", job, "--json", "--now", "2025-03-02T11:00:00")
    assert triagebox.exec_requests() - before == 1  # the log excerpt comes with the job's records
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["host"] == triagebox.spec
    # Without the exit record this log is an unknown death; the record makes it a failure.
    assert (doc["data"]["status"], doc["data"]["primary"], doc["data"]["also"]) == ("failed", "oom-host", [])
    ctx = [f for f in doc["findings"] if f["id"] == "triage.context"][0]["evidence"]
    assert ctx["ended_by"] == "exit record: exit 137" and ctx["job"] == job


def test_a_finished_echo_job_found_by_its_name_is_completed(cli, triagebox):
    """`gpuops launch --cmd 'echo hi'` then `triage --job`: completed with exit 0, not failed with
    exit 1; and --job takes the name a job was launched with, as status and logs do."""
    proc = cli("launch", "--host", triagebox.spec, "--name", "echo-hi", "--cmd", "echo hi", "--json")
    job = json.loads(proc.stdout)["data"]["job"]["job_id"]
    assert wait_state(cli, triagebox, job, ("COMPLETED", "FAILED")) == "COMPLETED"
    proc = cli("triage", "--host", triagebox.spec, "--job", "echo-hi", "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and (doc["data"]["status"], doc["data"]["primary"]) == ("completed", None)
    ctx = [f for f in doc["findings"] if f["id"] == "triage.context"][0]["evidence"]
    assert ctx["job"] == job


def sampled(jobs_dir, job, timeout=20):
    """Wait until the supervisor's growth record has seen the whole log (it samples every second):
    only then does it date every line the job printed."""
    log_path, growth = jobs_dir / job / "log", jobs_dir / job / "growth"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = growth.read_text().split() if growth.exists() else []
        if seen and log_path.exists() and int(seen[-1]) >= log_path.stat().st_size:
            return
        time.sleep(0.1)
    raise AssertionError(f"the supervisor of {job} never recorded its log's size")


def test_live_job_is_running(cli, triagebox, jobs_dir):
    job = launch(cli, triagebox, f"cat {log('status_running')}; sleep 30")
    wait_state(cli, triagebox, job, ("RUNNING", "STALLED"))
    sampled(jobs_dir, job)
    proc = cli("triage", "--host", triagebox.spec, "--job", job, "--json", "--now", EXPECTED["status_running"]["now"])
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0
    assert doc["data"]["status"] == "running"
    # The supervisor's record dates the replayed step lines (written just now, after --now), as
    # status dates them: no step is expected beyond the last one.
    expect = dict(EXPECTED["status_running"]["expect"]["progress"], expected_step_now=120)
    assert doc["data"]["progress"] == expect
    cli("stop", "--host", triagebox.spec, "--job", job, "--yes")


def test_a_job_status_calls_stalled_is_hanging_in_triage_and_diagnose(cli, triagebox, jobs_dir):
    """Issue 23 #9: 20 step lines at 0.2 s, then silence. `status` dated the step lines by the
    supervisor's growth record and said STALLED ("no progress line for 733s, threshold 600s");
    `triage --job` read only the log, whose step lines carry no times, and said `running`. The
    record is aged by 733 s here, as if the silence had lasted that long."""
    job = launch(cli, triagebox, 'for i in $(seq 0 19); do echo "step $i loss 2.31"; sleep 0.2; done; sleep 120')
    log_path, growth = jobs_dir / job / "log", jobs_dir / job / "growth"
    deadline = time.monotonic() + 20
    while b"step 19 " not in (log_path.read_bytes() if log_path.exists() else b""):
        assert time.monotonic() < deadline, "the job never printed its 20 steps"
        time.sleep(0.2)
    time.sleep(1.5)  # the supervisor's last growth sample (1 s resolution) is written
    aged = [line.split() for line in growth.read_text().splitlines()]
    growth.write_text("".join(f"{float(t) - 733:.2f} {size}\n" for t, size in aged))
    try:
        row = json.loads(cli("status", "--host", triagebox.spec, "--job", job, "--json").stdout)["data"]["jobs"][0]
        assert row["state"] == "STALLED" and "no progress line for 7" in row["reason"]
        doc = json.loads(cli("triage", "--host", triagebox.spec, "--job", job, "--json").stdout)
        assert (doc["data"]["status"], doc["data"]["primary"]) == ("hanging", "hang")
        ctx = [f for f in doc["findings"] if f["id"] == "triage.context"][0]["evidence"]
        assert ctx["steps_dated_by"] == "the job's record" and ctx["stalled_for_s"] > 600
        diag = json.loads(cli("diagnose", "--host", triagebox.spec, "--job", job, "--json").stdout)["data"]
        assert diag["verdict"] == "stalled" and diag["triage"]["status"] == "hanging"
        # The same log without its record: nothing in it dates the steps or says the process ended.
        bare = json.loads(cli("triage", "--log", str(log_path), "--json").stdout)["data"]
        assert (bare["status"], bare["primary"]) == ("unknown", None)
    finally:
        cli("stop", "--host", triagebox.spec, "--job", job, "--yes")


def test_unknown_job_exits_4(cli, triagebox):
    proc = cli("triage", "--host", triagebox.spec, "--job", "no-such-job", "--json")
    assert proc.returncode == 4
    assert "no job 'no-such-job'" in json.loads(proc.stdout)["error"]["message"]


def test_a_long_noisy_tail_still_finds_the_last_step(tmp_path, monkeypatch):
    """A config dump pushed the first step past the head, and a hung job printed more noise after
    its last step than the tail holds: the first and last step lines fetched in the same round
    trip keep the projection and the line numbers right."""
    monkeypatch.setenv("GPUOPS_JOBS_DIR", str(tmp_path))
    raw, noise = long_noisy_hanging_log()
    (tmp_path / "j1").mkdir()
    (tmp_path / "j1" / "log").write_bytes(raw + noise)
    _, pieces, size, _, _ = read_excerpt(LocalTarget(), "j1", head=16 << 10, tail=256 << 10)
    assert size == len(raw) + len(noise)
    data = triage_pieces(pieces, now=now_of("status_hanging"), slurm_state="RUNNING").data
    assert data["status"] == "hanging" and data["primary"] == "hang"
    expect = EXPECTED["status_hanging"]["expect"]["progress"]
    assert {k: data["progress"][k] for k in ("first_step", "last_step", "total_steps", "last_periodic_ckpt")} == \
        {k: expect[k] for k in ("first_step", "last_step", "total_steps", "last_periodic_ckpt")}
    lines = (raw + noise).split(b"\n")
    last_step_line = max(i for i, line in enumerate(lines, 1) if b"completed step: 316," in line)
    assert {"line": last_step_line, "text": lines[last_step_line - 1].decode()} in data["evidence"]


def test_unreachable_host_exits_3_not_a_verdict(cli, rig):
    rig.alias("triage-nowhere")
    proc = cli("triage", "--host", "triage-nowhere", "--job", "j1", "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3
    assert doc["error"]["kind"] in ("unreachable", "timed-out") and doc["data"] == {}
