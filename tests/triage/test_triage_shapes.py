"""The shapes issue 41 found triage misreading, each written from the library's own source strings
(tests/fixtures/triage/shapes/<shape>/<case>.log; expected.json names the files each comes from):
a rendezvous that closed (torchrun on Slurm, Kubeflow's etcd backend), torch's "NVIDIA driver ... too
old", a state_dict size mismatch on one rank, HF Trainer's final metrics block, a SemLock failing
with errno 28 (/dev/shm, not the disk), a checkpoint that cannot be opened, the staged launcher's
stage failures, a log that stopped logging long before --now, and the hang of one process.

Each case asserts status, primary class, the other classes, stage and the whole progress
projection, with both scan engines; the negative cases beside them (a run that closes its own
rendezvous on success, an eval metrics block before a crash, a disk-full after an unrelated
semaphore traceback, a dataset zip) hold the other side of each rule.
"""

import json
from datetime import datetime

import pytest

from gpuops.onbox.triage import signatures as S
from gpuops.onbox.triage.logtriage import triage_bytes, triage_file
from tests.triage.helpers import FIXTURES

ROOT = FIXTURES / "shapes"
EXPECTED = json.loads((ROOT / "expected.json").read_text())
SHAPES = ("rendezvous_closed", "driver_too_old", "state_dict_mismatch", "hf_metrics_block", "semlock_shm",
          "checkpoint_unopenable", "stage_fail", "stopped_logging", "hang_one_process")


def _triage(name, engine="python"):
    e = EXPECTED[name]
    now = datetime.fromisoformat(e["now"]) if e["now"] else None
    return triage_file(ROOT / f"{name}.log", now=now, slurm_state=e["slurm_state"], engine=engine)


@pytest.mark.parametrize("engine", ["python", "grep"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_shape_reads_as_its_source_says(name, engine):
    result = _triage(name, engine)
    e = EXPECTED[name]
    assert {k: result.data[k] for k in e["expect"]} == e["expect"]
    said = " ".join(result.data["advice"] + [f.title for f in result.findings])
    for needle in e.get("advice_contains", []):
        assert needle in said, (needle, said)
    for needle in e.get("advice_lacks", []):
        assert needle not in said, (needle, said)
    for needle in e.get("summary_contains", []):
        assert needle in result.summary, (needle, result.summary)
    for needle in e.get("summary_lacks", []):
        assert needle not in result.summary, (needle, result.summary)


def test_every_shape_has_cases_and_names_its_sources():
    by = {}
    for name, e in EXPECTED.items():
        assert (ROOT / f"{name}.log").is_file(), name
        assert e["shape"] == name.split("/")[0] and e["source"], name
        by.setdefault(e["shape"], []).append(e["expect"])
    assert set(by) == set(SHAPES)
    assert all(len(cases) >= 2 for cases in by.values())


@pytest.mark.parametrize("shape, cls", [("rendezvous_closed", "rendezvous-fail"), ("driver_too_old", "driver-too-old"),
                                        ("state_dict_mismatch", "checkpoint-load-fail"),
                                        ("semlock_shm", "shm-exhausted"), ("checkpoint_unopenable", "checkpoint-load-fail")])
def test_each_failure_shape_is_its_class_where_it_ended_the_run(shape, cls):
    """Where the shape ended the run it is the primary class, never a plain exception or unknown."""
    ended = [e["expect"] for e in EXPECTED.values() if e["shape"] == shape and e["expect"]["status"] == "failed"
             and cls in [e["expect"]["primary"]] + e["expect"]["also"]]
    assert ended and all(x["primary"] not in ("python-exception", None) for x in ended)


def test_a_semaphore_that_finds_dev_shm_full_is_no_full_disk():
    data = _triage("semlock_shm/dataloader_queue_lock").data
    assert data["primary"] == "shm-exhausted" and "disk-full" not in data["also"]
    assert any("/dev/shm" in a for a in data["advice"])
    # a later traceback of its own: ENOSPC in torch.save is the disk again
    later = _triage("semlock_shm/disk_full_after_an_earlier_semlock_trace").data
    assert later["primary"] == "disk-full" and "shm-exhausted" not in later["also"]


def test_a_zip_error_is_a_checkpoint_only_inside_a_loader():
    assert _triage("checkpoint_unopenable/keras_bad_crc").data["primary"] == "checkpoint-load-fail"
    data = _triage("checkpoint_unopenable/dataset_zip_is_no_checkpoint").data
    assert data["primary"] == "python-exception" and "checkpoint-load-fail" not in data["also"]


def test_the_seeds_stage_failures_are_among_the_classes_found():
    for name, e in EXPECTED.items():
        if e["shape"] == "stage_fail":
            found = [e["expect"]["primary"]] + e["expect"]["also"]
            assert "stage-fail" in found and e["expect"]["status"] == "failed", name


def test_a_closed_rendezvous_on_success_is_no_failure():
    data = _triage("rendezvous_closed/completed_closes_its_rendezvous").data
    assert (data["status"], data["primary"], data["also"]) == ("completed", None, [])


def test_a_named_time_long_past_the_last_step_counts_the_steps_lost_and_claims_no_death():
    stale, plain = _triage("stopped_logging/seed_harness_stale"), _triage("stopped_logging/seed_harness_no_now")
    assert (stale.data["status"], stale.data["primary"]) == (plain.data["status"], plain.data["primary"]) == ("unknown", None)
    assert stale.data["progress"]["steps_lost"] == 316 - 300 and plain.data["progress"]["steps_lost"] is None
    assert stale.context["stopped_logging_s"] == 3600.0 and "stopped_logging_s" not in plain.context or \
        plain.context["stopped_logging_s"] is None
    assert "unknown-death" not in json.dumps(stale.data)


def test_a_hang_is_called_a_collective_deadlock_only_where_the_log_shows_ranks():
    one, ranks = _triage("hang_one_process/single_process"), _triage("hang_one_process/ranks_in_nccl")
    finding = {f.id: f for f in one.findings}["triage.hang"]
    assert "deadlock" not in finding.title and finding.gotcha == "U43"
    assert "collective (NCCL/RCCL) deadlock" in {f.id: f for f in ranks.findings}["triage.hang"].title
    assert (one.context["several_ranks"], ranks.context["several_ranks"]) == (False, True)
    # torchrun says it started several ranks even with NCCL quiet; mmdet's same words for one process's
    # DataLoader workers do not
    quiet, mm = _triage("hang_one_process/torchrun_ranks_quiet"), _triage("hang_one_process/single_process_mm_workers")
    assert (quiet.context["several_ranks"], mm.context["several_ranks"]) == (True, False)


def test_the_new_class_is_in_the_table():
    assert "driver-too-old" in S.CLASS_NAMES and S.CLASS_BY_NAME["driver-too-old"].gotcha == "U28"


def test_a_one_process_run_the_supervisor_stopped_as_hung_is_not_told_of_collectives():
    """Issue 34: a single `python train.py` stopped by --stall-after was explained as 'most likely a
    collective (NCCL/RCCL) deadlock'."""
    log = (ROOT / "hang_one_process" / "single_process.log").read_bytes()
    result = triage_bytes(log, now=datetime(2025, 3, 2, 11, 0), exit_record={"exit_code": None, "signal": "SIGTERM",
                                                                            "ended_by": "stall"})
    assert (result.data["status"], result.data["primary"]) == ("failed", "hang")
    said = " ".join(result.data["advice"] + [f.title for f in result.findings])
    assert "deadlock" not in said and "NCCL" not in said and "py-spy dump" in said
