"""Every on-box entry's answer is checked against its shape in one place (gpuops.shapes) before
anything reads it: a malformed answer is exit 3 naming the field, never a KeyError or TypeError
(exit 70) in the verb that reads it first. The lying box is a real sshd whose python3
(tests/fixtures/liar) answers every call with the file GPUOPS_LIE_FILE names."""

import json
from pathlib import Path

import pytest

from gpuops import errors, onbox, shapes
from gpuops.remote.targets import target_for

LIAR = Path(__file__).resolve().parent / "fixtures" / "liar"
MANIFEST = {"root": "/data", "now_ns": 1, "exists": True, "is_dir": True, "entries": [], "errors": [], "rules": [],
            "space": None, "rsync": "/usr/bin/rsync", "hashing": {"hashed_files": 0, "hashed_bytes": 0,
                                                                    "cache_hits": 0}}


@pytest.fixture(scope="module")
def lying(rig, tmp_path_factory):
    """(box, write(doc)): every call to the box answers with the last document written."""
    home = tmp_path_factory.mktemp("shapes-home")
    said = home / "answer.json"
    box = rig.box("shapes-liar", env={"HOME": str(home), "GPUOPS_LIE": "file", "GPUOPS_LIE_FILE": str(said),
                                      "PATH": f"{LIAR}:/usr/local/bin:/usr/bin:/bin"})

    def write(doc):
        said.write_text(json.dumps(doc))
    return box, write


@pytest.mark.parametrize("change, field", [
    ({"exists": None}, "'exists' is missing"),
    ({"entries": 5}, "'entries' is a int"),
    ({"hashing": [1]}, "'hashing' is a list"),
    ({"hashing": {"hashed_files": "many"}}, "'hashing.hashed_files' is 'many'"),
    ({"rules": [1]}, "'rules' holds a line that is not text"),
    ({"space": {"free_bytes": "lots"}}, "'free_bytes' is a str"),
])
def test_a_malformed_manifest_answer_is_exit_3_naming_the_field(cli, lying, tmp_path, change, field):
    """A manifest answer missing `exists`, or with entries=5 or hashing=[1], made pull exit 70
    (`gpuops: 'exists'`)."""
    box, write = lying
    write({k: v for k, v in dict(MANIFEST, **change).items() if v is not None})
    r = cli("pull", "--host", box.spec, "--src", "/data", "--dst", str(tmp_path / "got"), "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 3 and doc["error"]["kind"] == "bad-answer", r.stdout + r.stderr
    assert field in doc["error"]["message"] and "Traceback" not in r.stderr, doc["error"]["message"]
    assert not (tmp_path / "got").exists()


def test_a_probe_answer_of_another_shape_is_exit_3_naming_the_field(cli, lying):
    box, write = lying
    write({"probe_version": 1, "gpu": {"devices": [{"index": "zero"}]}})
    r = cli("preflight", "--host", box.spec, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 3 and "'gpu.devices[].index' is a str" in doc["error"]["message"], r.stdout + r.stderr


def test_every_entry_that_answers_has_its_shape_and_an_empty_answer_is_refused_at_the_door(lying):
    box, write = lying
    streamed = {"job_stream"}  # its header and end are checked as they stream (gpuops.ops.joblogs)
    run_by_ray = {"ray_driver", "ray_run"}  # a Ray job's entrypoint on the head: it answers Ray, not gpuops
    run_by_slurm = {"slurm_resume", "slurm_watch"}  # the batch script's, on the compute node: it answers the script
    assert set(shapes.ANSWERS) == set(onbox.entries()) - streamed - run_by_ray - run_by_slurm
    write({"now": 1})
    t = target_for(box.spec)
    try:
        for entry, table in shapes.ANSWERS.items():
            for action in (table if entry in shapes.BY_ACTION else [None]):
                with pytest.raises(errors.BadAnswer) as e:
                    t.run_onbox(entry, [action] if action else [], timeout_s=30)
                assert "is not gpuops's" in e.value.message, (entry, action, e.value.message)
    finally:
        t.close()


def test_an_error_document_passes_the_door_for_its_caller_to_report():
    assert shapes.checked("manifest", {"error": "bad request"}, "box") == {"error": "bad request"}
    with pytest.raises(errors.BadAnswer):
        shapes.checked("job_facts", {"error": 5}, "box", action="status")


@pytest.mark.parametrize("entry, doc, said", [
    ("probe", {"probe_version": 1, "gpu": {"devices": [{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": "GPU-a"}]}},
     "lists GPU uuid GPU-a more than once"),
    ("reap", {"holders": [], "actions": [], "gpus": [{"index": 2}, {"index": 2}], "applied": False,
              "nested_pid_namespace": False, "unreadable": 0, "nvml_unverified": []},
     "lists GPU index 2 more than once"),
])
def test_a_gpu_list_that_names_one_gpu_twice_is_an_invalid_answer(entry, doc, said):
    with pytest.raises(errors.BadAnswer) as e:
        shapes.checked(entry, doc, "box")
    assert said in e.value.message
