"""A run's supervisor, once the run ended, writes the records a full disk refused for up to an
hour (gpuops.onbox.run.runloop.Run.drain), but not into a job directory someone deleted: then
nothing can take them and nobody reads them, and a supervisor left retrying is a process that
outlives its run by an hour."""

import itertools
import types

from gpuops.onbox.run import runloop


def _run(jobs_dir, monkeypatch, refuse=True):
    """A Run's drain over a fake disk (flush keeps refusing while `refuse`) and a clock that moves
    MAKE_RETRY_S a look, with time.sleep not waiting."""
    monkeypatch.setenv("GPUOPS_JOBS_DIR", str(jobs_dir))
    monkeypatch.setattr(runloop.time, "sleep", lambda s: None)
    ticks = itertools.count(0, runloop.MAKE_RETRY_S)
    run = types.SimpleNamespace(id="20261129-030000-abcdef", pending={"run.json": {}},
                                events=types.SimpleNamespace(pending=[]), clock=lambda: next(ticks), flushes=0)

    def flush():
        run.flushes += 1
        if not refuse:
            run.pending.clear()

    run.flush = flush
    return run


def test_a_full_disk_is_tried_again_until_the_limit(tmp_path, monkeypatch):
    (tmp_path / "20261129-030000-abcdef").mkdir()
    run = _run(tmp_path, monkeypatch)
    runloop.Run.drain(run, 60)
    assert run.flushes == 60 / runloop.MAKE_RETRY_S and run.pending  # a look each MAKE_RETRY_S, then it gives up


def test_records_whose_job_directory_was_deleted_end_the_wait_at_once(tmp_path, monkeypatch):
    run = _run(tmp_path, monkeypatch)
    runloop.Run.drain(run, runloop.PENDING_WAIT_S)
    assert run.flushes == 1


def test_records_the_disk_takes_end_the_wait(tmp_path, monkeypatch):
    (tmp_path / "20261129-030000-abcdef").mkdir()
    run = _run(tmp_path, monkeypatch, refuse=False)
    runloop.Run.drain(run, runloop.PENDING_WAIT_S)
    assert run.flushes == 1 and not run.pending
