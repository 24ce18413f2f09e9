"""Jobs on a real Ray cluster (one head, started by the suite), launched through the real sshd
with --engine ray and followed with the verbs every engine has: the end a job reaches is Ray's
(SUCCEEDED -> COMPLETED, FAILED with the driver's exit code, STOPPED -> CANCELLED), its log pages
byte for byte, its progress shows in status, and a secret never reaches Ray's records or argv."""

import json
import os
import shlex
from pathlib import Path

import pytest

from gpuops import errors
from gpuops import states
from gpuops.ops import diagnose, joblogs, jobs as op, triage, wait
from tests.jobs.helpers import wait_for

TRAIN = 'for i in 1 2 3 4; do echo "step $i/4 loss 0.$i"; sleep 0.4; done; exit {code}'


def launched(box, jobs_dir, command, **kw):
    doc = op.launch(box, command=command, engine="ray", jobs_dir=str(jobs_dir), **kw)
    assert doc["ok"], doc["summary"]
    job = doc["data"]["job"]
    assert job["engine"] == "ray" and job["ray_submission_id"] == f"gpuops-{job['job_id']}"
    return job["job_id"]


def ended(box, jobs_dir, job, timeout=90):
    doc = wait.wait(box, job=job, timeout_s=timeout, jobs_dir=str(jobs_dir))
    assert doc["data"]["reached"], doc["summary"]
    return doc


def test_exit_0_is_completed_and_exit_3_is_failed_with_its_code_and_progress_shows(box, jobs_dir):
    good = launched(box, jobs_dir, TRAIN.format(code=0))
    bad = launched(box, jobs_dir, TRAIN.format(code=3))
    running = wait.wait(box, job=good, log_regex=r"step 2/4", timeout_s=60,
                        jobs_dir=str(jobs_dir))
    assert running["data"]["reason"] == "match", running["summary"]
    seen = op.status(box, job=good, jobs_dir=str(jobs_dir))["data"]["jobs"][0]
    assert seen["progress"]["last"]["step"] >= 2 and seen["progress"]["last"]["at"] is not None
    assert ended(box, jobs_dir, good)["data"]["state"] == states.COMPLETED
    doc = ended(box, jobs_dir, bad)
    assert (doc["data"]["state"], doc["data"]["job"]["exit_code"]) == (states.FAILED, 3)
    listed = op.status(box, jobs_dir=str(jobs_dir))["data"]["jobs"]
    assert {r["job_id"]: r["state"] for r in listed} == {good: states.COMPLETED, bad: states.FAILED}
    why = diagnose.diagnose(box, job=bad, jobs_dir=str(jobs_dir))
    assert (why["data"]["verdict"], why["data"]["engine"], why["data"]["exit_code"]) == ("failed-exit", "ray", 3)
    assert why["data"]["engine_job_id"] == f"gpuops-{bad}"
    said = triage.triage_remote(box, job=bad, jobs_dir=str(jobs_dir))
    assert said["data"]["status"] == "failed", said["summary"]
    child = op.retry(box, job=bad, jobs_dir=str(jobs_dir))
    assert child["ok"] and child["data"]["job"]["parent_job_id"] == bad, child["summary"]
    again = ended(box, jobs_dir, child["data"]["job"]["job_id"])
    assert (again["data"]["state"], again["data"]["job"]["exit_code"]) == (states.FAILED, 3)


def test_stop_is_a_dry_run_then_the_job_is_cancelled(box, jobs_dir):
    job = launched(box, jobs_dir, "echo started; sleep 120")
    wait.wait(box, job=job, log_regex="started", timeout_s=60, jobs_dir=str(jobs_dir))
    plan = op.stop(box, job=job, jobs_dir=str(jobs_dir))
    assert plan["exit_code_hint"] == errors.REFUSED and plan["data"]["dry_run"], plan["summary"]
    assert plan["data"]["targets"][0]["ray_submission_id"] == f"gpuops-{job}"
    done = op.stop(box, job=job, yes=True, plan=plan["data"]["plan"]["plan_id"], jobs_dir=str(jobs_dir))
    assert done["ok"] and done["data"]["state"] == states.CANCELLED, done["summary"]
    assert (jobs_dir / job / "exit.json").exists()
    assert op.stop(box, job=job, jobs_dir=str(jobs_dir))["summary"].startswith("nothing to stop")


def _cmdlines():
    out = []
    for name in os.listdir("/proc"):
        try:
            out.append(Path(f"/proc/{name}/cmdline").read_bytes())
        except OSError:
            pass
    return out


def test_a_secret_reaches_the_job_but_never_rays_records_logs_or_argv(box, jobs_dir, ray_cluster, monkeypatch):
    secret = "ray-secret-5d1f8a"
    monkeypatch.setenv("GPUOPS_TEST_TOKEN", secret)
    job = launched(box, jobs_dir, 'echo "token length ${#GPUOPS_TEST_TOKEN} plain=$PLAIN"; sleep 2',
                   secrets={"GPUOPS_TEST_TOKEN": secret}, env={"PLAIN": "shown"})
    wait.wait(box, job=job, log_regex="token length", timeout_s=60, jobs_dir=str(jobs_dir))
    assert not any(secret.encode() in c for c in _cmdlines())
    ended(box, jobs_dir, job)
    assert (jobs_dir / job / "log").read_text() == f"token length {len(secret)} plain=shown\n"
    assert not (jobs_dir / job / "secrets.json").exists()
    listed, logged = ray_cluster.ray("job", "list"), ray_cluster.ray("job", "logs", f"gpuops-{job}")
    assert f"gpuops-{job}" in listed.stdout and "PLAIN" in listed.stdout  # --env is Ray's runtime_env
    assert secret not in listed.stdout + listed.stderr and secret not in logged.stdout + logged.stderr
    assert "token length 17" in logged.stdout
    assert not any(secret in p.read_text(errors="replace") for p in (jobs_dir / job).iterdir() if p.is_file())


def test_log_pages_are_byte_exact_and_a_follow_reads_to_the_end(box, jobs_dir):
    script = ("import sys, time\n"
              "for i in range(40):\n"
              "    sys.stdout.buffer.write(('line %02d é ✓ ' % i).encode() + b'x' * i + b'\\r\\n')\n"
              "    sys.stdout.flush()\n"
              "    time.sleep(0.02)\n"
              "sys.stdout.buffer.write(b'no newline at the end')\n")
    expected = b"".join(("line %02d é ✓ " % i).encode() + b"x" * i + b"\r\n" for i in range(40))
    expected += b"no newline at the end"
    job = launched(box, jobs_dir, "python3 -c " + shlex.quote(script))
    followed = []
    doc = joblogs.logs(box, job=job, follow=True, from_offset=0, jobs_dir=str(jobs_dir), sink=followed.append,
                       timeout_s=90)
    assert b"".join(followed) == expected and doc["data"]["end"] == "exited", doc["summary"]
    pages, offset = [], 0
    while True:
        page = joblogs.logs(box, job=job, from_offset=offset, max_bytes=97, jobs_dir=str(jobs_dir))
        pages.append(page["data"]["text"].encode("utf-8"))
        if page["data"]["next_offset"] == offset:
            break
        offset = page["data"]["next_offset"]
    assert b"".join(pages) == expected and offset == len(expected)


def test_a_submission_ray_refuses_is_one_line_naming_the_flag_and_nothing_is_recorded(box, jobs_dir):
    with pytest.raises(errors.Rejected) as e:
        op.launch(box, command="true", engine="ray", resources={"entrypoint_num_gpus": "two"}, jobs_dir=str(jobs_dir))
    assert "--entrypoint-num-gpus" in e.value.message and "\n" not in e.value.message
    assert "entrypoint_num_gpus must be a number" in e.value.message
    assert not (jobs_dir.exists() and [p for p in jobs_dir.iterdir() if p.is_dir()])  # no job directory


def test_the_cli_launches_on_ray_and_shows_ray_submission_id(head_box, jobs_dir, cli):
    out = cli("launch", "--engine", "ray", "--host", head_box.spec, "--jobs-dir", str(jobs_dir), "--cmd", "exit 0",
              "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["data"]["meta"]["ray_submission_id"].startswith("gpuops-"), out.stdout
    job = doc["data"]["job"]["job_id"]
    wait_for(lambda: json.loads(cli("status", "--host", head_box.spec, "--job", job, "--jobs-dir", str(jobs_dir),
                                    "--json").stdout)["data"]["jobs"][0]["state"] == states.COMPLETED, timeout=60)
    shown = cli("status", "--host", head_box.spec, "--jobs-dir", str(jobs_dir))
    assert f"ray gpuops-{job}" in shown.stdout, shown.stdout
    refused = cli("launch", "--host", head_box.spec, "--cmd", "true", "--entrypoint-num-gpus", "1")
    assert refused.returncode == errors.USAGE and "add --engine ray" in refused.stderr, refused.stderr


def test_ship_workdir_gives_rays_workers_a_copy_of_it_and_the_driver_the_directory_itself(box, jobs_dir, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "helper.py").write_text("VALUE = 'shipped'\n")
    (code / "main.py").write_text(
        "import os, ray\n"
        "ray.init()\n"
        "@ray.remote(num_cpus=0)\n"
        "def where():\n"
        "    import helper\n"
        "    return helper.VALUE, os.getcwd()\n"
        "value, cwd = ray.get(where.remote())\n"
        "print('driver in', os.getcwd())\n"
        "print('task got', value, 'in', cwd)\n")
    job = launched(box, jobs_dir, "python3 main.py", workdir=str(code), resources={"ship_workdir": True})
    doc = ended(box, jobs_dir, job, timeout=150)
    log = (jobs_dir / job / "log").read_text()
    assert doc["data"]["state"] == states.COMPLETED, log[-2000:]
    assert f"driver in {code}\n" in log
    task = next(line for line in log.splitlines() if line.startswith("task got"))
    assert task.startswith("task got shipped in ") and "runtime_resources" in task, task
