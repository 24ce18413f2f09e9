"""A job's telemetry as findings (gpuops.jobs.runtelemetry): the judgements the box's supervisor
makes over the series it sampled, checked and said; and end to end, a job whose GPU throttled while
its supervisor sampled it (the fake nvidia-smi's hw-slowdown scenario, a real supervisor) is one
that diagnose and triage --job report as throttled."""

import pytest

from gpuops.errors import BadAnswer
from gpuops.jobs import runtelemetry
from gpuops.onbox.host import telemetry
from gpuops.ops import diagnose, jobs as op, triage
from gpuops.remote.local import LocalTarget
from tests.fixtures.fakegpu.boxes import compose
from tests.jobs.helpers import kill_everything, wait_for


def series(util, power, limit=700, mask=None, cpu=None, top=None, mem=40000, seconds=70):
    return [{"t": t, "cpu": cpu, "cpu_top": top, "cores": 8,
             "gpus": [{"i": 0, "util": util, "power": power, "power_limit": limit, "throttle": mask, "mem": mem,
                       "sm": 810, "sm_max": 1980, "temp": 88}]} for t in range(0, seconds, 10)]


def judged(rows):
    return {"rows": len(rows), "first_t": rows[0]["t"], "last_t": rows[-1]["t"], "busy_wait": telemetry.busy_wait(rows),
            "throttled": telemetry.throttled(rows), "starved": telemetry.starved(rows)}


@pytest.mark.parametrize("rows,expected", [
    (series(100, 120), {("telemetry.busy-wait", "U21")}),
    (series(97, 650, mask=0x48), {("telemetry.throttled", "U23")}),
    (series(20, 300, cpu=790.0, top=99.0), {("telemetry.starved", "U24")}),
    (series(0, 60, cpu=100.0, top=99.0), {("telemetry.starved", "U38")}),
    (series(97, 650), set()),
])
def test_each_judgement_is_its_finding(rows, expected):
    found = runtelemetry.findings(runtelemetry.checked(judged(rows), "box"))
    assert {(f.id, f.gotcha) for f in found} == expected
    assert all(f.severity == "warn" for f in found)


@pytest.mark.parametrize("doc", [[], {"rows": "many"}, {"rows": 3, "busy_wait": {"gpus": "0"}},
                                 {"rows": 3, "throttled": [{"gpu": 0, "reasons": [7]}]},
                                 {"rows": 3, "starved": {"evidence": {"gpu_util_mean": "low"}}}])
def test_a_judgement_not_shaped_as_gpuops_writes_it_is_a_bad_answer(doc):
    with pytest.raises(BadAnswer):
        runtelemetry.checked(doc, "box")


def test_a_throttle_the_supervisor_sampled_is_a_finding_of_diagnose_and_triage(tmp_path, monkeypatch):
    _, env = compose(tmp_path, "v2-healthy", "hw-slowdown")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    jobs_dir = tmp_path / "jobs"
    t = LocalTarget()
    try:
        job = op.launch(t, command="echo working; sleep 2", jobs_dir=str(jobs_dir))["data"]["job"]["job_id"]
        assert wait_for(lambda: (jobs_dir / job / "exit.json").exists(), timeout=30)
        said = diagnose.diagnose(t, job=job, jobs_dir=str(jobs_dir))
        throttle = next(f for f in said["findings"] if f["id"] == "telemetry.throttled")
        assert throttle["gotcha"] == "U23" and "hw_slowdown" in throttle["evidence"]["reasons"]
        assert said["data"]["telemetry"]["rows"] >= 1
        triaged = triage.triage_remote(t, job=job, jobs_dir=str(jobs_dir))
        assert "telemetry.throttled" in {f["id"] for f in triaged["findings"]}
    finally:
        kill_everything(jobs_dir)
