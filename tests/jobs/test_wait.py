"""`wait`, exact paging, `logs --follow --timeout` and SIGTERM, stop plans and ambiguous names:
the CLI as a subprocess against the real sshd rig, with real jobs."""

import base64
import json
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from gpuops import errors
from gpuops.engines import answers
from gpuops.onbox.engines import box_stop
from gpuops.ops import joblogs, jobs as op, reap, wait
from tests.conftest import ROOT
from tests.jobs.helpers import meta_of, wait_for


def gp(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "gpuops", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def launched(box, jobs_dir, command, **kw):
    doc = op.launch(box, command=command, jobs_dir=str(jobs_dir), **kw)
    assert doc["data"]["meta"].get("pid"), doc["summary"]  # started (a quick one may have ended already)
    return doc["data"]["job"]["job_id"]


def on_box(jobs_box, jobs_dir, *args):
    return ["--host", jobs_box.spec, "--jobs-dir", str(jobs_dir), *args, "--json"]


def test_wait_returns_on_the_box_within_a_second_of_the_exit(box, jobs_box, jobs_dir):
    job = launched(box, jobs_dir, "echo started; sleep 4; echo done; exit 3")
    p = gp("wait", *on_box(jobs_box, jobs_dir, "--job", job, "--timeout", "30"))
    returned = time.time()
    doc = json.loads(p.stdout)
    ended_at = json.loads((jobs_dir / job / "exit.json").read_text())["ended_at"]
    assert p.returncode == 0, p.stderr
    assert doc["data"]["state"] == "FAILED" and doc["data"]["reached"] and not doc["data"]["timed_out"]
    assert returned - ended_at < 1.5, f"wait returned {returned - ended_at:.2f}s after the job's recorded end"
    assert doc["data"]["new_text"] == "started\ndone\n" and doc["data"]["next_offset"] == 13
    assert doc["next"][0]["argv"][:6] == ["gpuops", "diagnose", "--host", jobs_box.spec, "--job", job]
    assert "exit_code_hint" not in p.stdout


def test_wait_times_out_with_exit_6_and_a_regex_match_returns_at_once(box, jobs_box, jobs_dir):
    job = launched(box, jobs_dir, "echo warmup; sleep 1; echo 'step 7 loss 2.5'; sleep 30")
    began = time.monotonic()
    p = gp("wait", *on_box(jobs_box, jobs_dir, "--job", job, "--timeout", "2"))
    doc = json.loads(p.stdout)
    assert p.returncode == errors.WAIT_TIMED_OUT == 6, p.stderr
    assert doc["ok"] is False and doc["data"]["timed_out"] and doc["data"]["state"] == "RUNNING"
    assert 2 <= time.monotonic() - began < 10
    hit = gp("wait", *on_box(jobs_box, jobs_dir, "--job", job, "--log-regex", r"step (\d+) loss", "--timeout", "20"))
    found = json.loads(hit.stdout)
    log = (jobs_dir / job / "log").read_bytes()
    assert hit.returncode == 0 and found["data"]["reason"] == "match"
    assert found["data"]["match"]["line"] == "step 7 loss 2.5"
    assert found["data"]["next_offset"] == log.index(b"step 7") + len(b"step 7 loss 2.5\n")
    again = gp("wait", *on_box(jobs_box, jobs_dir, "--job", job, "--log-regex", "step", "--from-offset",
                                str(found["data"]["next_offset"]), "--timeout", "1"))
    assert again.returncode == 6 and json.loads(again.stdout)["data"]["new_text"] == ""


def test_wait_for_a_state_that_can_no_longer_come_is_exit_1(box, jobs_box, jobs_dir):
    job = launched(box, jobs_dir, "exit 0")
    p = gp("wait", *on_box(jobs_box, jobs_dir, "--job", job, "--until", "FAILED,KILLED", "--timeout", "20"))
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["data"]["state"] == "COMPLETED" and not doc["data"]["timed_out"]
    assert "can no longer be reached" in doc["summary"]


def test_wait_usage_errors_are_exit_2(jobs_box, jobs_dir):
    for args in (["--until", "DONE"], ["--until", "PENDING"], ["--timeout", "abc"], ["--log-regex", "("],
                 ["--max-bytes", "-1"]):
        p = gp("wait", *on_box(jobs_box, jobs_dir, "--job", "x", *args))
        assert p.returncode == 2 and json.loads(p.stdout)["error"]["kind"] == "usage", args


def test_paging_a_5_mib_log_from_0_reproduces_it_byte_for_byte(box, jobs_box, jobs_dir):
    # multi-byte characters straddle the page bounds; a \r progress bar; no final newline
    job = launched(box, jobs_dir, "python3 -c \"import sys; w = sys.stdout.buffer.write; "
                                  "[w(('%d ünï €𝄞 step\\r' % i if i % 3 else '%d line\\n' % i).encode()) "
                                  "for i in range(300000)]; w(b'tail')\"")
    wait_for(lambda: (jobs_dir / job / "exit.json").exists(), timeout=60)
    log = (jobs_dir / job / "log").read_bytes()
    assert len(log) > 5 << 20
    got, offset, pages = bytearray(), 0, 0
    while True:
        doc = joblogs.logs(box, job=job, from_offset=offset, max_bytes=1 << 20, jobs_dir=str(jobs_dir))
        d = doc["data"]
        assert d["text_starts_at"] == offset and d["text_exact"], d
        got += d["text"].encode("utf-8")
        assert d["next_offset"] == offset + len(d["text"].encode("utf-8"))
        pages += 1
        if not d["more"]:
            break
        offset = d["next_offset"]
    assert bytes(got) == log and pages in (-(-len(log) // (1 << 20)), -(-len(log) // (1 << 20)) + 1)
    cli = gp("logs", *on_box(jobs_box, jobs_dir, "--job", job, "--from-offset", "0"))
    page = json.loads(cli.stdout)["data"]
    assert cli.returncode == 0 and page["next_offset"] <= 64 << 10 and page["more"] is True
    assert page["text"].encode("utf-8") == log[:page["next_offset"]]
    assert len(cli.stdout) < 100_000  # `--json` text is capped by default


def test_follow_with_a_timeout_and_on_sigterm_prints_where_to_resume(box, jobs_box, jobs_dir):
    job = launched(box, jobs_dir, "for i in $(seq 1 600); do echo tick $i; sleep 0.1; done")
    p = gp("logs", *on_box(jobs_box, jobs_dir, "--job", job, "--follow", "--from-offset", "0", "--timeout", "1.5"))
    doc = json.loads(p.stdout)
    assert p.returncode == 6 and doc["data"]["timed_out"] is True
    assert doc["data"]["text"].encode() == (jobs_dir / job / "log").read_bytes()[:doc["data"]["next_offset"]]
    follower = subprocess.Popen([sys.executable, "-m", "gpuops", "logs", "--host", jobs_box.spec, "--jobs-dir",
                                 str(jobs_dir), "--job", job, "--follow", "--from-offset", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out = bytearray()
    reader = threading.Thread(target=lambda: [out.extend(c) for c in iter(lambda: follower.stdout.read1(4096), b"")])
    reader.start()
    try:
        assert wait_for(lambda: b"tick 5\n" in out, timeout=30), "the follow never printed"
        follower.send_signal(signal.SIGTERM)
        follower.wait(timeout=20)
        reader.join(timeout=10)
        err = follower.stderr.read()
    finally:
        if follower.poll() is None:
            follower.kill()
    out = bytes(out)
    trailer = re.search(rb"stopped following \(SIGTERM\)\. Resume: gpuops logs .* --from-offset (\d+) --follow", err)
    assert follower.returncode == 143 and trailer, err
    assert int(trailer.group(1)) == len(out) > 0  # every byte printed, and the offset right after it
    assert out == (jobs_dir / job / "log").read_bytes()[:len(out)]


def test_stop_applies_its_plan_and_refuses_when_the_holders_changed(box, jobs_box, jobs_dir):
    go = jobs_dir / "go"
    job = launched(box, jobs_dir, "python3 -c \"import os, subprocess, time\n"
                                  "a = subprocess.Popen(['sleep', '60'])\n"
                                  f"while not os.path.exists('{go}'): time.sleep(0.05)\n"
                                  "subprocess.Popen(['sleep', '61']); a.wait()\"")

    def targets(cmd):
        found = op.stop(box, job=job, jobs_dir=str(jobs_dir))["data"]["targets"]
        return any(t["cmd"] == cmd for t in found) and found

    before = wait_for(lambda: targets("sleep 60"), timeout=10)
    time.sleep(box_stop.LASTING_S)  # the job's processes have lasted: the plan binds to each of them
    dry = gp("stop", *on_box(jobs_box, jobs_dir, "--job", job))
    plan = json.loads(dry.stdout)["data"]["plan"]
    assert dry.returncode == 5 and len(plan["pids"]) == len(before) and f"--plan {plan['plan_id']}" in dry.stdout
    assert "exit_code_hint" not in dry.stdout  # the exit code is the process's, not a key of the JSON
    go.write_text("")
    wait_for(lambda: targets("sleep 61"), timeout=10)
    time.sleep(box_stop.LASTING_S)  # a process that has lasted, not a passing child: the plan no longer holds
    refused = gp("stop", *on_box(jobs_box, jobs_dir, "--job", job, "--yes", "--plan", plan["plan_id"], "--grace", "0"))
    doc = json.loads(refused.stdout)
    assert refused.returncode == 5 and doc["error"]["kind"] == "refused"
    now = doc["data"]["plan"]
    assert len(now["pids"]) == len(plan["pids"]) + 1 and now["plan_id"] != plan["plan_id"]
    assert all(_alive(p) for p in now["pids"])  # nothing was signalled
    applied = gp("stop", *on_box(jobs_box, jobs_dir, "--job", job, "--yes", "--plan", now["plan_id"], "--grace", "0"))
    assert applied.returncode == 0, applied.stdout
    assert not any(_alive(p) for p in now["pids"])
    told = gp("diagnose", *on_box(jobs_box, jobs_dir, "--job", job))
    verdict = json.loads(told.stdout)["data"]
    assert told.returncode == 0 and verdict["verdict"] == "stopped", verdict
    assert "gpuops stop" in verdict["evidence"][-1] and "from outside" not in told.stdout


def test_stops_own_next_still_works_seconds_later_for_a_job_with_passing_children(box, jobs_box, jobs_dir):
    """The dry run's plan listed a `sleep 1`; pasting its `next:` line 2 s later said "plan ... no
    longer matches" and stopped nothing. The plan binds to the job and its lasting processes."""
    # a child every second, each living 1.5 s: whenever the dry run looks, one is there
    job = launched(box, jobs_dir, "while :; do sleep 1.5 & sleep 1; done")
    time.sleep(box_stop.LASTING_S)  # the loop itself has lasted: the plan binds to it alone
    dry = gp("stop", *on_box(jobs_box, jobs_dir, "--job", job))
    doc = json.loads(dry.stdout)
    assert dry.returncode == 5, dry.stdout
    passing = [t for t in doc["data"]["targets"] if not t["planned"]]
    assert passing and {t["cmd"] for t in passing} <= {"sleep 1", "sleep 1.5"}, doc["data"]["targets"]
    assert doc["data"]["plan"]["pids"] == [meta_of(jobs_dir, job)["pid"]]
    time.sleep(2.5)  # every child the dry run saw is gone, and others came
    argv = doc["next"][0]["argv"]
    assert argv[:2] == ["gpuops", "stop"] and "--plan" in argv
    applied = gp(*argv[1:], "--json")
    done = json.loads(applied.stdout)
    assert applied.returncode == 0, done["summary"]
    assert done["data"]["state"] in ("KILLED", "FAILED") and not any(_alive(p) for p in doc["data"]["plan"]["pids"])


def test_a_name_two_jobs_share_is_exit_2_listing_both(box, jobs_box, jobs_dir):
    first = launched(box, jobs_dir, "true", name="twin")
    second = launched(box, jobs_dir, "true", name="twin")
    for verb in ("status", "stop", "logs", "diagnose", "wait"):
        p = gp(verb, *on_box(jobs_box, jobs_dir, "--job", "twin"))
        doc = json.loads(p.stdout)
        assert p.returncode == 2 and doc["error"]["kind"] == "ambiguous", (verb, p.stdout)
        assert first in doc["summary"] and second in doc["summary"]
    wait_for(lambda: (jobs_dir / second / "exit.json").exists())
    child = op.retry(box, job=second, jobs_dir=str(jobs_dir))["data"]["job"]["job_id"]
    assert meta_of(jobs_dir, child)["name"] == "twin"
    solo = launched(box, jobs_dir, "true", name="solo")
    wait_for(lambda: (jobs_dir / solo / "exit.json").exists())
    retried = op.retry(box, job="solo", jobs_dir=str(jobs_dir))["data"]["job"]["job_id"]
    # one line of retries is one job: its newest attempt
    assert op.status(box, job="solo", jobs_dir=str(jobs_dir))["data"]["jobs"][0]["job_id"] == retried


def test_the_readme_lists_every_exit_code():
    rows = re.findall(r"^\| ([\d, ]+) \|", (ROOT / "README.md").read_text(), re.M)
    listed = {int(n) for row in rows for n in row.split(",")}
    codes = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, int)}
    assert codes | set(errors.INTERRUPTED.values()) == listed


def _alive(pid):
    from gpuops.onbox.host import procs

    return procs.alive(pid)


def test_a_box_answer_out_of_shape_is_a_bad_answer_not_a_crash():
    good = {"job": {}, "phase": "ended", "reason": "phase", "start": 0, "text_start": 2, "next": 6, "size": 6,
            "text_b64": base64.b64encode(b"abcd").decode()}
    assert wait._checked(dict(good), "box", 100)["text"] == b"abcd"
    for bad in ({"next": 7}, {"text_start": 3}, {"text_b64": "!!"}, {"start": -1}, {"match": {"end": "x"}}):
        with pytest.raises(errors.BadAnswer):
            wait._checked(dict(good, **bad), "box", 100)
    with pytest.raises(errors.BadAnswer):
        wait._checked(dict(good), "box", 3)  # more text than was asked for
    stop = {"requested_at": 1.0, "signals": [{"signal": "SIGTERM", "pids": ["1; rm -rf ~"], "at": 1.0}]}
    with pytest.raises(errors.BadAnswer):
        answers.facts({"job_id": "j1", "meta": None, "stop": stop}, "box")
    run = {"id": "j1", "activity": {"phase": "saving checkpoint", "since": 1.0, "step": 3}}
    assert answers.facts({"job_id": "j1", "meta": None, "run": run}, "box")
    for activity in ({"phase": "\x1b[2Jowned"}, {"phase": "training", "step": "3"}):
        with pytest.raises(errors.BadAnswer):
            answers.facts({"job_id": "j1", "meta": None, "run": dict(run, activity=activity)}, "box")
    facts = {"holders": [], "actions": [], "gpus": [], "applied": False, "nested_pid_namespace": False, "gpu": None,
             "gpu_error": None, "unreadable": 0, "nvml_unverified": []}
    assert reap.checked(dict(facts, plan_targets=[[1, 2]]), "box")
    with pytest.raises(errors.BadAnswer):
        reap.checked(dict(facts, plan_targets=[[1, "2"]]), "box")
