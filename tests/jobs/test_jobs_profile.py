"""launch --profile: the platform's job dir, HF_HOME, fixed env and proxy hook reach the job."""

import json
import os
from pathlib import Path

import pytest

from gpuops import engines, errors, profiles
from gpuops.engines import platform
from tests.jobs.helpers import kill_everything, wait_for

LOCAL = (Path(__file__).resolve().parents[2] / "profiles" / "local.toml").read_text()


def test_autodl_moves_caches_and_sources_its_network_hook():
    jobs_dir, env, pre, notes = platform.settings(profiles.load("autodl"), env={"A": "1"})
    assert env["HF_HOME"] == "/root/autodl-tmp/huggingface" and env["A"] == "1"
    assert "network_turbo" in pre and notes == []


def test_what_the_user_passed_wins():
    jobs_dir, env, _, _ = platform.settings(profiles.load("autodl"), jobs_dir="/mine", env={"HF_HOME": "/x"})
    assert (jobs_dir, env["HF_HOME"]) == ("/mine", "/x")


def test_a_placeholder_path_is_not_applied_but_said():
    _, env, _, notes = platform.settings(profiles.load("lambda"))
    assert "HF_HOME" not in env and any("placeholder" in n for n in notes)


def test_a_platform_whose_jobs_must_be_kubernetes_jobs_is_refused():
    with pytest.raises(errors.Refused):
        platform.settings(profiles.load("kubernetes"))


def test_a_slurm_profile_submits_to_slurm_with_the_sites_defaults(tmp_path, monkeypatch):
    slurm = engines.for_profile(profiles.load("slurm"))
    assert (slurm.name, slurm.profile_defaults(profiles.load("slurm"))) == ("slurm", {})
    assert engines.for_profile(profiles.load("autodl")).name == engines.DEFAULT
    pdir = tmp_path / "profiles"
    pdir.mkdir()
    shipped = (profiles.SHIPPED_DIR / "slurm.toml").read_text()
    (pdir / "mysite.toml").write_text(shipped + '\n[slurm]\npartition = "gpu"\naccount = "acme"\ntime = "1:00:00"\n')
    monkeypatch.setenv("GPUOPS_PROFILES_DIR", str(pdir))
    site = profiles.load("mysite")
    assert slurm.profile_defaults(site) == {"partition": "gpu", "account": "acme", "time": "1:00:00"}
    assert platform.settings(site)[2] == "module load cuda 2>/dev/null || true"  # the module loads, sourced


@pytest.fixture
def box_profile(tmp_path, monkeypatch):
    """A user profile 'testbox' whose hook exports a variable and whose job_root is a temp dir."""
    pdir, root = tmp_path / "profiles", tmp_path / "jobs-from-profile"
    pdir.mkdir()
    text = LOCAL.replace('[paths]\n', f'[paths]\njob_root = "{root}"\nhf_home = "{tmp_path}/hf"\n')
    text = text.replace('[launch]\n', '[launch]\nproxy_hook = "export VIA_HOOK=on; echo noisy; false"\n'
                                      'env = { FROM_PROFILE = "yes" }\n')
    (pdir / "testbox.toml").write_text(text)
    monkeypatch.setenv("GPUOPS_PROFILES_DIR", str(pdir))
    yield root
    kill_everything(root)


def test_launch_with_a_profile_runs_the_hook_and_records_it(cli, box_profile):
    r = cli("launch", "--profile", "testbox", "--json",
            "--cmd", 'echo "hook=$VIA_HOOK hf=$HF_HOME fixed=$FROM_PROFILE"', env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    meta = json.loads(r.stdout)["data"]["meta"]
    job_dir = box_profile / meta["job_id"]
    assert job_dir.is_dir(), "the job directory follows the profile's job_root"
    assert meta["profile"] == "testbox" and meta["pre"].startswith("export VIA_HOOK")
    assert wait_for(lambda: (job_dir / "exit.json").exists(), timeout=10)
    assert json.loads((job_dir / "exit.json").read_text())["exit_code"] == 0, "a failing hook must not fail the job"
    log = (job_dir / "log").read_text()
    assert f"hook=on hf={box_profile.parent}/hf fixed=yes" in log and "noisy" not in log


def test_triage_finds_a_job_where_its_profile_or_jobs_dir_put_it(cli, box_profile):
    """triage --job used to re-implement the job-dir layout in shell and looked only in the default
    directory; it now reads the records where the profile's job_root (or --jobs-dir) put them."""
    r = cli("launch", "--profile", "testbox", "--json", "--cmd", "echo done", env=os.environ.copy())
    job = json.loads(r.stdout)["data"]["job"]["job_id"]
    assert wait_for(lambda: (box_profile / job / "exit.json").exists(), timeout=10)
    env = dict(os.environ, GPUOPS_JOBS_DIR=str(box_profile.parent / "elsewhere"))
    for how in (["--profile", "testbox"], ["--jobs-dir", str(box_profile)]):
        t = cli("triage", "--job", job, "--json", *how, env=env)
        doc = json.loads(t.stdout)
        assert t.returncode == 0 and doc["data"]["status"] == "completed", (how, t.stdout[-800:])
    assert cli("triage", "--job", job, "--json", env=env).returncode == 4
