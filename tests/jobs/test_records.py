"""A job's records are typed once (gpuops.jobs.records): the shape the door checks a box's answer
against and the typed record the rules read after it come from the same declaration."""

import pytest

from gpuops import errors
from gpuops.engines import answers
from gpuops.jobs import records
from gpuops.jobs.records import ExitRecord, FailedAttempt, JobFacts, RunEvent, RunRecord

NONE = type(None)


def test_a_records_shape_is_its_fields_types_with_null_where_it_may_be_left_out():
    shape = records.shape(ExitRecord)
    assert list(shape) == list(ExitRecord._fields)
    assert shape["exit_code"] == (int, NONE) and shape["ended_at"] == (int, float, NONE)
    # a field typed without None is one every answer must carry
    assert records.shape(RunEvent)["seq"] is int and records.shape(RunRecord)["id"] is str
    # a field named after a keyword reads the answer's own key
    assert "class" in records.shape(FailedAttempt) and "class_" not in records.shape(FailedAttempt)


def test_read_gives_every_key_the_answer_left_out_as_none():
    run = records.read(RunRecord, {"id": "r1", "attempt": 2, "unknown_to_gpuops": 1})
    assert (run.id, run.attempt, run.current, run.failed) == ("r1", 2, None, None)
    assert records.read(FailedAttempt, {"class": "hang", "job": "j1"}).class_ == "hang"
    assert records.read(ExitRecord, None) == (None,) * len(ExitRecord._fields)


def _facts(**extra):
    return dict({"job_id": "j1", "now": 1.0, "meta": {"pid": 7}, "liveness": "alive"}, **extra)


def test_the_door_checks_an_answer_against_the_records_declaration():
    assert answers.facts(_facts(exit={"exit_code": 0, "ended_at": 2.5}), "box") is not None
    with pytest.raises(errors.BadAnswer, match=r"job record's exit is not gpuops's: 'exit_code' is a str"):
        answers.facts(_facts(exit={"exit_code": "0"}), "box")
    with pytest.raises(errors.BadAnswer, match=r"job record's meta is not gpuops's: 'pid' is a bool"):
        answers.facts(_facts(meta={"pid": True}), "box")
    with pytest.raises(errors.BadAnswer, match=r"run record is not gpuops's: 'id' is missing"):
        answers.facts(_facts(run={"attempt": 1}), "box")


def test_every_key_the_facts_record_declares_is_checked_at_the_door():
    """A field added to a record is checked where the answer enters: none is read unchecked."""
    for field, kind in records.shape(JobFacts).items():
        wrong = "text" if str not in (kind if isinstance(kind, tuple) else (kind,)) else 3
        with pytest.raises(errors.BadAnswer, match=repr(field)):
            answers.facts(dict(_facts(), **{field: wrong}), "box")
