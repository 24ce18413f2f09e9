"""The supervisor's look at a young run (gpuops.onbox.track.trackwatch): when it looks, what it makes of
wandb's lines and the job's WANDB_MODE (U35), of event files no TensorBoard reads (U39), and what
the workstation accepts of its record (gpuops.jobs.curves). The rig tests are
tests/jobs/test_jobs_trackers.py."""

import json
import os

import pytest

from gpuops.errors import BadAnswer
from gpuops.jobs import curves
from gpuops.onbox.track import trackwatch as W
from tests.test_trackers import OFFLINE, ONLINE

HEADER_ONLY = ONLINE.split("wandb: Syncing run")[0]


def test_the_window_comes_from_the_jobs_environment_and_a_bad_value_keeps_the_default():
    assert W.window_s({W.WINDOW_ENV: "0.5"}) == 0.5
    assert W.window_s({}) == W.window_s({W.WINDOW_ENV: "soon"}) == W.window_s({W.WINDOW_ENV: "-1"}) == W.WINDOW_S


def test_it_looks_at_the_window_then_once_more_later_and_never_again():
    assert [W.due(t, 0, 60) for t in (59, 60)] == [False, True]
    assert [W.due(t, 1, 60) for t in (179, 180)] == [False, True]
    assert not W.due(10_000, 2, 60)


@pytest.mark.parametrize("head,env,state", [
    (HEADER_ONLY, {}, "not-syncing"),
    (OFFLINE, {}, "offline"),
    ("", {"WANDB_MODE": "offline"}, "offline"),
    ("", {"WANDB_MODE": "disabled"}, "disabled"),
    ("", {}, None),
    ("step 1 loss 0.5\n", {"WANDB_MODE": "online"}, None),
])
def test_wandbs_header_without_its_syncing_line_or_an_offline_mode_is_u35(head, env, state):
    found, told = W.wandb_findings(head, "", env)
    assert told == (state is not None)
    if state is None:
        assert found == []
        return
    [f] = found
    assert (f.id, f.severity, f.gotcha, f.evidence["state"]) == ("tracker.wandb-run", "warn", "U35", state)
    assert f.fix


def test_a_run_that_syncs_is_told_and_has_no_finding():
    assert W.wandb_findings(ONLINE, "", {}) == ([], True)
    assert W.wandb_findings(HEADER_ONLY, ONLINE, {"WANDB_MODE": "offline"}) == ([], True)


def _dir(path, events):
    return {"path": path, "exists": True, "events": events, "capped": False}


def test_event_files_no_running_tensorboard_reads_are_u39_and_reading_them_passes():
    server = {"pid": 4100, "logdirs": [_dir("/root/tb", 3)]}
    [f] = W.tb_findings({"pinned": None, "servers": [server], "writes": ["/root/runs/exp1"]})[0]
    assert (f.id, f.severity, f.gotcha) == ("tb.logdir", "warn", "U39")
    assert "/root/runs/exp1" in f.title and "/root/tb" in f.title
    assert W.tb_findings({"pinned": None, "servers": [server], "writes": ["/root/tb/exp1"]}) == ([], True)
    assert W.tb_findings({"pinned": None, "servers": [server], "writes": ["/root/tbx/exp1"]})[0]  # not a prefix


def test_the_profiles_logdir_that_stays_empty_while_the_job_writes_elsewhere_is_u39():
    [f] = W.tb_findings({"pinned": _dir("/root/tf-logs", 0), "servers": [], "writes": ["/root/runs/a"]})[0]
    assert f.gotcha == "U39" and "/root/tf-logs" in f.title
    empty = {"pid": 4100, "logdirs": [_dir("/srv/tb", 0)]}
    [f] = W.tb_findings({"pinned": None, "servers": [empty], "writes": ["/root/runs/a"]})[0]
    assert "the job writes its events to /root/runs/a" in f.title


def test_a_job_that_holds_no_event_file_is_not_judged_and_no_reader_anywhere_says_nothing():
    assert W.tb_findings({"pinned": _dir("/root/tf-logs", 0), "servers": [], "writes": []}) == ([], False)
    assert W.tb_findings({"pinned": None, "servers": [], "writes": ["/root/runs/a"]}) == ([], True)


def test_the_event_files_a_process_holds_open_name_the_dir_it_writes(tmp_path):
    run = tmp_path / "runs" / "exp1"
    run.mkdir(parents=True)
    with open(run / "events.out.tfevents.1790000000.box.1.0", "wb"), open(tmp_path / "other.log", "wb"):
        assert W.event_dirs([os.getpid()]) == [str(run)]
    assert W.event_dirs([os.getpid()]) == []


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_the_check_records_each_look_and_hands_on_each_finding_once(tmp_path):
    (tmp_path / "log").write_text(HEADER_ONLY)
    clock, heard = Clock(), []
    check = W.Check(str(tmp_path), {W.WINDOW_ENV: "60"}, os.getpid(), on_found=heard.append, clock=clock)
    clock.t += 59
    assert check.tick() == [] and W.read(str(tmp_path)) is None
    clock.t += 1
    [f] = check.tick()
    rec = W.read(str(tmp_path))
    assert (rec["looks"], rec["done"], rec["wandb"]) == (1, False, "not-syncing")  # TensorBoard: not yet told
    clock.t += 120
    assert check.tick() == [] and heard == [f]
    rec = W.read(str(tmp_path))
    assert (rec["looks"], rec["done"], [x["gotcha"] for x in rec["findings"]]) == (2, True, ["U35"])
    clock.t += 10_000
    assert check.tick() == [] and W.read(str(tmp_path))["looks"] == 2


def test_the_workstation_takes_only_the_findings_the_supervisor_makes():
    rec = json.loads(json.dumps({"looks": 1, "done": True, "window_s": 90.0, "error": None, "wandb": "offline",
                                 "tb_writes": [], "findings": [W.wandb_findings("", "", {"WANDB_MODE": "offline"})[0][0]
                                                                .as_dict()]}))
    [f] = curves.findings(curves.checked(rec, "box"))
    assert (f.id, f.gotcha, f.evidence["seen_by"]) == ("tracker.wandb-run", "U35", "supervisor")
    assert curves.hint(rec) == "its curves go nowhere: U35 (gpuops diagnose)"
    for bad in ({"looks": "1"}, dict(rec, findings=[dict(rec["findings"][0], id="gpu.lost")]),
                dict(rec, findings=[dict(rec["findings"][0], gotcha="U1")]), dict(rec, findings=["x"])):
        with pytest.raises(BadAnswer):
            curves.checked(bad, "box")
