"""teardown-check: what the platform's verb deletes, and whether kept paths are pulled and verified.

Pulls are recorded through the real pull index with a real manifest over real local files, in
the format the sync verb writes (gpuops.pullindex).
"""

import hashlib
import json
import os
from pathlib import Path

import pytest

from gpuops import pullindex


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GPUOPS_PROFILES_DIR", str(tmp_path / "no-user-profiles"))
    return tmp_path


def record_pull(tmp_path, host, remote, files):
    """Write `files` (relative path -> bytes) locally, a manifest beside them, and index the pull."""
    local = tmp_path / "pulled" / remote.strip("/").replace("/", "_")
    entries = []
    for rel, content in files.items():
        path = local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        entries.append({"path": rel, "size": len(content), "sha256": hashlib.sha256(content).hexdigest()})
    manifest = Path(pullindex.manifest_for(str(local)))
    doc = {"schema": 1, "host": host, "remote": remote, "local": str(local), "verified_at": "2026-11-22T10:00:00Z",
           "files": entries}
    manifest.write_text(json.dumps(doc))
    pullindex.record({"host": host, "remote": remote, "local": str(local), "manifest": str(manifest),
                      "files": len(entries), "bytes": sum(e["size"] for e in entries),
                      "verified_at": doc["verified_at"]})
    return local, manifest


def run(cli, *args):
    r = cli("teardown-check", *args, "--json", env=os.environ.copy())
    return r.returncode, json.loads(r.stdout) if r.stdout else None, r.stderr


def statuses(doc):
    return {k["path"]: k["status"] for k in doc["data"]["keeps"]}


def test_verified_pull_makes_a_doomed_path_safe(state, cli_inproc):
    record_pull(state, "pod1", "/workspace/run1", {"best.pt": b"w" * 300, "logs/train.log": b"step 1\n"})
    code, doc, _ = run(cli_inproc, "--host", "pod1", "--profile", "runpod", "--keep", "/workspace/run1")
    assert code == 0 and doc["ok"]
    assert statuses(doc) == {"/workspace/run1": "pulled"}
    assert doc["data"]["keeps"][0]["pull"]["files"] == 2 and doc["data"]["keeps"][0]["pull"]["bytes"] == 307
    assert [d["tier"] for d in doc["data"]["deletes"]] == ["container disk", "volume disk"]


def test_unpulled_path_on_a_deleted_tier_would_be_lost(state, cli_inproc):
    code, doc, _ = run(cli_inproc, "--host", "pod1", "--profile", "runpod", "--keep", "/workspace/run2",
                       "--keep", "/runpod-volume/data")
    assert code == 1 and not doc["ok"]
    assert statuses(doc) == {"/workspace/run2": "lost", "/runpod-volume/data": "survives"}
    lost = next(f for f in doc["findings"] if f["id"] == "teardown.lost")
    assert lost["severity"] == "fail" and lost["gotcha"] == "RP3" and "gpuops pull" in lost["fix"]
    # where to pull to is the caller's choice: advice, never a step with a placeholder in it
    assert doc["next"] == [] and "/workspace/run2" in doc["advice"][0] and "LOCAL_DIR" not in json.dumps(doc["advice"])


def test_a_pull_whose_local_files_changed_no_longer_counts(state, cli_inproc):
    local, _ = record_pull(state, "pod1", "/workspace/run3", {"a.pt": b"1234", "b.pt": b"5678"})
    (local / "b.pt").write_bytes(b"56")
    code, doc, _ = run(cli_inproc, "--host", "pod1", "--profile", "runpod", "--keep", "/workspace/run3")
    assert code == 1 and statuses(doc) == {"/workspace/run3": "unverified"}
    bad = next(f for f in doc["findings"] if f["id"] == "teardown.unverified")
    assert "b.pt (size changed)" in bad["evidence"]["problem"] and bad["gotcha"] == "U33"
    (local / "b.pt").unlink()
    assert "b.pt (missing)" in next(
        f for f in run(cli_inproc, "--host", "pod1", "--profile", "runpod", "--keep", "/workspace/run3")[1]["findings"]
        if f["id"] == "teardown.unverified")["evidence"]["problem"]


def test_a_pull_whose_manifest_is_gone_no_longer_counts(state, cli_inproc):
    _, manifest = record_pull(state, "pod1", "/workspace/run4", {"a.pt": b"x"})
    manifest.unlink()
    code, doc, _ = run(cli_inproc, "--host", "pod1", "--profile", "runpod", "--keep", "/workspace/run4")
    assert code == 1 and statuses(doc) == {"/workspace/run4": "unverified"}


def test_kept_subpath_is_checked_against_its_own_files_only(state, cli_inproc):
    local, _ = record_pull(state, "pod1", "/workspace/proj", {"ckpt/best.pt": b"b" * 10, "cache/blob": b"c" * 5})
    (local / "cache" / "blob").unlink()
    code, doc, _ = run(cli_inproc, "--host", "pod1", "--profile", "runpod", "--keep", "/workspace/proj/ckpt")
    assert code == 0 and doc["data"]["keeps"][0]["pull"]["files"] == 1
    code, doc, _ = run(cli_inproc, "--host", "pod1", "--profile", "runpod", "--keep", "/workspace/proj/other")
    assert code == 1 and "lists no files under" in doc["data"]["keeps"][0]["pull_problems"][0]


def test_pulls_of_another_host_do_not_count(state, cli_inproc):
    record_pull(state, "pod1", "/workspace/run5", {"a.pt": b"x"})
    code, doc, _ = run(cli_inproc, "--host", "pod2", "--profile", "runpod", "--keep", "/workspace/run5")
    assert code == 1 and statuses(doc) == {"/workspace/run5": "lost"}


def test_autodl_power_off_keeps_disks_but_warns_about_the_release_clock(state, cli_inproc):
    code, doc, _ = run(cli_inproc, "--host", "adl", "--profile", "autodl", "--keep", "/root/autodl-tmp/ckpt")
    assert code == 0 and statuses(doc) == {"/root/autodl-tmp/ckpt": "survives"}
    clock = next(f for f in doc["findings"] if f["id"] == "teardown.clock")
    assert clock["severity"] == "warn" and clock["gotcha"] == "AD-DANGER"
    assert doc["data"]["deletes"] == []
    code, doc, _ = run(cli_inproc, "--host", "adl", "--profile", "autodl", "--verb", "destroy",
                       "--keep", "/root/autodl-tmp/ckpt", "--keep", "/root/autodl-fs/best.pt")
    assert code == 1
    assert statuses(doc) == {"/root/autodl-tmp/ckpt": "lost", "/root/autodl-fs/best.pt": "survives"}


def test_home_relative_keep_expands_with_the_profile_home(state, cli_inproc):
    code, doc, _ = run(cli_inproc, "--host", "l1", "--profile", "lambda", "--keep", "ckpt")
    assert code == 1 and statuses(doc) == {"/home/ubuntu/ckpt": "lost"}


def test_usage_errors(state, cli_inproc):
    assert run(cli_inproc, "--host", "a", "--keep", "/x")[0] == 2
    assert run(cli_inproc, "--host", "a,b", "--profile", "runpod")[0] == 2
    assert run(cli_inproc, "--host", "a", "--profile", "runpod", "--verb", "nuke")[0] == 2
    assert run(cli_inproc, "--host", "a", "--profile", "generic-ssh", "--keep", "relative/path")[0] == 2
    assert run(cli_inproc, "--host", "a", "--profile", "no-such")[0] == 4


def test_human_output_names_the_verb_and_the_loss(state, cli_inproc):
    r = cli_inproc("teardown-check", "--host", "v1", "--profile", "vastai", "--keep", "/workspace/out", env=os.environ.copy())
    assert r.returncode == 1
    assert "would be lost" in r.stdout and "destroy instance" in r.stdout and "gpuops pull --host v1" in r.stdout
