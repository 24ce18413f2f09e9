"""`logs --save DIR` writes the job's records and log under DIR/<job id>/ and nowhere else, whatever
the box says the job's id is and whatever links DIR holds (gpuops.ops.joblogs.save_records writes
through gpuops.contained)."""

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuops import contained
from gpuops.ops.joblogs import save_records
from tests.rig.rewriter import rewriting_box
from tests.sync.conftest import snapshot


def test_logs_save_refuses_a_job_id_that_is_a_path(rig, jobs_box, jobs_dir, cli, tmp_path, tmp_path_factory):
    """A box answering job_id "/tmp/x" had `logs --save DIR` write the job's files to /tmp/x."""
    planted = tmp_path / "x"
    liar = rewriting_box(rig, "rewrite-job-id", f"job-id:{planted}", tmp_path_factory.mktemp("rewrite-home"),
                         tmp_path_factory.mktemp("rewrite-cache"))
    launched = cli("launch", "--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), "--cmd", "echo hi", "--json")
    assert launched.returncode == 0, launched.stderr
    job = json.loads(launched.stdout)["data"]["job"]["job_id"]
    saved = tmp_path / "saved"
    proc = cli("logs", "--host", liar.spec, "--job", job, "--jobs-dir", str(jobs_dir), "--save", str(saved), "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 3 and doc["error"]["kind"] == "bad-answer", proc.stdout + proc.stderr
    assert repr(str(planted)) in doc["error"]["message"]
    assert not planted.exists() and not saved.exists()


def test_logs_save_writes_the_records_and_resumes_the_log(tmp_path):
    save = tmp_path / "saved"
    log, have = save_records(str(save), {"job_id": "j1", "meta": {"name": "n"}, "exit": None})
    with log:
        log.write(b"first ")
    assert have == 0 and json.loads((save / "j1" / "meta.json").read_text()) == {"name": "n"}
    assert not (save / "j1" / "exit.json").exists()
    log, have = save_records(str(save), {"job_id": "j1", "meta": {"name": "n"}, "exit": {"exit_code": 0}})
    with log:
        log.write(b"second")
    assert have == 6 and (save / "j1" / "log").read_bytes() == b"first second"
    assert sorted(os.listdir(save / "j1")) == ["exit.json", "log", "meta.json"]


_IDS = st.one_of(st.sampled_from(["job", "link", "..", ".", "", "/tmp/x", "a/b", "../outside", "job\0", "\udc2f",
                                  "outside"]), st.text(max_size=6))
_RECORDS = st.one_of(st.none(), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(job_id=_IDS, meta=_RECORDS, exit_record=_RECORDS, data=st.binary(max_size=32))
def test_no_job_record_from_the_box_makes_logs_save_write_outside_dir(tmp_path_factory, job_id, meta, exit_record,
                                                                      data):
    world = tmp_path_factory.mktemp("world")
    save, outside = world / "saved", world / "outside"
    outside.mkdir()
    for name in ("log", "meta.json", "exit.json"):
        (outside / name).write_text("precious\n")
    (save / "job").mkdir(parents=True)
    (save / "link").symlink_to(outside)
    for name in ("log", "meta.json", "exit.json"):
        (save / "job" / name).symlink_to(outside / name)
    before = snapshot(outside, skip=())
    try:
        log, _ = save_records(str(save), {"job_id": job_id, "meta": meta, "exit": exit_record})
    except (contained.Outside, OSError):
        pass
    else:
        with log:
            log.write(data)
    assert snapshot(outside, skip=()) == before


@pytest.mark.parametrize("job_id", ["../outside", "/tmp/x", "a/b", ".", "x\0"])
def test_a_job_id_that_is_not_one_name_is_refused_before_anything_is_written(tmp_path, job_id):
    with pytest.raises(contained.Outside):
        save_records(str(tmp_path / "saved"), {"job_id": job_id, "meta": {}, "exit": None})
    assert os.listdir(tmp_path / "saved") == []
