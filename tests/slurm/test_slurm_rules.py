"""The pure parts of the Slurm engine: states through the table, a pending job explained, sbatch's
rejections traced to an option, the diagnosis of a Slurm end, and the batch script's signal path
(run by a real bash, no scheduler needed)."""

import os
import signal
import subprocess

import pytest

from gpuops import errors
from gpuops.engines import slurm_diagnose as scheduled
from gpuops.engines import slurm_sbatch as sbatch
from gpuops.engines import slurm_state as slurmstate
from gpuops.jobs import spec
from gpuops import states
from gpuops.onbox.engines import slurm_script
from gpuops.onbox.triage import signatures
from tests.slurm.conftest import CHECKPOINTING


def test_every_slurm_state_triage_knows_is_a_row_of_the_table():
    words = set(signatures.SLURM_ALIVE) | set(signatures.SLURM_ENDED)
    assert {w for w in words if slurmstate.from_word(w) is None} == set()
    ended = {w for w in signatures.SLURM_ENDED if slurmstate.from_word(w) not in states.TERMINAL}
    # COMPLETING: the job's processes are ending, its outcome is not known yet; status keeps waiting.
    assert ended == {"COMPLETING"}
    assert slurmstate.from_word("CANCELLED by 0") == states.CANCELLED and slurmstate.from_word("BOGUS") is None


def facts(job, **sched):
    return {"scheduler": dict({"known": True, "source": "scontrol", "job": job}, **sched), "exit": None}


PART = {"PartitionName": "debug", "TotalNodes": "1", "MaxNodes": "UNLIMITED", "MaxTime": "1:00:00"}
NODES = [{"name": "vm", "cpus": "2", "memory_mb": "1", "gres": "gpu:a100:4(S:0)", "features": "(null)"}]


@pytest.mark.parametrize("asked,said", [
    ({"nodes": 2}, "asked for 2 nodes; partition debug has 1: it can never run there"),
    ({"cpus_per_task": 8}, "asked for 8 CPUs per task; the nodes of partition debug have at most 2"),
    ({"gpus_per_node": "a100:8"}, "asked for 8 GPUs per node; the nodes of partition debug have at most 4"),
    ({"time": "2:00:00"}, "asked for --time 2:00:00; partition debug allows at most 1:00:00"),
])
def test_a_request_that_can_never_run_is_said_with_its_numbers(asked, said):
    job = {"JobId": "7", "JobState": "PENDING", "Reason": "PartitionConfig", "Partition": "debug"}
    row = slurmstate.decide(facts(job, pending={"partition": PART, "nodes": NODES, "position": 1}), asked)
    assert (row["state"], row["reason"], row["never_runs"]) == (states.PENDING, said, True)


def test_a_request_that_fits_waits_its_turn_with_its_place_and_estimate():
    job = {"JobId": "7", "JobState": "PENDING", "Reason": "Priority", "Partition": "debug"}
    pending = {"partition": PART, "nodes": NODES, "position": 3, "pending_in_partition": 5,
               "start_estimate": "2026-11-24T21:00:00"}
    row = slurmstate.decide(facts(job, pending=pending), {"nodes": 1, "gpus_per_node": "4"})
    assert "never_runs" not in row and (row["position"], row["pending_in_partition"]) == (3, 5)
    assert row["reason"] == ("waiting for its turn (Priority); 3 of 5 pending in partition debug; Slurm estimates "
                             "a start at 2026-11-24T21:00:00")


def test_held_after_pause_is_paused_and_what_the_table_cannot_know_comes_from_the_record():
    held = {"JobId": "7", "JobState": "PENDING", "Reason": "job_requeued_in_held_state"}
    assert slurmstate.decide(facts(held, held=True, paused=True), {})["state"] == states.PAUSED
    other = slurmstate.decide(facts(dict(held, Reason="JobHeldUser"), held=True, paused=False), {})
    assert other["state"] == states.PENDING and "scontrol release 7" in other["reason"]
    down = slurmstate.decide({"scheduler": {"known": None, "error": "no controller"}}, {})
    assert (down["state"], down["reason"]) == (states.UNREACHABLE, "no controller")
    assert slurmstate.decide({"scheduler": {"known": False}}, {})["state"] == states.VANISHED
    failed = slurmstate.decide(facts({"JobState": "FAILED", "ExitCode": "3:0"}), {})
    timed = slurmstate.decide(facts({"JobState": "TIMEOUT", "ExitCode": "0:15", "TimeLimit": "00:01:00",
                                     "RunTime": "00:01:13"}), {})
    assert (failed["exit_code"], timed["signal"]) == (3, "SIGTERM")
    assert timed["reason"] == "reached its time limit (00:01:00; ran 00:01:13)"


@pytest.mark.parametrize("text,seconds", [("30", 1800), ("0:01", 1), ("1:30:00", 5400), ("2-12", 216000),
                                          ("1-00:00:01", 86401), ("UNLIMITED", None), ("", None)])
def test_slurm_durations(text, seconds):
    assert slurmstate.seconds(text) == seconds


@pytest.mark.parametrize("message,flag", [
    ("sbatch: error: invalid partition specified: gpu", "--partition"),
    ("sbatch: error: Invalid --time specification", "--time"),
    ("Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or "
     "time limits)", "--qos"),
    ("sbatch: error: Invalid generic resource (gres) specification", "--gpus-per-node"),
    ("Batch job submission failed: Invalid feature specification", "--constraint"),
    ("sbatch: error: Memory specification can not be satisfied", "--mem"),
    ("Batch job submission failed: Requested node configuration is not available", "--cpus-per-task or --nodes"),
    ("something else entirely", None),
])
def test_an_sbatch_rejection_names_the_option_at_fault(message, flag):
    assert sbatch.at_fault(message, {"cpus_per_task": 64, "nodes": 2}) == flag


def test_resources_and_the_checkpoint_signal_are_checked_before_anything_is_sent():
    asked = sbatch.resources({"nodes": "2", "time": "1:00:00", "exclusive": True, "qos": None})
    assert sbatch.options(asked) == ["--nodes=2", "--time=1:00:00", "--exclusive"]
    assert spec.checkpoint_signal("SIGUSR1@120") == ("USR1", 120)
    assert spec.checkpoint_signal("B:TERM") == ("TERM", None)
    for bad in ({"nodes": "two"}, {"mem": "1G\n#SBATCH --x"}):
        with pytest.raises(errors.UsageError):
            sbatch.resources(bad)
    # _IGN, _DFL@60 and SIG_BLOCK passed (signal has SIG_IGN, SIG_DFL, SIG_BLOCK: handler and mask
    # constants, no signals), and the batch script's `trap` then failed on the node
    for bad in ("KILL", "USR9", "USR1@0", "_IGN", "_DFL@60", "SIG_BLOCK", "SIG_SETMASK", ""):
        with pytest.raises(errors.UsageError):
            spec.checkpoint_signal(bad)


def ev(state, exit_code="0:0", tail="", rss="10M", req="1000M", **extra):
    job = {"JobState": state, "ExitCode": exit_code, "NodeList": "n1"}
    return dict({"exit": {"scheduler": job}, "job": {"scheduler": {"known": True, "job": job}}, "log_tail": tail,
                 "accounting": [{"JobID": "7", "MaxRSS": "", "ReqMem": req}, {"JobID": "7.batch", "MaxRSS": rss}]},
                **extra)


@pytest.mark.parametrize("evidence,row,verdict", [
    (ev("OUT_OF_MEMORY", "0:125"), {"state": states.FAILED}, "oom-kill"),
    (ev("FAILED", "137:0", tail="line 1: 42 Killed  python train.py\n", rss="990M"), {"state": states.FAILED},
     "oom-kill"),
    (ev("FAILED", "137:0", tail="line 1: 42 Killed  python train.py\n", rss="20M"), {"state": states.FAILED},
     "killed-by-signal"),
    (ev("FAILED", "3:0"), {"state": states.FAILED, "exit_code": 3}, "failed-exit"),
    (ev("NODE_FAIL"), {"state": states.FAILED}, "node-failure"),
    (ev("CANCELLED"), {"state": states.CANCELLED}, "cancelled"),
    (ev("TIMEOUT", "0:15"), {"state": states.TIMEOUT, "reason": "reached its time limit"}, "timeout"),
])
def test_a_slurm_end_is_diagnosed_from_the_schedulers_numbers(evidence, row, verdict):
    assert scheduled.decide(evidence, row)["verdict"] == verdict


def test_memory_in_slurms_units():
    assert [scheduled.megabytes(t) for t in ("1024K", "2G", "4000Mn", "16Gc", "", "x")] == [1, 2048, 4000, 16384,
                                                                                           None, None]


def test_the_batch_script_hands_the_checkpoint_signal_to_the_command_and_keeps_its_exit(tmp_path):
    jdir = tmp_path / "job"
    jdir.mkdir()
    (jdir / "cmd").write_text(CHECKPOINTING)
    script = jdir / "batch.sh"
    script.write_text(slurm_script.render({"job_id": "j", "job_dir": str(jdir), "env": {"ODD": "$(touch x) 'q'"}}))
    proc = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    assert proc.stdout.readline() == "ready\n"
    os.kill(proc.pid, signal.SIGUSR1)  # what `scancel --batch --signal=USR1` does
    out, _ = proc.communicate(timeout=20)
    assert (out, proc.returncode) == ("checkpoint\n", 3)
    assert not (tmp_path / "x").exists()  # an --env value is data, never run


def test_the_batch_script_finds_a_free_rendezvous_port_when_the_asked_one_is_taken(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        jdir = tmp_path / "job"
        jdir.mkdir()
        (jdir / "cmd").write_text('echo "port=$GPUOPS_RDZV_PORT"\n')
        script = jdir / "batch.sh"
        script.write_text(slurm_script.render({"job_id": "j", "job_dir": str(jdir), "rdzv_port": port}))
        env = dict(os.environ, SLURM_JOB_NODELIST="")
        out = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=20)
    assert f"rendezvous port {port} is taken on this node" in out.stderr
    got = int(out.stdout.split("port=")[1])
    assert got != port and got > 0
