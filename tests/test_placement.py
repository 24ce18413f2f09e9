"""`launch --fleet F --gpus N`: real sshd boxes, each a fake GPU box of its own (model, count,
utilisation and memory from the fake nvidia-smi's environment), one down. The job that is placed
really starts, pinned to the GPUs chosen; when nothing fits, no box gets a job."""

import json
import os
import subprocess
import time

import pytest

from tests.fixtures.fakegpu.boxes import compose
from tests.jobs.helpers import kill_everything, meta_of, wait_for
from tests.test_fleet import _record, _start_ticks


@pytest.fixture(scope="module")
def fleet(rig, tmp_path_factory):
    base = tmp_path_factory.mktemp("placement")
    sleeper = subprocess.Popen(["sleep", "600"])
    jobs = {}

    def box(name, **fake):
        root, env = compose(base, "v2-healthy", "healthy", name=name)
        jobs[name] = base / f"{name}-jobs"
        jobs[name].mkdir()
        rig.box(name, env={**env, "GPUOPS_JOBS_DIR": str(jobs[name]), **fake})
        return (root / "proc/sys/kernel/random/boot_id").read_text().strip()

    box("pl-a100", FAKEGPU_MODEL="NVIDIA A100-SXM4-80GB", FAKEGPU_COUNT="8")
    box("pl-h100", FAKEGPU_UTIL="97,0", FAKEGPU_MEM_USED="30000,20480")
    boot = box("pl-h100b")
    _record(jobs["pl-h100b"], "20261124-030000-dddddd", {"pid": sleeper.pid, "start_ticks": _start_ticks(sleeper.pid),
                                                        "boot_id": boot, "launched_at": time.time() - 60, "gpus": "0"})
    box("pl-liar", FAKEGPU_MODEL="NVIDIA L40S", FAKEGPU_COUNT="4", FAKEGPU_INDEX="0")  # "GPUs 0,0,0,0"
    rig.alias("pl-down")
    config = base / "config"
    (config / "gpuops").mkdir(parents=True)
    (config / "gpuops/fleet.toml").write_text(
        "".join(f'[[host]]\nalias = "{a}"\n\n' for a in ("pl-a100", "pl-h100", "pl-h100b", "pl-down", "pl-liar"))
        + '[fleet.all]\nhosts = ["pl-a100", "pl-h100", "pl-h100b", "pl-down"]\n'
        + '[fleet.liars]\nhosts = ["pl-liar", "pl-h100"]\n')
    yield {"jobs": jobs, "env": {**rig.env(), "XDG_CONFIG_HOME": str(config)}}
    sleeper.kill()
    sleeper.wait()
    for directory in jobs.values():
        kill_everything(directory)


def _launch(cli, fleet, *args):
    # With the launch's one-second watch (the suite turns it off elsewhere): an echo is then
    # reported as it ended.
    env = {k: v for k, v in fleet["env"].items() if k != "GPUOPS_LAUNCH_CONFIRM_S"}
    r = cli("launch", "--fleet", "all", "--cmd", "echo gpus=$CUDA_VISIBLE_DEVICES", *args, "--json", env=env)
    return r, json.loads(r.stdout)


def _started(fleet):
    return {name: sorted(p.name for p in d.iterdir()) for name, d in fleet["jobs"].items()}


def test_nothing_fits_says_what_the_fleet_has_and_launches_nothing(cli, fleet):
    before = _started(fleet)
    r, doc = _launch(cli, fleet, "--gpus", "4", "--gpu-type", "H100")
    assert r.returncode == 5, r.stdout + r.stderr
    assert doc["summary"] == ("asked for 4x H100; fleet has 8x A100-SXM4-80GB, 1x H100 80GB HBM3 free, "
                              "3x H100 80GB HBM3 busy; 1 box not answering; nothing was launched")
    assert _started(fleet) == before
    r = cli("launch", "--fleet", "all", "--gpus", "4", "--gpu-type", "H100", "--cmd", "true", env=fleet["env"])
    assert r.returncode == 5 and "pl-h100: passed (0 of 2 matching GPU(s) free (GPU 0 at 97%; GPU 1 20.0 GiB " \
                                 "in use))" in r.stdout


def test_the_job_goes_to_the_box_with_free_gpus_of_the_model_pinned_to_them(cli, fleet):
    r, doc = _launch(cli, fleet, "--gpus", "1", "--gpu-type", "H100")
    assert r.returncode == 0, r.stdout + r.stderr
    assert doc["host"] == "pl-h100b" and doc["data"]["placement"]["gpus"] == [1]
    job = doc["data"]["job"]["job_id"]
    # an echo ends within the second launch watches it: reported as it ended, not as "started"
    assert doc["summary"] == ("placed on pl-h100b: GPU 1 (1x H100 80GB HBM3), the least loaded of 1 that fit; "
                              f"{job}: COMPLETED at launch")
    log = fleet["jobs"]["pl-h100b"] / job / "log"
    assert wait_for(lambda: log.exists() and b"gpus=1" in log.read_bytes(), timeout=20)
    assert meta_of(fleet["jobs"]["pl-h100b"], job)["gpus"] == "1"
    verdicts = {b["host"]: b["verdict"] for b in doc["data"]["placement"]["boxes"]}
    assert verdicts == {"pl-a100": "passed", "pl-h100": "passed", "pl-h100b": "chosen", "pl-down": "passed"}


def test_any_model_takes_the_least_loaded_box(cli, fleet):
    r, doc = _launch(cli, fleet, "--gpus", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert doc["host"] == "pl-a100" and doc["data"]["placement"]["gpus"] == [0, 1, 2, 3]
    assert os.path.isdir(fleet["jobs"]["pl-a100"] / doc["data"]["job"]["job_id"])


def test_a_box_that_lists_one_gpu_index_four_times_is_passed_over_and_nothing_is_pinned(cli, fleet):
    """A box reporting four GPUs all index 0 got `launch --fleet F --gpus 4` placed on "GPUs 0,0,0,0"
    (CUDA_VISIBLE_DEVICES=0,0,0,0)."""
    before = _started(fleet)
    r = cli("launch", "--fleet", "liars", "--gpus", "4", "--gpu-type", "L40S", "--cmd", "true", "--json",
            env=fleet["env"])
    doc = json.loads(r.stdout)
    assert r.returncode == 5 and _started(fleet) == before, r.stdout + r.stderr
    liar = next(b for b in doc["data"]["placement"]["boxes"] if b["host"] == "pl-liar")
    assert liar["verdict"] == "passed" and "lists GPU index 0 more than once" in json.dumps(liar), liar
    r = cli("preflight", "--host", "pl-liar", "--json", env=fleet["env"])
    doc = json.loads(r.stdout)
    assert r.returncode == 3 and "lists GPU index 0 more than once" in doc["error"]["message"], r.stdout + r.stderr


@pytest.mark.parametrize("args,words", [
    (["--gpus", "0,1"], "--gpus takes a number of GPUs (with --fleet)"),
    (["--gpus", "2", "--host", "pl-a100"], "give --host or --fleet, not both"),
    (["--gpus", "2", "--min-vram-gib", "-4"], "--min-vram-gib takes GiB"),
    (["--gpus", "2", "--rdzv-host", "x"], "--rdzv-host does not apply here"),
])
def test_placement_mistakes_are_exit_2(cli, fleet, args, words):
    r, doc = _launch(cli, fleet, *args)
    assert r.returncode == 2 and words in doc["error"]["message"], r.stdout


@pytest.mark.anyio
async def test_an_agent_places_through_fleet_launch_and_a_misfit_starts_nothing(fleet, monkeypatch):
    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from mcp import Client

    from gpuops.mcp import server

    monkeypatch.setenv("XDG_CONFIG_HOME", fleet["env"]["XDG_CONFIG_HOME"])
    monkeypatch.delenv("GPUOPS_MODE", raising=False)
    before = _started(fleet)
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as client:
        misfit = await client.call_tool("fleet_launch", {"fleet": "all", "gpus": 4, "gpu_type": "H100", "cmd": "true"})
        assert _started(fleet) == before, "a request nothing fits starts nothing"
        placed = await client.call_tool("fleet_launch", {"fleet": "all", "gpus": 8, "cmd": "echo placed"})
    doc = misfit.structured_content
    assert misfit.is_error is False and doc["ok"] is False and doc["command"] == "launch"
    assert doc["summary"].startswith("asked for 4x H100; fleet has 8x A100-SXM4-80GB")
    doc = placed.structured_content
    assert doc["ok"] is True and doc["host"] == "pl-a100" and doc["data"]["placement"]["gpus"] == list(range(8))
    assert os.path.isdir(fleet["jobs"]["pl-a100"] / doc["data"]["job"]["job_id"])
