"""The fleet view's pure parts: the idle rule, the checks on a box's answer, the rows people read."""

import copy
import io
import math

import pytest
from rich.console import Console

from gpuops import errors
from gpuops.fleetfile import Box
from gpuops.ops import fleet as op
from gpuops.render import fleet as render

NOW = 1_800_000_000.0


def facts(util=(0.0, 0.0), running=0, last_end=None, uptime=86400.0, present=True, error=None):
    devices = [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "memory_used_mib": 100.0, "memory_total_mib": 81920.0,
                "util_peak_pct": u} for i, u in enumerate(util)]
    return {"now": NOW, "hostname": "box", "uptime_s": uptime,
            "gpu": {"present": present, "source": "nvidia-smi", "error": error, "samples": 5, "devices": devices},
            "jobs": {"dir": "/root/.gpuops/jobs", "running": ["20261124-030000-cccccc"] * running,
                     "running_gpus": [None] * running,
                     "running_count": running, "last_end": last_end, "last_job": None, "ends_read": 3, "total": 3},
            "disk": {"role": "home", "path": "/root", "total_bytes": 100 << 30, "free_bytes": 25 << 30,
                     "total_inodes": 1000, "free_inodes": 900, "error": None}}


def test_idle_since_the_later_of_boot_and_the_last_jobs_end():
    after_boot = op.idleness(facts(last_end=NOW - 1800), usd_per_hour=2.0)
    assert after_boot == {"state": "idle", "why": "since the last gpuops job ended", "since": NOW - 1800,
                          "idle_s": 1800.0, "idle_usd": 1.0}
    before_boot = op.idleness(facts(last_end=NOW - 90000, uptime=3600.0), usd_per_hour=2.0)
    assert before_boot["since"] == NOW - 3600 and before_boot["idle_usd"] == 2.0
    assert before_boot["why"].startswith("since boot")


def test_no_price_no_money_and_busy_boxes_cost_nothing_idle():
    assert op.idleness(facts(last_end=NOW - 60))["idle_usd"] is None
    busy = op.idleness(facts(util=(0.0, 3.0)), usd_per_hour=5.0)
    assert busy["state"] == "busy" and busy["why"] == "GPU 1 at 3%" and busy["idle_usd"] is None
    job = op.idleness(facts(running=2), usd_per_hour=5.0)
    assert job["state"] == "busy" and job["why"] == "2 gpuops job(s) running"


def test_an_unreadable_gpu_is_not_provably_idle_but_a_missing_one_is_no_gpu():
    assert op.idleness(facts(util=(0.0, None)))["state"] == "unknown"
    assert op.idleness(facts(util=(), error="nvidia-smi --query-gpu: exit 9"))["state"] == "unknown"
    assert op.idleness(facts(util=(None, 50.0)))["state"] == "busy"  # another GPU's use is enough
    assert op.idleness(facts(util=(), present=False), usd_per_hour=1.0)["idle_usd"] == 24.0


@pytest.mark.parametrize("path,value,words", [
    (("gpu", "devices", 0, "util_peak_pct"), 150.0, "util_peak_pct is 150.0"),
    (("gpu", "devices", 0, "memory_used_mib"), math.nan, "memory_used_mib is nan"),
    (("uptime_s",), -5.0, "uptime_s is -5.0"),
    (("jobs", "running"), ["../../etc"], "job id '../../etc'"),
    (("jobs", "running_count"), 0, "the running jobs listed is 1"),
    (("jobs", "last_job"), "a b", "job id 'a b'"),
    (("gpu", "devices"), [{}] * 65, "the number of GPUs is 65"),
    (("disk", "free_bytes"), "lots", "'free_bytes' is a str"),
    (("hostname",), "x" * 600, "the hostname's length is 600"),
    (("gpu",), [], "'gpu' is a list"),
    (("gpu", "devices"), [7], "fleet GPU row is not gpuops's: a int, not an object"),
    (("gpu", "devices", 0, "index"), 5000, "a GPU index is 5000"),
])
def test_an_answer_gpuops_did_not_write_is_a_bad_answer(path, value, words):
    with pytest.raises(errors.BadAnswer) as e:
        op.checked(planted(facts(running=1), path, value), "box")
    assert words in e.value.message


def planted(doc, path, value):
    """`doc` with `value` put at `path` (keys and indices), as a lying box would answer."""
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


def test_a_well_formed_answer_passes_and_a_left_out_null_reads_as_none():
    doc = facts()
    del doc["disk"]["error"], doc["jobs"]["last_end"]
    checked = op.checked(copy.deepcopy(doc), "box")
    assert checked["disk"]["error"] is None and checked["jobs"]["last_end"] is None


def test_rows_and_the_totals_line():
    idle = op.row(Box(alias="a", usd_per_hour=1.5), facts(last_end=NOW - 7200))
    busy = op.row(Box(alias="b", usd_per_hour=4.0), facts(util=(90.0, 0.0)))
    down = op.row(Box(alias="c"), error={"kind": "unreachable", "message": "c: connection refused"})
    doc = op.build([idle, busy, down])
    assert doc["summary"] == "3 boxes: 1 busy, 1 idle ($3.00 spent idle, $1.50/h now), 1 not answering (c)"
    assert doc["exit_code_hint"] == errors.HOST and doc["ok"] is False
    assert render.cells(idle)[1:] == ["2x A100-SXM4-80GB", "200.0 MiB / 159.8 GiB", "0%", "0", "/root",
                                      "25.0 GiB 25%", "90%", "24h 00m", "2h 00m", "$3.00"]
    assert render.cells(busy)[9:] == ["busy", "-"]
    assert render.cells(down)[:2] == ["c", "unreachable"]
    assert "exit_code_hint" not in op.build([idle])


def test_a_box_without_gpus_reads_none_in_the_table():
    r = op.row(Box(alias="cpu"), facts(util=(), present=False))
    assert r["gpus"] == [] and r["vram_free_mib"] == 0 and r["util_peak_pct"] is None
    assert render.cells(r)[1:4] == ["none", "-", "-"]


def test_watch_redraws_until_ctrl_c_and_returns_the_last_complete_report():
    docs = [op.build([op.row(Box(alias=f"round{i}"), facts())]) for i in range(3)]
    calls = []

    def produce():
        calls.append(1)
        if len(calls) > len(docs):
            raise KeyboardInterrupt
        return docs[len(calls) - 1]

    out = io.StringIO()
    last = render.watch(produce, Console(file=out, force_terminal=True, width=200), pause_s=0)
    assert last is docs[-1] and len(calls) == 4
    assert "round2" in out.getvalue()


def test_ctrl_c_before_the_first_report_is_an_interruption():
    def produce():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        render.watch(produce, Console(file=io.StringIO()), pause_s=0)
