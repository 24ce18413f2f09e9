"""A gang run that looks after itself (issue 26, Gangs): two loopback sshd boxes, torchrun with
gloo on the CPU (2 nodes x 1 process), a run policy. One node's training process is killed with
SIGKILL mid-run; the survivor's rank is left blocked in its collective (--hang-on-peer-loss, as
NCCL blocks on a dead peer), so only the gang link between the supervisors can end it. It must be
stopped within 30 s, the gang retried as a whole from the newest complete checkpoint, and the run
complete with the right final step. Every wait is on the boxes' own records."""

import json
import os
import signal
import time

import pytest

from gpuops import states
from gpuops.onbox.host import procs
from gpuops.onbox.triage import retrypolicy
from gpuops.ops import gangview
from tests.conftest import FIXTURES
from tests.jobs.helpers import wait_for
from tests.rig.sshd import free_port

pytest.importorskip("torch", reason="torch is the test extra's (CPU wheel)")

DDP = FIXTURES / "runs" / "ddp_resume.py"


def _run(jobs_dir, run_id):
    return json.loads((jobs_dir / run_id / "run.json").read_text())


def _trainer(jobs_dir, run_id):
    """The pid of the training process of the run's current attempt on one box (not torchrun)."""
    current = _run(jobs_dir, run_id)["current"]
    for pid in procs.pids():
        cmd = procs.cmdline(pid) or ""
        if procs.job_tag(pid) == current and "ddp_resume" in cmd and "torch.distributed.run" not in cmd:
            return pid
    return None


def test_a_killed_node_stops_the_survivor_within_30s_and_the_gang_resumes_to_completion(cli, gang_rig, tmp_path):
    hosts = [gang_rig.box(f"run-{n}").spec for n in ("a", "b")]
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    r = cli("launch", "--host", ",".join(hosts), "--torchrun", "--rdzv-port", str(free_port()),
            "--workdir", str(DDP.parent), "--name", "ddp", "--env", "OMP_NUM_THREADS=1",
            "--cmd", f"{DDP.name} --ckpt {ckpt} --steps 30 --every 5 --step-seconds 0.2 --hang-on-peer-loss",
            "--max-retries", "2", "--checkpoint-dir", str(ckpt), "--resume-arg", "--resume {checkpoint}", "--json",
            env=gang_rig.env(), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    gang = json.loads(r.stdout)["data"]["gang"]
    gang_id = gang["gang_id"]
    (head, worker) = [(gang_rig.jobs(n["host"]), n["job_id"]) for n in gang["nodes"]]

    assert wait_for(lambda: (ckpt / "checkpoint-10" / "trainer_state.json").exists(), timeout=240, every=0.5)
    victim = _trainer(*worker)
    assert victim, "node 1's training process not found"
    os.kill(victim, signal.SIGKILL)
    killed_at = time.time()

    # the survivor (node 0) blocks in its collective: only the gang link ends it
    first_exit = head[0] / head[1] / "exit.json"
    assert wait_for(first_exit.exists, timeout=60, every=0.2), "the survivor was never stopped"
    ended = json.loads(first_exit.read_text())
    stopped_after = ended["ended_at"] - killed_at
    print(f"survivor stopped {stopped_after:.1f}s after node 1's training process was killed")
    assert ended.get("ended_by") == "peer-lost", ended
    assert stopped_after < 30, stopped_after

    done = gangview.wait(gang_id, timeout_s=300)
    assert done["data"]["state"] == states.COMPLETED, done["summary"]
    assert done["data"]["run"]["attempt"] == 2 and done["data"]["run"]["of"] == 3, done["data"]["run"]
    assert done["summary"].endswith("(attempt 2/3)"), done["summary"]

    rec = _run(*head)
    assert len(rec["attempts"]) == 2 and rec["final"]["class"] is None
    first = rec["decisions"][0]
    # the head decided from node 1's end (a kill with no OOM, or its torchrun's view of it), not its own stop
    assert first["node"] == 1 and first["class"] in retrypolicy.TRANSIENT and first["retry"], first
    step = int(os.path.basename(rec["resumed_from"]).rsplit("-", 1)[1])
    assert step >= 10 and step % 5 == 0
    assert _run(*worker)["resumed_from"] == rec["resumed_from"] and len(_run(*worker)["attempts"]) == 2
    events = [json.loads(line) for line in (head[0] / head[1] / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events if e["kind"] in ("peer-lost", "retrying", "resumed", "completed")] == [
        "peer-lost", "retrying", "resumed", "completed"]
    logs = "".join((jobs / _run(jobs, run_id)["attempts"][1] / "log").read_text() for jobs, run_id in (head, worker))
    assert f"resumed from {ckpt}/checkpoint-{step} at step {step + 1}" in logs and "final step 30" in logs

    r = cli("status", "--gang", gang_id, env=gang_rig.env())
    assert r.returncode == 0 and f"{gang_id}: COMPLETED" in r.stdout and "(attempt 2/3)" in r.stdout, r.stdout
