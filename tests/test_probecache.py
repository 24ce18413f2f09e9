"""Torch's facts kept between preflights (gpuops.probecache, gpuops.onbox.host.torchinfo): a box whose
torch has not changed is not made to import it again, and one whose torch changed is.

The box is a real sshd box whose python3 finds a stand-in torch first (tests/fixtures/faketorch,
on PYTHONPATH through SetEnv) that counts its imports."""

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from gpuops import probecache
from gpuops.ops import preflight as op
from gpuops.remote.targets import target_for
from tests.fixtures.fakegpu.boxes import compose

FAKETORCH = Path(__file__).resolve().parent / "fixtures" / "faketorch"


@pytest.fixture(scope="module")
def torch_box(rig, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torchbox")
    shutil.copytree(FAKETORCH, tmp / "faketorch")
    _, env = compose(tmp, "v2-healthy", "healthy")
    env.update(PYTHONPATH=str(tmp / "faketorch"), FAKETORCH_IMPORTS=str(tmp / "imports"))
    box = rig.box("torch-kept", env=env)
    return box, tmp


def _imports(tmp):
    path = tmp / "imports"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_second_preflight_does_not_import_an_unchanged_torch_and_a_reinstall_is_imported(
        torch_box, tmp_path, monkeypatch):
    """Every preflight of a box with torch paid its import (1-3 s) for facts that change only when
    torch is reinstalled."""
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path / "state"))
    box, tmp = torch_box
    before = _imports(tmp)
    first = op.preflight(target_for(box.spec))["data"]["torch"]
    assert first["version"] == "2.5.1+cu124" and first["cuda"] == "12.4"
    assert first["arch_list"] == ["sm_80", "sm_86", "sm_90"] and first["key"]
    assert _imports(tmp) == before + 1
    kept = tmp_path / "state" / "torch-facts.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600

    second = op.preflight(target_for(box.spec))
    assert _imports(tmp) == before + 1  # not imported again
    torch = second["data"]["torch"]
    assert torch["known"] is True and torch["key"] == first["key"]
    assert {k: torch[k] for k in ("version", "cuda", "arch_list")} == {k: first[k] for k in ("version", "cuda",
                                                                                           "arch_list")}
    assert not any(f["id"].startswith("cuda.") and "error" in f["title"].lower() for f in second["findings"])

    version = tmp / "faketorch" / "torch" / "version.py"
    version.write_text(version.read_text().replace("2.5.1+cu124", "2.6.0+cu126").replace("'12.4'", "'12.6'"))
    third = op.preflight(target_for(box.spec))["data"]["torch"]
    assert _imports(tmp) == before + 2  # a reinstall rewrites version.py: asked again
    assert third["version"] == "2.6.0+cu126" and third["key"] != first["key"] and not third.get("known")


def test_a_workstation_without_the_kept_facts_is_not_given_an_empty_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path))
    said = probecache.merged("box", {"installed": True, "key": "k", "known": True}, None)
    assert said["installed"] is True and "run preflight again" in said["error"]
    said = probecache.merged("box", {"installed": True, "key": "k", "known": True},
                             {"key": "other", "facts": {"version": "1"}})
    assert "error" in said


def test_an_unreadable_or_foreign_cache_file_is_as_good_as_none(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_STATE_DIR", str(tmp_path))
    for text in ("{not json", json.dumps([1, 2]), json.dumps({"box": {"key": 3, "facts": {}}}),
                 json.dumps({"box": "x"})):
        (tmp_path / "torch-facts.json").write_text(text)
        assert probecache.known("box") is None, text
    fresh = {"installed": True, "key": "k1", "version": "2.5.1", "cuda": "12.4", "arch_list": ["sm_90"]}
    assert probecache.merged("box", fresh, None) == fresh
    assert probecache.known("box")["facts"] == {"version": "2.5.1", "cuda": "12.4", "arch_list": ["sm_90"]}
    assert probecache.merged("box", {"installed": True, "error": "import torch: timed out"}, None)["error"]
    assert probecache.known("box")["key"] == "k1"  # a failed import is not kept over a good answer
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]
