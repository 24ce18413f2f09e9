"""A run's limits follow the supervisor's monotonic clock (gpuops.onbox.run.runwatch.Watch, driven
with a clock of the test's): a wall clock stepped by 700 s ends nothing, the monotonic clock
reaching the --max-runtime does. The processes the watch would stop are the test's fakes."""

import time

from gpuops.onbox.run import runrules, runwatch


class Run:
    def __init__(self, clock, policy):
        self.id, self.policy, self.gang, self.clock = "20261128-000000-abcdef", policy, None, clock
        self.started = clock()
        self.deadline = runrules.deadline(self.started, policy.get("max_runtime_s"))
        self.checkpoint_every_s, self.said = 30.0, []

    def publish(self, kind, attempt=None, job=None, **fields):
        self.said.append(kind)

    def save(self, **fields):  # the attempt's phase, as it changes (run.json's `activity`)
        self.phase = fields["activity"]["phase"]


def test_a_wall_clock_step_ends_nothing_and_the_monotonic_limit_ends_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_JOBS_DIR", str(tmp_path))
    jdir = tmp_path / "20261128-000000-abcdef"
    jdir.mkdir()
    (jdir / "log").write_text("")
    stopped = []
    monkeypatch.setattr(runwatch, "tree", lambda job_id, leader: [])
    monkeypatch.setattr(runwatch, "stop_tree", lambda job_id, leader, grace: stopped.append(job_id) or [])
    now = [1000.0]
    run = Run(lambda: now[0], {"max_runtime_s": 10, "stall_after_s": 5})
    watch = runwatch.Watch(run, 1, run.id, str(jdir), {}, leader=999999)
    wall = time.time()
    monkeypatch.setattr(time, "time", lambda: wall + 700)  # NTP, or a person, steps the clock
    now[0] += 9
    watch.tick()
    assert watch.ended_by is None and not stopped and run.said == []
    now[0] += 1
    watch.tick()
    assert watch.ended_by == "max-runtime" and stopped == [run.id] and run.said == ["timed-out"]
