"""Each fake-GPU scenario through the whole preflight (real probe on this machine under the
fixture sysroot, then the checks): the verdict each one exists to produce."""

import re
import subprocess

import pytest

from gpuops.ops import preflight as op
from gpuops.remote.local import LocalTarget
from tests.fixtures.fakegpu.boxes import compose


def gpu_findings(doc):
    return {(f["id"], f["severity"], f["evidence"].get("gpu")) for f in doc["findings"] if f["id"].startswith("gpu.")}


@pytest.mark.parametrize("scenario,expected", [
    ("healthy", set()),
    ("hw-slowdown", {("gpu.throttle", "fail", 0), ("gpu.temperature", "warn", 0)}),
    ("xid79", {("gpu.xid", "fail", 1), ("gpu.xid", "warn", 0)}),
    ("xid79-lost", {("gpu.lost", "fail", None), ("gpu.xid", "warn", 0)}),
    ("ecc-dbe", {("gpu.ecc", "fail", 1)}),
    ("orphan-memory", {("gpu.orphan-memory", "warn", 1)}),
])
def test_scenario_verdicts(scenario, expected, tmp_path, monkeypatch):
    root, env = compose(tmp_path, "v2-healthy", scenario)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    holder = subprocess.Popen(["sleep", "30"], stdin=open(root / "dev" / "nvidia1", "rb"))
    try:
        doc = op.preflight(LocalTarget())
    finally:
        holder.kill()
        holder.wait()
    problems = {f for f in gpu_findings(doc) if f[1] != "ok"}
    assert problems == expected
    if scenario == "orphan-memory":
        [orphan] = [f for f in doc["findings"] if f["id"] == "gpu.orphan-memory"]
        assert orphan["evidence"]["holders"] == f"{holder.pid}(sleep)" and f"kill {holder.pid}" in orphan["fix"]
    if scenario == "xid79":
        [fatal] = [f for f in doc["findings"] if f["id"] == "gpu.xid" and f["severity"] == "fail"]
        assert "GPU 1 (00000000:3B:00.0)" in fatal["title"] and fatal["evidence"]["pci"] == "0000:3b:00"
    if scenario == "xid79-lost":
        [lost] = [f for f in doc["findings"] if f["id"] == "gpu.lost"]
        assert lost["evidence"]["pci"] == "0000:3b:00" and doc["ok"] is False
        assert [d["bus_id"] for d in doc["data"]["gpu"]["devices"]] == ["00000000:1B:00.0"]
        assert any("GPU is lost" in n for n in doc["data"]["gpu"]["notes"])


def test_a_hot_gpu_on_driver_580_is_judged_against_its_slowdown_point(tmp_path, monkeypatch):
    """Driver 580 prints temperatures as T.Limit offsets and no slowdown line; the probe read no
    slowdown point there and judged every GPU against the generic 83 C instead of its own."""
    _, env = compose(tmp_path, "v2-healthy", "tlimit")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    doc = op.preflight(LocalTarget())
    assert [d["slowdown_temp_c"] for d in doc["data"]["gpu"]["devices"]] == [87.0, 87.0]
    assert doc["data"]["gpu"]["cuda_max"] == "13.0"


def test_oom_kill_in_a_sibling_ssh_session_cgroup_is_named_though_ours_reads_zero(tmp_path, monkeypatch):
    _, env = compose(tmp_path, "v2-session-oom", "healthy")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    doc = op.preflight(LocalTarget())
    [oom] = [f for f in doc["findings"] if f["id"] == "mem.oom-kills"]
    assert oom["severity"] == "warn" and oom["evidence"]["cgroup_oom_kills"] == 0
    # Named: the victim, its pid, when (the log line's syslog stamp) and the cgroup the kernel printed.
    assert re.search(r"the kernel OOM-killed python \(pid 1234\) at \d{4}-03-04 06:12:09 UTC, "
                     r"cgroup /user\.slice/user-0\.slice/session-3\.scope", oom["title"]), oom["title"]
    assert oom["evidence"]["counters"].startswith("session 0 ")
    [victim] = doc["data"]["kernlog"]["oom_kills"]
    assert (victim["constraint"], victim["task_memcg"]) == ("CONSTRAINT_MEMCG", "/user.slice/user-0.slice/session-3.scope")
    assert victim["at"] is not None
