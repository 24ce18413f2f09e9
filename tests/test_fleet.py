"""`gpuops fleet` against real sshd boxes: each box its own fixture root, fake GPU scenario and job
records; one box is down. Only GPU hardware and kernel state are fake; the job that runs is a real
process, judged by its pid, start time and the box's boot_id as every job is."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from gpuops import onbox
from gpuops.fleetfile import Box
from gpuops.onbox.facts import fleet_facts
from gpuops.onbox.host import procs
from gpuops.ops import fleet as op
from gpuops.render import fleet as render
from tests.fixtures.fakegpu.boxes import SYSTEM_PATH, compose

HOUR = 3600.0
FIXTURE_UPTIME_S = 86400.52  # tests/fixtures/sysroots/v2-healthy/proc/uptime


def _record(jobs, job_id, meta, exit_doc=None):
    d = jobs / job_id
    d.mkdir(parents=True)
    (d / "cmd").write_text("python train.py\n")
    (d / "meta.json").write_text(json.dumps({"job_id": job_id, "name": "train", **meta}))
    (d / "log").write_text("step 1\n")
    if exit_doc is not None:
        (d / "exit.json").write_text(json.dumps(exit_doc))


def _start_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[19])


@pytest.fixture(scope="module")
def fleet(rig, tmp_path_factory):
    """Five boxes: idle after a job (priced), busy GPU, running job, no GPU (priced), and one down."""
    base = tmp_path_factory.mktemp("fleet")
    sleeper = subprocess.Popen(["sleep", "600"])
    boxes, now = {}, time.time()

    def box(name, scenario, jobs_setup=None):
        root, env = compose(base, "v2-healthy", scenario, name=name)
        jobs = base / f"{name}-jobs"
        jobs.mkdir()
        boot_id = (root / "proc/sys/kernel/random/boot_id").read_text().strip()
        if jobs_setup:
            jobs_setup(jobs, boot_id)
        boxes[name] = rig.box(name, env={**env, "GPUOPS_JOBS_DIR": str(jobs)})

    def ended_two_hours_ago(jobs, boot_id):
        _record(jobs, "20261124-010000-aaaaaa", {"pid": 999999, "start_ticks": 1, "boot_id": boot_id,
                                                 "launched_at": now - 5 * HOUR},
                {"exit_code": 0, "signal": None, "ended_at": now - 5 * HOUR + 60})
        _record(jobs, "20261124-020000-bbbbbb", {"pid": 999998, "start_ticks": 1, "boot_id": boot_id,
                                                 "launched_at": now - 3 * HOUR},
                {"exit_code": 1, "signal": None, "ended_at": now - 2 * HOUR})

    def running(jobs, boot_id):
        _record(jobs, "20261124-030000-cccccc", {"pid": sleeper.pid, "start_ticks": _start_ticks(sleeper.pid),
                                                 "boot_id": boot_id, "launched_at": now - 60})

    box("fl-idle", "healthy", ended_two_hours_ago)
    box("fl-gpubusy", "orphan-memory")
    box("fl-jobbusy", "healthy", running)
    box("fl-nogpu", None)
    rig.alias("fl-down")
    config = base / "config"
    (config / "gpuops").mkdir(parents=True)
    (config / "gpuops/fleet.toml").write_text(
        '[[host]]\nalias = "fl-idle"\nusd_per_hour = 3.0\nlabels = { gpu = "h100" }\n\n'
        '[[host]]\nalias = "fl-gpubusy"\nusd_per_hour = 3.0\n\n'
        '[[host]]\nalias = "fl-jobbusy"\n\n'
        '[[host]]\nalias = "fl-nogpu"\nprofile = "generic-ssh"\nusd_per_hour = 0.5\n\n'
        '[[host]]\nalias = "fl-down"\nusd_per_hour = 9.0\n\n'
        '[fleet.up]\nhosts = ["fl-idle", "fl-nogpu"]\n')
    yield {"boxes": boxes, "config": config, "now": now}
    sleeper.kill()
    sleeper.wait()


def _run(cli, rig, fleet, *args, columns=None):
    env = {**rig.env(), "XDG_CONFIG_HOME": str(fleet["config"])}
    if columns:
        env["COLUMNS"] = str(columns)
    return cli("fleet", "--window", "0.5", *args, env=env)


def _rows(r):
    return {row["host"]: row for row in json.loads(r.stdout)["data"]["hosts"]}


def test_the_whole_fleet_in_one_report_with_the_down_box_as_a_row(cli, rig, fleet):
    before = {n: b.exec_requests() for n, b in fleet["boxes"].items()}
    r = _run(cli, rig, fleet, "--json")
    assert r.returncode == 3, r.stderr  # a box not answering is the shared table's 3, not a crash
    doc = json.loads(r.stdout)
    rows = _rows(r)
    assert list(rows) == ["fl-idle", "fl-gpubusy", "fl-jobbusy", "fl-nogpu", "fl-down"]
    assert rows["fl-down"]["ok"] is False and rows["fl-down"]["error"]["kind"] == "unreachable"
    assert all(rows[n]["ok"] for n in fleet["boxes"])
    # one exec channel per box, whatever the window
    assert {n: b.exec_requests() - before[n] for n, b in fleet["boxes"].items()} == dict.fromkeys(fleet["boxes"], 1)
    assert doc["data"]["totals"]["answered"] == 4 and doc["data"]["totals"]["idle"] == 2
    assert "1 not answering (fl-down)" in doc["summary"]


def test_idle_since_the_last_jobs_end_costs_its_hours_times_the_price(cli, rig, fleet):
    row = _rows(_run(cli, rig, fleet, "--json"))["fl-idle"]
    assert row["gpus"] == [{"model": "NVIDIA H100 80GB HBM3", "count": 2}]
    assert row["vram_total_mib"] == 2 * 81559 and row["vram_used_mib"] == 2
    assert row["util_peak_pct"] == 0 and row["util_samples"] >= 2
    assert row["jobs_running"] == 0 and row["last_job"] == "20261124-020000-bbbbbb"
    idle = row["idle"]
    assert idle["state"] == "idle"
    assert idle["since"] == pytest.approx(fleet["now"] - 2 * HOUR, abs=1e-3)
    assert idle["idle_s"] == pytest.approx(2 * HOUR, abs=120)
    assert idle["idle_usd"] == pytest.approx(6.0, abs=0.11)  # 2 h x $3.00, give or take the test's own minutes


def test_a_busy_gpu_and_a_running_job_each_make_a_box_busy(cli, rig, fleet):
    rows = _rows(_run(cli, rig, fleet, "--json"))
    gpu, job = rows["fl-gpubusy"], rows["fl-jobbusy"]
    assert gpu["idle"]["state"] == "busy" and gpu["idle"]["why"] == "GPU 0 at 97%"
    assert gpu["vram_used_mib"] == 20480 + 30412 and gpu["idle"]["idle_usd"] is None
    assert job["idle"]["state"] == "busy" and job["jobs_running"] == 1
    assert job["running_jobs"] == ["20261124-030000-cccccc"]


def test_a_box_without_gpus_is_idle_since_boot(cli, rig, fleet):
    row = _rows(_run(cli, rig, fleet, "--json"))["fl-nogpu"]
    assert row["gpu_present"] is False and row["gpu_count"] == 0 and row["gpus"] == []
    assert row["uptime_s"] == FIXTURE_UPTIME_S
    assert row["idle"]["state"] == "idle" and row["idle"]["why"].startswith("since boot")
    assert row["idle"]["idle_s"] == pytest.approx(FIXTURE_UPTIME_S, abs=1)
    assert row["idle"]["idle_usd"] == pytest.approx(12.0, abs=0.01)  # 24 h x $0.50
    assert row["disk"]["role"] == "data_dir" and row["disk"]["free_inodes"] > 0


def test_a_named_fleet_and_the_table_people_see(cli, rig, fleet):
    r = _run(cli, rig, fleet, "--fleet", "up")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    idle_line = next(line for line in lines if "fl-idle" in line)
    assert "2x H100 80GB HBM3" in idle_line and "$6.0" in idle_line and "2h 0" in idle_line
    nogpu_line = next(line for line in lines if "fl-nogpu" in line)
    assert "none" in nogpu_line and "$12.00" in nogpu_line
    assert "fl-gpubusy" not in r.stdout
    assert lines[-1].startswith("2 boxes: 0 busy, 2 idle ($18.")


def test_a_narrow_terminal_drops_whole_columns_instead_of_squeezing_every_one(cli, rig, fleet):
    """At 100 columns all eleven columns were cut to '…' (`no… │ … │`): nothing readable was left."""
    r = _run(cli, rig, fleet, "--fleet", "up", columns=80)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    header = lines[0].split()
    assert header[:2] == ["HOST", "GPUS"] and "IDLE" in header and "UPTIME" not in header
    idle_line = next(line for line in lines if line.startswith("fl-idle"))
    assert "2x H100 80GB HBM3" in idle_line and "$6.0" in idle_line  # whole, not cut


def test_host_words_take_the_fleet_files_price_and_a_bare_host_has_none(cli, rig, fleet):
    r = _run(cli, rig, fleet, "--host", f"fl-idle,{fleet['boxes']['fl-nogpu'].direct_spec}",
             "--identity", str(rig.client_key), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(_rows(r).values())
    assert rows[0]["usd_per_hour"] == 3.0 and rows[0]["idle"]["idle_usd"] == pytest.approx(6.0, abs=0.11)
    assert rows[1]["usd_per_hour"] is None and rows[1]["idle"]["idle_usd"] is None
    assert rows[1]["disk"]["role"] == "home"  # no profile: the box's home is measured


def test_a_box_answering_what_gpuops_did_not_write_is_its_own_row(cli, rig, fleet, tmp_path):
    liar = Path(__file__).resolve().parent / "fixtures" / "liar"
    rig.box("fl-liar", env={"HOME": str(tmp_path), "GPUOPS_LIE": "shape", "PATH": f"{liar}:{SYSTEM_PATH}"})
    r = _run(cli, rig, fleet, "--host", "fl-liar,fl-idle", "--json")
    assert r.returncode == 3, r.stdout + r.stderr
    rows = _rows(r)
    assert rows["fl-liar"]["error"]["kind"] == "bad-answer"
    assert "fleet answer is not gpuops's: 'hostname' is missing" in rows["fl-liar"]["error"]["message"]
    assert rows["fl-idle"]["ok"] and rows["fl-idle"]["idle"]["state"] == "idle"


@pytest.mark.parametrize("body,line,words", [
    ('[[host]]\nalias = "a"\nusd_per_hour = -1.5\n', 3, "must be at least 0"),
    ('[[host]]\nalias = "a"\nusd_per_hour = "cheap"\n', 3, "expected a number"),
    ('[[host]]\nalias = "a"\nusd_per_hour = 2500.0\n', 3, "a typo?"),
    ('[[host]]\nalias = "a"\n\n[[host]]\nalias = "b"\nprofile = "nosuch"\n', 6, "unknown profile 'nosuch'"),
    ('[[host]]\nalias = "a"\n\n[[host]]\nalias = "a"\n', 5, "alias 'a' is already the [[host]] on line 1"),
    ('[[host]]\nalias = "a"\n\n[fleet.x]\nhosts = ["a", "b"]\n', 5, "'b' is not the alias of any [[host]]"),
    ('[[host]]\nalias = "a b"\n', 2, "one host word"),
])
def test_a_bad_fleet_file_is_exit_2_with_its_file_and_line(cli, tmp_path, body, line, words):
    (tmp_path / "gpuops").mkdir()
    path = tmp_path / "gpuops/fleet.toml"
    path.write_text(body)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    r = cli("fleet", "--json", env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["error"]["kind"] == "usage"
    assert doc["error"]["message"].startswith(f"{path}:{line}: ") and words in doc["error"]["message"]
    r = cli("fleet", env=env)
    assert r.returncode == 2 and r.stderr.startswith(f"gpuops: {path}:{line}: ")


def test_usage_mistakes(cli, tmp_path):
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    r = cli("fleet", env=env)
    assert r.returncode == 2 and "no hosts: give --host" in r.stderr
    r = cli("fleet", "--fleet", "train", env=env)
    assert r.returncode == 4 and "no fleet 'train'" in r.stderr
    r = cli("fleet", "--host", "a", "--fleet", "b", env=env)
    assert r.returncode == 2 and "not both" in r.stderr
    r = cli("fleet", "--host", "a", "--window", "600", env=env)
    assert r.returncode == 2 and "--window takes a duration (90, 15s, 10m, 1h30m) from 0s to 1m" in r.stderr
    r = cli("fleet", "--host", "a", "--watch", "--json", env=env)
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["message"].startswith("--watch redraws a table")


def test_a_box_with_nvidia_smi_missing_from_path_is_gpu_less_not_unknown(tmp_path):
    # The entry run here the way the box runs it (fixture root, PATH without the fake tool).
    root, _ = compose(tmp_path, "v2-healthy", None, name="bare")
    env = {"GPUOPS_ROOT": str(root), "PATH": SYSTEM_PATH, "GPUOPS_JOBS_DIR": str(tmp_path / "none"),
           "HOME": str(tmp_path)}
    out = subprocess.run(["python3", "-", "--window", "0"], input=onbox.script("fleet_facts"), capture_output=True,
                         env=env, timeout=60)
    doc = json.loads(out.stdout)
    assert doc["gpu"] == {"present": False, "source": None, "error": None, "samples": 0, "devices": []}
    assert doc["jobs"]["running_count"] == 0 and doc["jobs"]["last_end"] is None
    assert doc["disk"]["role"] == "home" and doc["disk"]["path"] == str(tmp_path)


UUID1 = "GPU-0a1b2c3d-0000-4000-8000-000000000001"


def test_a_job_pinned_by_uuid_is_read_as_its_gpus_index(tmp_path, monkeypatch):
    """A job launched with --gpus GPU-<uuid of GPU 1> left GPU 1 looking free to `launch --fleet`,
    which knows GPUs by index: the box writes the pin as the index of the GPU the UUID names."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        _record(tmp_path, "20261101-000000-000001", {"pid": sleeper.pid, "start_ticks": _start_ticks(sleeper.pid),
                                                     "boot_id": procs.boot_id(), "gpus": UUID1})
        monkeypatch.setenv("GPUOPS_JOBS_DIR", str(tmp_path))
        devices = [{"index": i, "uuid": f"GPU-0a1b2c3d-0000-4000-8000-00000000000{i}"} for i in range(2)]
        assert fleet_facts.jobs(devices)["running_gpus"] == ["1"]
        assert fleet_facts.jobs()["running_gpus"] == [UUID1]  # no GPU list to read it by
    finally:
        sleeper.kill()
        sleeper.wait()


def test_an_old_running_job_counts_however_many_ended_after_it(tmp_path, monkeypatch):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        now = time.time()
        _record(tmp_path, "20261101-000000-000001", {"pid": sleeper.pid, "start_ticks": _start_ticks(sleeper.pid),
                                                     "boot_id": procs.boot_id(), "launched_at": now - 20 * 86400})
        for i in range(3):
            _record(tmp_path, f"20261120-00000{i}-00000{i}", {"pid": 999990 + i, "boot_id": procs.boot_id()},
                    {"exit_code": 0, "ended_at": now - 3600 + i})
        monkeypatch.setenv("GPUOPS_JOBS_DIR", str(tmp_path))
        monkeypatch.setattr(fleet_facts, "MAX_ENDS_READ", 2)
        doc = fleet_facts.jobs()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert doc["running"] == ["20261101-000000-000001"] and doc["total"] == 4
    assert doc["ends_read"] == 2 and doc["last_end"] == pytest.approx(now - 3600 + 2)


def test_a_fleet_file_of_its_own(cli, rig, fleet, tmp_path):
    path = tmp_path / "cpu.toml"
    path.write_text('[[host]]\nalias = "fl-nogpu"\nusd_per_hour = 1.0\n')
    r = _run(cli, rig, fleet, "--fleet", str(path), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _rows(r)["fl-nogpu"]["idle"]["idle_usd"] == pytest.approx(24.0, abs=0.01)


def test_a_gpu_whose_utilisation_cannot_be_read_leaves_the_box_unknown(tmp_path):
    root, env = compose(tmp_path, "v2-healthy", "xid79")
    env.update(GPUOPS_JOBS_DIR=str(tmp_path / "none"), HOME=str(tmp_path))
    out = subprocess.run(["python3", "-", "--window", "0.2", "--interval", "0.1"], input=onbox.script("fleet_facts"),
                         capture_output=True, env=env, timeout=60)
    doc = op.checked(json.loads(out.stdout), "xid-box")
    assert [d["util_peak_pct"] for d in doc["gpu"]["devices"]] == [0.0, None]
    row = op.row(Box(alias="xid-box", usd_per_hour=2.0), doc)
    assert row["idle"]["state"] == "unknown" and row["idle"]["idle_usd"] is None


@pytest.mark.anyio
async def test_the_fleet_is_a_read_only_mcp_tool(rig, fleet, monkeypatch):
    pytest.importorskip("mcp", reason="the MCP SDK is the optional extra gpuops[mcp]")
    from mcp import Client

    from gpuops.mcp import server

    monkeypatch.setenv("XDG_CONFIG_HOME", str(fleet["config"]))
    monkeypatch.setenv("GPUOPS_MODE", "readonly")
    async with Client(server.build(toolsets="all"), raise_exceptions=True) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["fleet_status"].annotations.read_only_hint is True
        result = await client.call_tool("fleet_status", {"fleet": "up", "window_s": 0.5})
        both = await client.call_tool("fleet_status", {"fleet": "up", "hosts": ["fl-idle"]})
    doc = result.structured_content
    assert result.is_error is False and doc["command"] == "fleet" and doc["ok"] is True
    assert [r["host"] for r in doc["data"]["hosts"]] == ["fl-idle", "fl-nogpu"]
    assert doc["data"]["totals"]["idle"] == 2
    assert both.is_error and json.loads(both.content[0].text)["error"]["kind"] == "usage"


def test_at_140_columns_no_column_is_cut(cli, rig, fleet):
    """`fleet` cut its IDLE SINCE column (`2h 00m (11-27 05:58 …`) even 140 wide."""
    r = _run(cli, rig, fleet, columns=140)
    lines = r.stdout.splitlines()
    assert lines[0].split("  ")[0] == "HOST" and all(h in lines[0] for h in render.COLUMNS), lines[0]
    assert "…" not in r.stdout and all(len(line) <= 140 for line in lines), r.stdout


def _terminal(rig, fleet, *args, **kw):
    from tests import terminal

    env = {**rig.env(), "XDG_CONFIG_HOME": str(fleet["config"])}
    return terminal.run("fleet", "--window", "1", *args, cols=140, rows=40, env=env, **kw)


def test_the_first_paint_is_a_spinner_saying_what_is_asked(rig, fleet):
    """`fleet` was a blank terminal for ~2.3 s: nothing said it was sampling."""
    code, raw = _terminal(rig, fleet, "--fleet", "up")
    assert code == 0, raw
    assert "asking 2 boxes, sampling GPU use for 1 s" in raw
    assert raw.index("asking 2 boxes") < raw.index("HOST"), "the spinner comes before the table"


def test_watch_paints_at_once_then_a_row_per_gpu_with_bars_and_processes(rig, fleet):
    """`fleet --watch` was blank for ~2.3 s and had no per-GPU rows (nvitop and gpustat show each
    GPU with a bar and its processes)."""
    code, raw = _terminal(rig, fleet, "--host", "fl-gpubusy,fl-idle", "--watch",
                          interrupt_after=lambda out: b"Ctrl-C ends" in out)
    assert code == 0, raw
    assert raw.index("asking 2 boxes") < raw.index("HOST")
    assert raw.rfind("\x1b[?25h") > raw.rfind("\x1b[?25l"), "the cursor is shown again after Ctrl-C"
    from tests import terminal

    lines = terminal.frames(raw)
    busy = [line.split() for line in lines if line.startswith("fl-gpubusy  0  ")]
    assert busy and busy[-1][2:] == ["█████████▌", "97%", "██▌░░░░░░░", "20.0/79.6", "GiB", "python3/4321", "(20.0",
                                     "GiB)"], busy
    assert any(line.split()[:3] == ["fl-idle", "0", "░░░░░░░░░░"] for line in lines), lines
    assert lines[-1].startswith("2 boxes: 1 busy, 1 idle"), lines[-3:]
