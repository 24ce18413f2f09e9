"""A run's rows, pure (gpuops.jobs.statusrow._run, gpuops.ops.jobs.one_row_per_run): an earlier attempt
keeps the state it ended in, only the current one is RETRYING between attempts, a run whose
supervisor died says it is unsupervised, and a listing shows each run once."""

from gpuops.jobs import statusrow
from gpuops.ops.jobs import one_row_per_run
from tests.jobs.test_jobs_statusrow import NOW, facts

KILLED = {"exit_code": None, "signal": "SIGKILL", "ended_at": NOW - 50}


def run(**kw):
    out = {"id": "r1", "attempt": 1, "current": "r1", "attempts": 1, "max_attempts": 3, "phase": "running",
           "ended": False, "started_at": NOW - 100, "attempt_ids": ["r1"]}
    out.update(kw)
    return out


def test_an_earlier_attempt_keeps_its_end_while_the_next_runs():
    row = statusrow.derive(facts(job_id="r1", exit=KILLED, liveness="gone",
                             run=run(current="r2", attempts=2, attempt_ids=["r1", "r2"])))
    assert row["state"] == "KILLED" and "retried: attempt 2/3 of run r1 is r2" in row["hint"]


def test_the_current_attempt_is_retrying_between_attempts_and_its_end_once_the_run_ended():
    going = statusrow.derive(facts(job_id="r1", exit=KILLED, liveness="gone", run=run(phase="backoff", next_at=NOW + 5)))
    assert going["state"] == "RETRYING" and "the next starts in 5s" in going["reason"]
    ended = statusrow.derive(facts(job_id="r1", exit=KILLED, liveness="gone",
                               run=run(phase="ended", ended=True, ended_at=NOW - 40)))
    assert ended["state"] == "KILLED" and ended["run"]["duration_s"] == 60


def test_a_run_whose_supervisor_died_is_unsupervised():
    row = statusrow.derive(facts(job_id="r1", wrapper_alive=False, run=run(ended=True, unsupervised=True)))
    assert row["state"] == "RUNNING" and statusrow.UNSUPERVISED in row["hint"] and row["run"]["unsupervised"]


def test_a_listing_shows_each_run_once_with_its_earlier_attempts_under_it():
    two = run(current="r2", attempts=2, attempt_ids=["r1", "r2"])
    rows = [statusrow.derive(facts(job_id="r2", run=dict(two, attempt=2))),
            statusrow.derive(facts(job_id="other")),
            statusrow.derive(facts(job_id="r1", exit=KILLED, liveness="gone", run=two))]
    short = one_row_per_run([dict(r) for r in rows])
    assert [r["job_id"] for r in short] == ["r2", "other"] and short[0]["earlier_attempts"] == 1
    assert "earlier" not in short[0]
    full = one_row_per_run(rows, earlier=True)
    assert [e["job_id"] for e in full[0]["earlier"]] == ["r1"] and full[0]["earlier"][0]["state"] == "KILLED"
