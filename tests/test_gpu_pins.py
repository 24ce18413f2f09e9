"""`launch --gpus` judged on the box: real sshd boxes with the fake nvidia-smi (two H100s; memory
in use through FAKEGPU_MEM_USED in sshd's SetEnv), real jobs started and refused. The bugs: `--gpus
7` on a box of two GPUs ran the job on the CPU without a word (CUDA stops at the first entry it
cannot find); two jobs pinned to one GPU were both started; `--gpus 1e9` was accepted."""

import json

import pytest

from gpuops.onbox.host import gpu_pins
from tests.fixtures.fakegpu.boxes import compose
from tests.jobs.helpers import kill_everything, meta_of, wait_for

UUID0, UUID1 = "GPU-0a1b2c3d-0000-4000-8000-000000000000", "GPU-0a1b2c3d-0000-4000-8000-000000000001"
H100_MIB = 81559.0


def devices(used=(1.0, 1.0)):
    return [{"index": i, "uuid": u, "name": "NVIDIA H100 80GB HBM3", "memory_used_mib": m,
             "memory_total_mib": H100_MIB} for i, (u, m) in enumerate(zip((UUID0, UUID1), used))]


def judged(asked, share=False, running=(), used=(1.0, 1.0), present=True, error=None, listed=True):
    reading = {"present": present, "error": error, "devices": devices(used) if listed else []}
    return gpu_pins.judge(gpu_pins.parse(asked), share, reading, list(running))


def ids(findings):
    return [(f["id"], f["severity"]) for f in findings]


# ---------------------------------------------------------------- pure


@pytest.mark.parametrize("text,said", [
    ("1e9", "wants comma-separated GPU indices (0 to 63) or GPU UUIDs"),
    ("64", "wants comma-separated GPU indices (0 to 63)"),
    ("-1", "wants comma-separated"),
    ("0;rm -rf /", "wants comma-separated"),
    ("0,", "wants comma-separated"),
    ("1,01", "names GPU 1 twice"),
    (f"{UUID0},{UUID0.upper().replace('GPU', 'GPU')}", "twice"),
    ("MIG-4f1c0ad9-0000-4000-8000-000000000000", "a MIG device goes in --env CUDA_VISIBLE_DEVICES"),
    (",".join(str(i % 60) for i in range(65)), "names 65 GPUs; a box has at most 64"),
])
def test_a_gpu_list_that_is_not_one_is_refused_before_the_box_is_asked(text, said):
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)")):
        gpu_pins.parse(text)


def test_indices_are_written_plainly_and_uuids_kept_as_given():
    assert gpu_pins.parse(" 007, GPU-0a1b2c3d") == ["7", "GPU-0a1b2c3d"]


def test_an_index_the_box_lacks_fails_and_names_what_it_has():
    gpus, found = judged("1,7")
    assert gpus == [] and ids(found) == [("launch.gpus-absent", "fail")]
    assert found[0]["title"] == f"the box has no GPU 7; it has 0 {UUID0}, 1 {UUID1}"


def test_a_uuid_or_its_unique_start_names_its_gpu_and_a_shared_start_is_refused():
    assert judged("GPU-0A1B2C3D-0000-4000-8000-000000000001") == ([1], [])
    gpus, found = judged("GPU-0a1b2c3d")
    assert ids(found) == [("launch.gpus-absent", "fail")] and "names 2 GPUs" in found[0]["title"]
    assert ids(judged(f"1,{UUID1}")[1]) == [("launch.gpus-absent", "fail")]  # one GPU twice


def test_a_gpu_pinned_by_a_running_job_fails_unless_shared():
    running = [("20261124-030000-aaaaaa", UUID1), ("20261124-030001-bbbbbb", "0")]
    gpus, found = judged("1", running=running)
    assert ids(found) == [("launch.gpu-pinned", "fail")] and found[0]["gotcha"] == "GEN7"
    assert found[0]["title"].startswith("GPU 1 is pinned by running gpuops job 20261124-030000-aaaaaa")
    gpus, found = judged("1", share=True, running=running)
    assert gpus == [1] and ids(found) == [("launch.gpu-shared", "warn")]


def test_a_running_job_without_gpus_is_a_warning_and_memory_mostly_held_another():
    gpus, found = judged("0,1", running=[("20261124-030000-aaaaaa", None)], used=(41000.0, 40000.0))
    assert gpus == [0, 1]
    assert ids(found) == [("launch.gpu-unpinned-job", "warn"), ("launch.gpu-memory", "warn")]
    assert found[1]["title"] == "GPU 0 has 40.0 of 79.6 GiB in use before the job starts: it may run out of GPU memory"
    assert found[1]["gotcha"] == "U10"


def test_a_box_without_gpus_fails_and_one_whose_list_is_unreadable_warns():
    assert ids(judged("0", present=False, listed=False)[1]) == [("launch.gpus-absent", "fail")]
    gpus, found = judged("0", error="nvidia-smi --query-gpu: Failed to initialize NVML", listed=False)
    assert gpus == [] and ids(found) == [("launch.gpus-unchecked", "warn")]


def test_a_uuid_pin_is_read_as_the_index_of_its_gpu():
    assert gpu_pins.as_indices(f"{UUID1},0,GPU-ffff", devices()) == "1,0,GPU-ffff"


@pytest.mark.parametrize("engine,ask", [("slurm", "--gpus-per-node"), ("ray", "--entrypoint-num-gpus")])
def test_an_engine_that_places_gpus_itself_takes_no_gpus(engine, ask):
    """--gpus pins devices of one box; Slurm and Ray choose the devices themselves, so it is a usage
    error there (and --share-gpu, which goes with it, too) rather than something passed on."""
    from gpuops import engines, errors

    with pytest.raises(errors.UsageError, match=ask):
        engines.get(engine).submission({"gpus": "0"}, {})


# ---------------------------------------------------------------- real boxes


@pytest.fixture(scope="module")
def boxes(rig, tmp_path_factory):
    base = tmp_path_factory.mktemp("gpupins")
    jobs = {}

    def box(name, scenario="healthy", **fake):
        _, env = compose(base, "v2-healthy", scenario, name=name)
        jobs[name] = base / f"{name}-jobs"
        jobs[name].mkdir()
        rig.box(name, env={**env, "GPUOPS_JOBS_DIR": str(jobs[name]), **fake})

    box("gp-two")
    box("gp-held", FAKEGPU_MEM_USED="1,60000")
    box("gp-cpu", scenario=None)
    yield {"jobs": jobs, "env": rig.env()}
    for directory in jobs.values():
        kill_everything(directory)


def _launch(cli, boxes, host, *args, cmd="echo gpus=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER"):
    r = cli("launch", "--host", host, "--cmd", cmd, *args, "--json", env=boxes["env"])
    return r, json.loads(r.stdout)


def _started(boxes, host):
    return sorted(p.name for p in boxes["jobs"][host].iterdir() if (p / "meta.json").exists())


def test_an_index_the_box_lacks_is_exit_5_and_nothing_starts(cli, boxes):
    r, doc = _launch(cli, boxes, "gp-two", "--gpus", "7")
    assert r.returncode == 5, r.stdout + r.stderr
    assert doc["error"]["kind"] == "refused" and "the box has no GPU 7; it has 0 GPU-" in doc["summary"]
    assert doc["summary"].endswith("nothing was started") and _started(boxes, "gp-two") == []


def test_a_box_without_gpus_refuses_gpus(cli, boxes):
    r, doc = _launch(cli, boxes, "gp-cpu", "--gpus", "0")
    assert r.returncode == 5 and "the box has no NVIDIA GPU" in doc["summary"], r.stdout + r.stderr
    assert _started(boxes, "gp-cpu") == []


def test_a_uuid_works_and_the_job_sees_it(cli, boxes):
    r, doc = _launch(cli, boxes, "gp-two", "--gpus", UUID1)
    assert r.returncode == 0 and doc["findings"] == [], r.stdout + r.stderr
    job = doc["data"]["job"]["job_id"]
    log = boxes["jobs"]["gp-two"] / job / "log"
    assert wait_for(lambda: log.exists() and log.read_text() == f"gpus={UUID1} order=PCI_BUS_ID\n", timeout=20)
    meta = meta_of(boxes["jobs"]["gp-two"], job)
    assert meta["gpus"] == UUID1 and meta["gpu_check"] == {"gpus": [1], "findings": []}


def test_a_gpu_pinned_by_a_running_job_is_refused_and_share_gpu_starts_it(cli, boxes):
    r, doc = _launch(cli, boxes, "gp-two", "--gpus", "1", cmd="sleep 120")
    assert r.returncode == 0, r.stdout + r.stderr
    holder = doc["data"]["job"]["job_id"]
    before = _started(boxes, "gp-two")
    try:
        r, doc = _launch(cli, boxes, "gp-two", "--gpus", UUID1)  # the same GPU, named by its UUID
        assert r.returncode == 5, r.stdout + r.stderr
        assert f"GPU 1 is pinned by running gpuops job {holder}" in doc["summary"]
        assert "pick another GPU, or add --share-gpu to run beside it; nothing was started" in doc["summary"]
        assert _started(boxes, "gp-two") == before
        r, doc = _launch(cli, boxes, "gp-two", "--gpus", "0")
        assert r.returncode == 0 and doc["findings"] == [], r.stdout  # the other GPU is free
        r, doc = _launch(cli, boxes, "gp-two", "--gpus", UUID1, "--share-gpu")
        assert r.returncode == 0, r.stdout + r.stderr
        assert [f["id"] for f in doc["findings"]] == ["launch.gpu-shared"]
        assert f"warning: GPU 1 is shared with running gpuops job {holder}" in doc["summary"]
        shared = doc["data"]["job"]["job_id"]
        assert meta_of(boxes["jobs"]["gp-two"], shared)["share_gpu"] is True
        assert wait_for(lambda: (boxes["jobs"]["gp-two"] / shared / "exit.json").exists(), timeout=20)
        r = cli("retry", "--host", "gp-two", "--job", shared, "--json", env=boxes["env"])
        doc = json.loads(r.stdout)  # the retry keeps its parent's --share-gpu, and is warned again
        assert r.returncode == 0 and [f["id"] for f in doc["findings"]] == ["launch.gpu-shared"], r.stdout
    finally:
        kill_everything(boxes["jobs"]["gp-two"])


def test_memory_mostly_held_by_others_is_a_warning_in_the_launch_answer(cli, boxes):
    r, doc = _launch(cli, boxes, "gp-held", "--gpus", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    (warning,) = doc["findings"]
    assert warning["id"] == "launch.gpu-memory" and warning["severity"] == "warn" and warning["gotcha"] == "U10"
    assert "warning: GPU 1 has 58.6 of 79.6 GiB in use before the job starts" in doc["summary"]
    assert any("gpuops reap" in a for a in doc["advice"])
    r, doc = _launch(cli, boxes, "gp-held", "--gpus", "0")
    assert r.returncode == 0 and doc["findings"] == [], r.stdout


@pytest.mark.parametrize("args,said", [
    (["--gpus", "1e9"], "--gpus wants comma-separated GPU indices (0 to 63) or GPU UUIDs"),
    (["--gpus", "0,0"], "--gpus names GPU 0 twice"),
    (["--share-gpu"], "--share-gpu goes with --gpus"),
    (["--gpus", "1", "--share-gpu", "--torchrun"], "--share-gpu applies to one --host box's --gpus"),
])
def test_a_gpu_list_that_is_not_one_is_exit_2_and_nothing_starts(cli, boxes, args, said):
    r, doc = _launch(cli, boxes, "gp-two", *args)
    assert r.returncode == 2 and said in doc["summary"], r.stdout + r.stderr
