"""What kind of handling each gotcha citation is, and proof that every "checked" one can fail.

FAILS holds, for every finding the coverage table lists as a check, a fixture on which that check
says warn or fail: real check code on a fact document, a real tree on disk, the gang judge on node
facts, teardown-check on a real pull index. A new check without one fails
test_every_checked_finding_has_a_fixture_on_which_it_fails."""

import pytest

from gpuops import checks
from gpuops import coverage as C
from gpuops import refdocs
from tests.test_checks import disk, healthy

GIB = 2**30


def evaluate(change):
    f = healthy()
    change(f)
    return checks.evaluate(f)


def _set(path, value):
    def change(f):
        *parents, last = path
        node = f
        for key in parents:
            node = node[key]
        node[last] = value
    return lambda _: evaluate(change)


def _gpu1(**fields):
    return lambda _: evaluate(lambda f: f["gpu"]["devices"][1].update(fields))


def _lost_gpu(f):
    f["gpu"]["devices"] = f["gpu"]["devices"][:1]
    f["gpu"]["driver_gpus"] = [{"bus_id": "0000:1b:00.0", "minor": 0, "node": True},
                               {"bus_id": "0000:3b:00.0", "minor": 1, "node": True}]
    f["kernlog"]["xid"] = [{"code": 79, "pci": "0000:3b:00", "count": 1, "last_line": "GPU has fallen off the bus."}]


def _orphan_memory(f):
    f["gpu"]["devices"][1]["memory_used_mib"] = 30412.0


def _gang(**rdzv_or_facts):
    from tests.gang.test_gang_rules import judge, node_facts, nodes

    def run(_):
        return judge(nodes(node_facts(0, **rdzv_or_facts.get("head", {})),
                           node_facts(1, **rdzv_or_facts.get("worker", {}))))["findings"]
    return run


def _code(digest):
    return {"dir": "/w", "exists": True, "files": 1, "bytes": 1, "digest": digest, "entries": [["a.py", digest]],
            "truncated": False, "errors": 0}


def _tree(tmp_path, files, name="tree"):
    from gpuops.sync import rules, tree

    root = tmp_path / name
    root.mkdir()
    for rel, body in files.items():
        (root / rel).write_bytes(body)
    return tree.local(str(root), rules.request())


def _sync_budget(tmp_path):
    from gpuops.ops import sync as S

    scan = _tree(tmp_path, {"big.bin": b"x" * 4096})
    findings = []
    S.check_budget(scan.entries, {}, list(scan.entries), {"free_bytes": 10, "free_inodes": 10}, True, "box:/w",
                   S.Options(check_budget=False), findings)
    return findings


def _small_files(tmp_path):
    from gpuops.ops import sync as S
    from gpuops.sync import diskfit

    scan = _tree(tmp_path, {f"s{i}.txt": b"x" for i in range(diskfit.SMALL_FILES_MIN)})
    findings = []
    S.check_small_files(scan.entries, list(scan.entries), S.Options(), findings)
    return findings


def _mismatch(tmp_path):
    from gpuops.ops import sync as S
    from gpuops.sync import plan

    here = _tree(tmp_path, {"w.pt": b"new"}, "here").entries
    there = _tree(tmp_path, {"w.pt": b"old"}, "there").entries
    mism = plan.mismatches(here, there, ["w.pt"], "local", "remote")
    return [S.mismatch_finding(mism, "push", "gpuops push ...")]


def _crlf(tmp_path):
    from gpuops.ops import push, sync as S

    findings = []
    push._crlf(_tree(tmp_path, {"run.sh": b"#!/bin/sh\r\necho hi\r\n"}), S.Options(), findings)
    return findings


def _lost_on_stop(_):
    from gpuops import profiles
    from gpuops.ops import push

    findings = []
    push._profile(profiles.load("autodl"), "/root/autodl-tmp/runs", findings)
    push._profile(profiles.load("runpod"), "/root/runs", findings)
    return findings


def _unattributed(_):
    from gpuops.ops import reap

    return reap.findings_for({"holders": [], "actions": [], "nested_pid_namespace": True, "gpus": [
        {"index": 0, "memory_used_mib": 20000, "attributed_mib": 0, "holders": []}]})


def _drift(tmp_path):
    from gpuops.ops import sync as S
    from gpuops.ops.verify import verify
    from gpuops.remote.local import LocalTarget

    for side, body in (("here", b"v2"), ("there", b"v1")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "train.py").write_bytes(body)
    return verify(LocalTarget(), str(tmp_path / "here"), str(tmp_path / "there"), S.Options())["findings"]


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GPUOPS_PROFILES_DIR", str(tmp_path / "no-user-profiles"))


def _teardown_lost(_):
    from gpuops.ops.teardown import teardown_check

    return teardown_check("pod1", "runpod", ["/workspace/run"])["findings"]


def _teardown_unverified(tmp_path):
    from gpuops.ops.teardown import teardown_check
    from tests.test_teardown import record_pull

    local, _ = record_pull(tmp_path, "pod1", "/workspace/run", {"a.pt": b"1234"})
    (local / "a.pt").write_bytes(b"12")
    return teardown_check("pod1", "runpod", ["/workspace/run"])["findings"]


def _launch_gpus(asked, share=False, running=(), used=(1.0, 1.0)):
    """The box's check of `launch --gpus` (gpuops.onbox.gpu_pins) on two H100s and the jobs running."""
    from tests.test_gpu_pins import judged

    return lambda _: judged(asked, share, [("20261124-030000-aaaaaa", pins) for pins in running], used)[1]


def _telemetry(found_by):
    """A job's telemetry series judged the way diagnose and triage --job report it."""
    def make(_):
        from gpuops.jobs import runtelemetry
        from gpuops.onbox import telemetry

        rows = [dict(found_by, t=t, cores=8) for t in range(0, 70, 10)]
        return runtelemetry.findings({"rows": len(rows), "busy_wait": telemetry.busy_wait(rows),
                                      "throttled": telemetry.throttled(rows), "starved": telemetry.starved(rows)})
    return make


def _first_minutes(head):
    """The job's supervisor looking at a young run's log (gpuops.onbox.trackwatch)."""
    def look(_):
        from gpuops.onbox import trackwatch

        return trackwatch.wandb_findings(head, "", {})[0]
    return look


FAILS = {
    "disk.space": lambda _: evaluate(lambda f: f["disks"].append(disk("checkpoint_dir", "/data", 3, free_gib=5))),
    "disk.inodes": lambda _: evaluate(lambda f: f["disks"].append(disk("checkpoint_dir", "/data", 3, free_inodes=10))),
    "disk.not-local": lambda _: evaluate(lambda f: f["disks"].append(dict(disk("data_dir", "/mnt/data", 3),
                                                                        fstype="nfs4"))),
    "disk.shm": lambda _: evaluate(lambda f: f["disks"][2].update(total_bytes=64 * 2**20, free_bytes=64 * 2**20)),
    "mem.headroom": lambda _: evaluate(lambda f: f["cgroup"]["memory"].update(limit_bytes=16 * GIB,
                                                                               working_set_bytes=int(15.5 * GIB))),
    "mem.oom-kills": _set(("cgroup", "memory", "oom_kills"), 3),
    "gpu.orphan-memory": lambda _: evaluate(_orphan_memory),
    "gpu.ecc": _gpu1(ecc_dbe_volatile=1),
    "gpu.lost": lambda _: evaluate(_lost_gpu),
    "gpu.unreadable": _gpu1(name=None, bus_id=None, unavailable={"name": "Unknown Error"}),
    "gpu.xid": _set(("kernlog", "xid"), [{"code": 79, "pci": "0000:3b:00", "count": 1, "last_line": ""}]),
    "gpu.temperature": _gpu1(temp_c=83.0),
    "gpu.throttle": _gpu1(throttle_mask=0x8),
    "gpu.none": lambda _: evaluate(lambda f: f["gpu"].update(devices=[])),
    "cuda.arch": _gpu1(compute_cap="12.0"),
    "cuda.torch": _set(("torch", "cuda"), "12.8"),
    "cpu.threads": _set(("env", "OMP_NUM_THREADS"), "64"),
    "detach.missing": _set(("tools",), {}),
    "tracker.wandb": _set(("trackers",), {"wandb": {"installed": True, "mode": "offline", "key": None,
                                                    "host": "api.wandb.ai"}}),
    "tb.logdir": _set(("trackers",), {"tensorboard": {"pinned": None, "servers": [
        {"pid": 4100, "logdirs": [{"path": "/root/runs", "exists": True, "events": 0, "capped": False}]}]}}),
    "gang.driver-too-old": _gang(worker={"cuda": "12.8", "cuda_max": "12.2", "torch": "2.13.0+cu128"},
                                 head={"cuda": "12.8", "torch": "2.13.0+cu128", "cuda_max": "12.8"}),
    "gang.code-differs": _gang(head={"code": _code("a" * 64)}, worker={"code": _code("b" * 64)}),
    "gang.unreachable-rendezvous": _gang(worker={"connected": False, "answered": False, "local": None,
                                                 "error": "Connection refused"}),
    "gang.dataplane": _gang(worker={"plane": {"port": None, "error": "Cannot assign requested address"}}),
    "sync.budget": _sync_budget,
    "sync.small-files": _small_files,
    "sync.mismatch": _mismatch,
    "sync.crlf": _crlf,
    "sync.destination-lost-on-stop": _lost_on_stop,
    "reap.unattributed-memory": _unattributed,
    "verify.drift": _drift,
    "teardown.lost": _teardown_lost,
    "teardown.unverified": _teardown_unverified,
    "launch.gpu-pinned": _launch_gpus("1", running=["1"]),
    "launch.gpu-shared": _launch_gpus("1", share=True, running=["1"]),
    "launch.gpu-unpinned-job": _launch_gpus("1", running=[None]),
    "launch.gpu-memory": _launch_gpus("1", used=(1.0, 60000.0)),
    "tracker.wandb-run": _first_minutes("wandb: Tracking run with wandb version 0.21.1\n"),
}


def test_starvation_cites_u38_when_the_gpus_sit_idle_and_u24_when_they_only_wait():
    """Both ids the table lists under telemetry.starved come from the series that says so; the finding
    explains a run after the fact (only diagnose and triage print it), so it is no check."""
    def gotchas(util):
        found = _telemetry({"cpu": 790.0, "cpu_top": 99.0, "gpus": [{"i": 0, "util": util, "mem": 30000}]})(None)
        return [(f.id, f.severity, f.gotcha) for f in found]

    assert gotchas(0) == [("telemetry.starved", "warn", "U38")]
    assert gotchas(10) == [("telemetry.starved", "warn", "U24")]
    row = refdocs.table()
    assert "telemetry.starved" in row["U38"][C.EXPLAINED] and "telemetry.starved" in row["U24"][C.EXPLAINED]
    assert C.CHECKED not in row["U38"] and C.CHECKED not in row["U24"]


def test_what_only_explains_a_run_after_the_fact_is_counted_as_explained():
    """Issue 41: U21/U24/U38 were counted as checked from the run telemetry's findings, which only
    diagnose and triage print, and U12 from the verdict on a transfer whose retries ran out; AD7 is
    checked by tb.logdir (the logdir AutoDL's profile pins) and U6 prevented by the run policy."""
    row = refdocs.table()
    for gid in ("U21", "U24", "U38"):
        assert C.columns(row[gid]) == [C.EXPLAINED], gid
    assert C.columns(row["U12"]) == [C.PREVENTED, C.EXPLAINED] and "gpuops/ops/sync.py" in row["U12"][C.EXPLAINED]
    assert "tb.logdir" in row["AD7"][C.CHECKED]
    assert any(p.startswith("`launch`") for p in row["U6"][C.PREVENTED])
    # the kind follows the function that makes the finding, not its file: sync's budget stays a check
    assert "sync.budget" in row["U7"][C.CHECKED]
    assert C.kind_of("gpuops/ops/sync.py", "sync.x", "fail", "failure_finding") == C.EXPLAINED
    assert C.kind_of("gpuops/ops/sync.py", "sync.x", "fail", "check_budget") == C.CHECKED


def checked_findings():
    """Every finding id the coverage table lists under `checked`."""
    return {fid for row in refdocs.table().values() for fid in row.get(C.CHECKED, [])}


def test_every_checked_finding_has_a_fixture_on_which_it_fails():
    listed = checked_findings()
    assert listed == set(FAILS), {"checks without a failing fixture": sorted(listed - set(FAILS)),
                                  "fixtures for what is no longer a check": sorted(set(FAILS) - listed)}


def _said(findings):
    for f in findings:
        yield (f["id"], f["severity"]) if isinstance(f, dict) else (f.id, f.severity)


@pytest.mark.parametrize("finding", sorted(FAILS))
def test_the_check_fails_on_its_fixture(finding, tmp_path, state):
    severities = {sev for fid, sev in _said(FAILS[finding](tmp_path)) if fid == finding}
    assert severities & {"warn", "fail"}, f"{finding} said {sorted(severities) or 'nothing'} on its fixture"


def test_the_scan_reads_keywords_dicts_positions_fallbacks_and_kinds(tmp_path):
    pkg = tmp_path / "gpuops"
    (pkg / "checks").mkdir(parents=True)
    (pkg / "triage").mkdir()
    (pkg / "checks" / "disk.py").write_text(
        'Finding("disk.inodes", "fail", "t", gotcha="U7")\n'
        'Finding(id="gpu.xid", severity=sev, title="t", gotcha="U22, U3")\n'
        'Finding("boot.recent", "info", "t", {}, None, "U3")\n'
        'Finding(fid, "warn", "t", gotcha=variable)\n'
        'Finding("teardown.lost", "fail", "t", gotcha=profile.loss or "U20")\n'
        'Finding("teardown.clock", "warn", "t", gotcha=c.gotcha or None)\n'
        'from gpuops import xid as X\n'
        'Finding("gpu.lost", "fail", "t", gotcha=X.GOTCHA)\n'
        'Finding("gpu.idle", "warn", "t", gotcha="U38" if idle else X.GOTCHA)\n')
    (pkg / "triage" / "classes.py").write_text('x = {"id": "oom-gpu", "gotcha": "U10"}\n')
    cites = {(c.finding, c.gotcha, c.kind) for c in C.citations(pkg)}
    assert cites == {("disk.inodes", "U7", C.CHECKED), ("gpu.xid", "U22", C.CHECKED), ("gpu.xid", "U3", C.CHECKED),
                     ("boot.recent", "U3", C.EXPLAINED), ("teardown.lost", "U20", C.CHECKED),
                     ("gpu.lost", "U22", C.CHECKED), ("oom-gpu", "U10", C.EXPLAINED), ("gpu.idle", "U38", C.CHECKED),
                     ("gpu.idle", "U22", C.CHECKED)}
    kinds = C.finding_kinds(pkg)
    assert kinds["teardown.clock"] == {C.DOCUMENTED} and kinds["disk.inodes"] == {C.CHECKED}


def test_a_cited_by_entry_that_no_code_makes_is_refused():
    from gpuops.gotcha import index

    entries = {"RP3": index()["RP3"]}
    with pytest.raises(ValueError, match="RP3: cited_by names 'teardown.lost'"):
        C.by_gotcha(entries, [], kinds={})


def test_teardown_reminders_are_said_whatever_the_pull_records_hold(tmp_path, state):
    """Why REMINDERS are documentation: the same words with nothing pulled and with a verified pull."""
    from gpuops.ops.teardown import teardown_check
    from tests.test_teardown import record_pull

    def reminders():
        doc = teardown_check("pod1", "runpod", ["/workspace/run"])
        return [(f["id"], f["title"]) for f in doc["findings"] if f["id"] in C.REMINDERS]

    before = reminders()
    record_pull(tmp_path, "pod1", "/workspace/run", {"a.pt": b"1234"})
    assert before and reminders() == before
