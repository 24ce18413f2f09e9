"""The gpuops program against the real Slurm: exit codes for bad input, secrets kept out of every
place Slurm or gpuops writes down, a Slurm profile's site defaults, and the sacct -c fallback."""

import hashlib
import json
import os
import stat

import pytest

from gpuops import profiles
from gpuops import states
from gpuops.onbox.engines import slurm as onbox_slurm
from tests.slurm.conftest import login_env
from tests.jobs.helpers import wait_for

SECRET = "hunter2-do-not-leak-7f3a"


def run_json(cli, *args, env=None):
    proc = cli(*args, "--json", env=env)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def shim_box(rig, slurm, tmp_path_factory):
    """A login node whose sbatch is a shim that writes down its argv, then runs the real sbatch."""
    bindir = tmp_path_factory.mktemp("shim")
    argv_log = bindir / "sbatch.argv"
    real = next(p for p in ("/usr/bin/sbatch", "/usr/local/bin/sbatch") if os.path.exists(p))
    shim = bindir / "sbatch"
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {argv_log}\nexec {real} "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = login_env(slurm)
    box = rig.box("slurmshim", env=dict(env, PATH=f"{bindir}:{env['PATH']}"))
    return box, argv_log


def test_a_secret_reaches_the_job_and_nothing_slurm_or_gpuops_writes_down(cli, shim_box, slurm, jobs_dir, tmp_path):
    box, argv_log = shim_box
    env = dict(os.environ, RUN_TOKEN=SECRET)
    rc, doc = run_json(cli, "launch", "--host", box.spec, "--engine", "slurm", "--jobs-dir", str(jobs_dir),
                       "--workdir", str(tmp_path), "--secret-env", "RUN_TOKEN", "--env", "PLAIN=visible",
                       "--cmd", 'printf %s "$RUN_TOKEN" | sha256sum; echo "plain=$PLAIN"; sleep 30', env=env)
    assert rc == 0, doc["summary"]
    job, slurm_id = doc["data"]["job"]["job_id"], doc["data"]["meta"]["slurm_job_id"]
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    log = jobs_dir / job / "log"
    assert wait_for(lambda: log.exists() and digest.encode() in log.read_bytes(), timeout=20), "the job never saw it"
    assert b"plain=visible" in log.read_bytes()
    shown = slurm.run("scontrol", "show", "job", "-dd", slurm_id).stdout
    script = slurm.run("scontrol", "write", "batch_script", slurm_id, "-").stdout
    assert "export PLAIN=visible" in script and slurm_id in shown
    written = {p.name: p.read_bytes() for p in (jobs_dir / job).iterdir() if p.name != "log"}
    assert {"cmd", "batch.sh", "meta.json"} <= set(written)
    for name, text in [("scontrol show job", shown), ("batch script", script), ("sbatch argv", argv_log.read_text()),
                       ("envelope", json.dumps(doc))] + [(n, b.decode(errors="replace")) for n, b in written.items()]:
        assert SECRET not in text, f"the secret is in the {name}"
    assert json.loads(written["meta.json"])["secret_env_names"] == ["RUN_TOKEN"]


@pytest.mark.parametrize("flag,value,said", [
    ("--partition", "nope", "invalid partition specified: nope"),
    ("--time", "soon", "Invalid --time specification"),
])
def test_an_sbatch_rejection_is_exit_2_with_sbatchs_words_and_the_option(cli, login, jobs_dir, tmp_path, flag,
                                                                         value, said):
    rc, doc = run_json(cli, "launch", "--host", login.spec, "--engine", "slurm", "--jobs-dir", str(jobs_dir),
                       "--workdir", str(tmp_path), flag, value, "--cmd", "true")
    assert rc == 2 and doc["error"]["kind"] == "rejected"
    assert said in doc["error"]["message"] and f"({flag})" in doc["error"]["message"]
    assert not list(jobs_dir.glob("*/meta.json")), "a refused submission left a record"


def test_no_controller_is_exit_3_and_an_unknown_job_exit_4(cli, rig, slurm, login, jobs_dir, tmp_path):
    rc, doc = run_json(cli, "launch", "--host", login.spec, "--engine", "slurm", "--jobs-dir", str(jobs_dir),
                       "--workdir", str(tmp_path), "--cmd", "sleep 20")
    assert rc == 0, doc["summary"]
    job = doc["data"]["job"]["job_id"]
    down = rig.box("slurmdown", env=login_env(slurm, SLURM_CONF=str(slurm.dead_conf())))
    rc, doc = run_json(cli, "status", "--host", down.spec, "--job", job, "--jobs-dir", str(jobs_dir))
    assert rc == 3 and doc["error"]["kind"] == "unreachable" and "Unable to contact slurm controller" in doc["summary"]
    rc, doc = run_json(cli, "launch", "--host", down.spec, "--engine", "slurm", "--jobs-dir", str(jobs_dir),
                       "--workdir", str(tmp_path), "--cmd", "true")
    assert rc == 3 and len(list(jobs_dir.glob("*/meta.json"))) == 1
    rc, doc = run_json(cli, "status", "--host", login.spec, "--job", "987654", "--jobs-dir", str(jobs_dir))
    assert rc == 4 and "no record" in doc["error"]["message"]


def test_a_slurm_profile_submits_with_the_sites_defaults(cli, login, slurm, jobs_dir, tmp_path):
    pdir = tmp_path / "profiles"
    pdir.mkdir()
    shipped = (profiles.SHIPPED_DIR / "slurm.toml").read_text()
    (pdir / "site.toml").write_text(shipped + '\n[slurm]\npartition = "debug"\ntime = "9"\n')
    env = dict(os.environ, GPUOPS_PROFILES_DIR=str(pdir))
    rc, doc = run_json(cli, "launch", "--host", login.spec, "--profile", "site", "--jobs-dir", str(jobs_dir),
                       "--workdir", str(tmp_path), "--cmd", "true", env=env)
    assert rc == 0, doc["summary"]
    assert doc["data"]["meta"]["sbatch_options"] == ["--time=9", "--partition=debug"]
    assert "TimeLimit=00:09:00" in slurm.run("scontrol", "show", "job", doc["data"]["meta"]["slurm_job_id"]).stdout
    rc, doc = run_json(cli, "wait", "--host", login.spec, "--job", doc["data"]["job"]["job_id"], "--jobs-dir",
                       str(jobs_dir), "--timeout", "30")
    assert (rc, doc["data"]["state"]) == (0, states.COMPLETED)


def test_without_slurmdbd_an_ended_job_is_read_from_the_completion_file(slurm, monkeypatch, tmp_path):
    job = slurm.sbatch(f"--chdir={tmp_path}", "--wrap", "exit 4")
    slurm.wait_state(job, ("FAILED",))
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    rows, completion = onbox_slurm.accounting(job)
    assert completion and (rows[0]["JobID"], rows[0]["State"], rows[0]["ExitCode"]) == (job, "FAILED", "4:0")
