"""The pure parts of the Ray engine: Ray's words through the state table, a driver's exit code and
signal, a rejection traced to the flag, and what preflight says of a cluster's facts."""

import base64

import pytest

from gpuops import engines, errors
from gpuops.engines import ray_preflight
from gpuops.jobs import states, statusrow

RAY = engines.get("ray")


def row(status, exit=None, known=True, **job):
    meta = {"engine": "ray", "ray_submission_id": "gpuops-j1", "launched_at": 100.0}
    facts = {"job_id": "j1", "now": 200.0, "meta": meta, "exit": exit, "progress": {"events": []},
             "scheduler": {"known": known, "source": "ray", "job": dict(job, status=status) if status else None}}
    return statusrow.derive(facts)


@pytest.mark.parametrize("status,expected", [("PENDING", states.PENDING), ("RUNNING", states.RUNNING),
                                             ("STOPPED", states.CANCELLED), ("SUCCEEDED", states.COMPLETED),
                                             ("FAILED", states.FAILED)])
def test_each_of_rays_words_is_a_row_of_the_table(status, expected):
    assert RAY.state_of(status) == expected and row(status)["state"] == expected
    assert RAY.phases()[status] == states.PHASES[expected]


def test_a_failed_driver_carries_its_exit_code_or_its_signal():
    failed = row("FAILED", exit={"exit_code": 3, "signal": None, "ended_at": 150.0})
    assert (failed["state"], failed["exit_code"], failed["duration_s"]) == (states.FAILED, 3, 50.0)
    killed = row("FAILED", exit={"exit_code": None, "signal": "SIGKILL", "ended_at": 150.0})
    assert (killed["state"], killed["signal"]) == (states.KILLED, "SIGKILL")
    never = row("FAILED", error_type="JOB_SUPERVISOR_ACTOR_START_FAILURE", message="Failed to start supervisor")
    assert never["state"] == states.FAILED and "Failed to start supervisor" in never["reason"]


def test_a_cluster_that_forgot_the_job_or_cannot_be_asked():
    assert row(None, known=False)["state"] == states.VANISHED
    down = statusrow.derive({"job_id": "j1", "now": 1.0, "meta": {"engine": "ray"}, "exit": None,
                         "scheduler": {"known": None, "error": "the Ray head's dashboard does not answer"}})
    assert down["state"] == states.UNREACHABLE and "dashboard" in down["reason"]


def test_a_rejection_names_the_flag_ray_names():
    said = errors.Rejected("head: Ray refused it: TypeError: entrypoint_num_gpus must be a number, got <class 'str'>")
    blamed = RAY.explain_rejection(said, {"entrypoint_num_gpus": "two"})
    assert blamed.message == ("head: Ray refused the job (--entrypoint-num-gpus): TypeError: entrypoint_num_gpus "
                              "must be a number, got <class 'str'>")


def test_flags_are_sent_as_numbers_where_they_read_as_numbers():
    opts = {"kind": "cmd", "command": "true"}
    RAY.submission(opts, {"entrypoint_num_gpus": "1", "entrypoint_num_cpus": "0.5", "entrypoint_memory": "2e9x"})
    assert opts["resources"] == {"entrypoint_num_gpus": 1, "entrypoint_num_cpus": 0.5, "entrypoint_memory": "2e9x"}
    assert opts["engine"] == "ray" and opts["driver_b64"]
    with pytest.raises(errors.UsageError, match="add --engine slurm"):
        RAY.submission({}, {"nodes": 2})
    with pytest.raises(errors.UsageError, match="Ray assigns GPUs"):
        RAY.submission({"gpus": "0"}, {})


def node(**kw):
    return dict({"hostname": "head", "ip": "10.0.0.1", "head": True, "state": "ALIVE", "ray_cpus": 8.0,
                 "ray_gpus": 8.0, "object_store_bytes": 1 << 30, "box_cpus": 8, "box_gpus": 8}, **kw)


def cluster(*nodes, shm=2 << 30):
    return {"dashboard": "http://127.0.0.1:8265", "ray_version": "2.60.0", "nodes": list(nodes), "shm_bytes": shm}


def by_id(found):
    return {f.id: f.severity for f in found}


def test_a_healthy_cluster_is_all_ok():
    assert by_id(ray_preflight.findings(cluster(node(), node(head=False, hostname="w1")))) == {
        "ray.dashboard": "ok", "ray.nodes": "ok", "ray.resources": "ok", "ray.object_store": "ok"}


def test_the_classic_ray_traps_are_warned():
    found = ray_preflight.findings(cluster(node(ray_gpus=0.0), node(head=False, hostname="w1", state="DEAD"),
                                           shm=64 << 20))
    assert by_id(found) == {"ray.dashboard": "ok", "ray.nodes": "warn", "ray.resources": "warn",
                            "ray.object_store": "warn"}
    titles = " ".join(f.title for f in found)
    assert "Ray schedules 0 of its 8 GPUs" in titles and "w1 (DEAD)" in titles and "/dev/shm (64.0 MiB)" in titles


def test_a_dashboard_that_does_not_answer_fails_and_a_box_that_is_no_head_is_said():
    deaf = ray_preflight.findings({"error": {"kind": "unreachable", "message": "the dashboard does not answer"}})
    assert by_id(deaf) == {"ray.dashboard": "fail"}
    other = ray_preflight.findings({"error": {"kind": "usage", "message": "no Ray head on this box"}})
    assert by_id(other) == {"ray.dashboard": "info"}
    lying = ray_preflight.findings(cluster(dict(node(), ray_cpus="eight")))
    assert by_id(lying) == {"ray.dashboard": "warn"}


def test_the_head_is_seen_by_its_gcs_listening():
    facts = {"listeners": [{"port": 6379, "owners": [{"pid": 5, "comm": "gcs_server"}]}]}
    assert ray_preflight.present(facts) and not ray_preflight.present({"listeners": [{"port": 22, "owners": []}]})


def attempt(exit_record):
    """The row of a run's attempt whose end the run's supervisor, the Ray job's driver, recorded."""
    from gpuops.onbox import ray_engine

    meta = {"engine": "ray", "ray_submission_id": "gpuops-j1", "launched_at": 100.0, "run": {"id": "j1", "attempt": 1}}
    facts = {"job_id": "j1", "now": 200.0, "meta": meta, "exit": exit_record, "progress": {"events": []},
             "scheduler": {"known": True, "source": "supervisor", "job": ray_engine.attempt_end(exit_record)}}
    return statusrow.derive(facts)


def test_an_attempt_ends_as_its_supervisor_recorded_while_ray_runs_the_submission_on():
    done = attempt({"exit_code": 0, "signal": None, "ended_at": 150.0})
    assert (done["state"], done["scheduler_state"]) == (states.COMPLETED, "SUCCEEDED")
    failed = attempt({"exit_code": 137, "signal": None, "ended_at": 150.0})
    assert (failed["state"], failed["exit_code"]) == (states.FAILED, 137)
    killed = attempt({"exit_code": None, "signal": "SIGKILL", "ended_at": 150.0})
    assert (killed["state"], killed["signal"]) == (states.KILLED, "SIGKILL")
    stopped = attempt({"exit_code": None, "signal": "SIGTERM", "ended_at": 150.0, "ended_by": "stop"})
    assert stopped["state"] == states.CANCELLED


def test_the_runs_time_limit_is_timeout_and_a_stall_says_its_class():
    limit = attempt({"exit_code": None, "signal": "SIGTERM", "ended_at": 150.0, "ended_by": "max-runtime"})
    assert limit["state"] == states.TIMEOUT and "--max-runtime" in limit["reason"]
    stall = attempt({"exit_code": None, "signal": "SIGTERM", "ended_at": 150.0, "ended_by": "stall",
                     "stall_evidence": "stall-1.json"})
    assert stall["state"] == states.KILLED and "class hang" in stall["reason"] and "stall-1.json" in stall["reason"]
    ray_said = row("FAILED", exit={"exit_code": None, "signal": "SIGTERM", "ended_at": 150.0, "ended_by": "stall"})
    assert ray_said["state"] == states.KILLED and "hang" not in (ray_said.get("reason") or "")  # Ray's, not a run's


def test_a_run_policy_is_taken_and_its_driver_is_the_run_supervisor():
    from gpuops.jobs import runpolicy

    policy = runpolicy.build(max_retries="2", checkpoint_dir="ckpt", resume_arg="--resume {checkpoint}",
                             stall_after="30s", max_runtime="4h", keep_checkpoints="3", notify="cat")
    RAY.check_policy(policy)  # every field: the driver runs the box's run loop
    plain, run = {}, {}
    RAY.submission(plain, {})
    RAY.submission(run, {})
    assert RAY.with_policy(run, policy, {}) == [] and run["policy"] == policy
    plain, run = base64.b64decode(plain["driver_b64"]), base64.b64decode(run["driver_b64"])
    assert b"_define('onbox.runloop'" not in plain and b"_define('onbox.runloop'" in run  # only a run pays for it
    assert run.endswith(b"['gpuops_box.onbox.ray_run'].main(sys.argv[1:]))\n")
