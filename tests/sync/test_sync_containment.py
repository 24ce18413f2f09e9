"""Nothing the box says makes a sync write where it should not: pull never writes outside --dst,
whatever the box's manifest names and whatever symlinks --dst holds; push never writes through a
symlink below its --dst; a name that is not UTF-8 survives both ways. Real sshd, real SFTP."""

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuops import contained, pullindex
from gpuops.errors import BadAnswer
from gpuops.remote.targets import target_for
from gpuops.sync import plan
from gpuops.sync.sftp import SftpEngine
from tests.rig.rewriter import rewriting_box
from tests.sync.conftest import run_cli, snapshot


@pytest.fixture(scope="module")
def escaping_box(rig, box_cache, tmp_path_factory):
    """A box whose manifest answers carry one more entry: '../escape.txt'."""
    return rewriting_box(rig, "rewrite-escape", "entry:../escape.txt", tmp_path_factory.mktemp("rewrite-home"),
                         box_cache)


def test_a_manifest_entry_with_dotdot_is_refused_before_anything_is_written(escaping_box, sync_env, tmp_path):
    """A box answering the manifest with '../escape.txt' (no rsync: SFTP) got that file written
    beside --dst, and the pull said "verified", exit 0."""
    remote = tmp_path / "remote"
    (remote / "sub").mkdir(parents=True)
    (remote / "sub" / "ok.txt").write_text("fine\n")
    (remote / "escape.txt").write_text("owned")
    local = tmp_path / "local"
    local.mkdir()
    proc, doc = run_cli(sync_env, "pull", "--host", escaping_box.spec, "--src", str(remote / "sub"), "--dst",
                        str(local / "dst"), "--engine", "sftp")
    assert proc.returncode == 3 and doc["error"]["kind"] == "bad-answer", proc.stderr + proc.stdout[-2000:]
    assert "'../escape.txt'" in doc["error"]["message"] and "\n" not in doc["error"]["message"]
    assert os.listdir(local) == [], "nothing beside --dst, not even gpuops' lock once the pull ended"


def test_a_symlink_the_box_turned_into_a_directory_is_replaced_not_followed(sftp_box, sync_env, tmp_path):
    """Pulling `link -> /elsewhere` with SFTP, then pulling again after the box made `link` a
    directory holding authorized_keys, wrote /elsewhere/authorized_keys: makedirs followed the
    link the first pull had made."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "f").write_text("x")
    (remote / "link").symlink_to(elsewhere)
    back = tmp_path / "back"
    args = ["pull", "--host", sftp_box.spec, "--src", str(remote), "--dst", str(back)]
    proc, doc = run_cli(sync_env, *args)
    assert proc.returncode == 0 and doc["data"]["engine"] == "sftp", proc.stdout[-2000:]
    assert os.readlink(back / "link") == str(elsewhere)

    (remote / "link").unlink()
    (remote / "link").mkdir()
    (remote / "link" / "authorized_keys").write_text("ssh-ed25519 AAAA attacker\n")
    proc, doc = run_cli(sync_env, *args)
    assert list(elsewhere.iterdir()) == []
    assert proc.returncode == 0 and doc["data"]["verified"], proc.stdout[-2000:]
    assert not (back / "link").is_symlink() and snapshot(back) == snapshot(remote)


def test_push_replaces_a_symlink_on_the_box_where_the_source_has_a_directory(sftp_box, sync_env, tmp_path):
    """The same swap upstream: the SFTP engine stat()ed (followed) what it was about to write into."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    (src / "link").symlink_to(elsewhere)
    remote = tmp_path / "remote"
    args = ["push", "--host", sftp_box.spec, "--src", str(src), "--dst", str(remote)]
    assert run_cli(sync_env, *args)[0].returncode == 0 and (remote / "link").is_symlink()

    (src / "link").unlink()
    (src / "link" / "deeper").mkdir(parents=True)
    (src / "link" / "deeper" / "authorized_keys").write_text("ssh-ed25519 AAAA attacker\n")
    proc, doc = run_cli(sync_env, *args)
    assert list(elsewhere.iterdir()) == []
    assert proc.returncode == 0 and doc["data"]["engine"] == "sftp", proc.stdout[-2000:]
    assert not (remote / "link").is_symlink() and snapshot(remote) == snapshot(src)


NOT_UTF8 = b"caf\xe9 \xff.bin"


@pytest.mark.parametrize("engine", ["rsync", "sftp"])
def test_a_name_that_is_not_utf8_survives_push_and_pull(engine, request, sync_env, tmp_path):
    """A file name that is not UTF-8 made pull end in exit 70 after the copy, leave
    .gpuops-manifest.json.tmp behind, and fail the same way on every retry."""
    box = request.getfixturevalue("rsync_box" if engine == "rsync" else "sftp_box")
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    for where in (os.fsencode(src), os.fsencode(src / "sub")):
        with open(os.path.join(where, NOT_UTF8), "wb") as f:
            f.write(b"bytes behind a latin-1 name\n")
    os.mkdir(os.path.join(os.fsencode(src), b"dir \xfe"))
    remote, back = tmp_path / "remote", tmp_path / "back"

    proc, doc = run_cli(sync_env, "push", "--host", box.spec, "--src", str(src), "--dst", str(remote))
    assert proc.returncode == 0 and doc["data"]["engine"] == engine, proc.stderr + proc.stdout[-2000:]
    proc, doc = run_cli(sync_env, "pull", "--host", box.spec, "--src", str(remote), "--dst", str(back))
    assert proc.returncode == 0 and doc["data"]["verified"], proc.stderr + proc.stdout[-2000:]

    assert snapshot(back) == snapshot(remote) == snapshot(src)
    assert NOT_UTF8 in os.listdir(os.fsencode(back)) and b"dir \xfe" in os.listdir(os.fsencode(back))
    assert not [n for n in os.listdir(back) if n.endswith(".tmp") or n.endswith(".gpuops-part")]
    with open(pullindex.manifest_for(str(back)), encoding="ascii") as f:
        listed = {e["path"] for e in json.load(f)["files"]}
    assert os.fsdecode(NOT_UTF8) in listed and "sub/" + os.fsdecode(NOT_UTF8) in listed
    with open(Path(sync_env["GPUOPS_STATE_DIR"]) / "pulls.jsonl", encoding="ascii") as f:
        assert json.loads(f.readlines()[-1])["files"] == 2


# ---------------------------------------------------------------- the SFTP download, adversarially

_PARTS = st.sampled_from(["x", "y", "f", "..", ".", ""])
_RELS = st.one_of(
    st.lists(_PARTS, min_size=1, max_size=3).map("/".join),
    st.lists(_PARTS, min_size=1, max_size=3).map(lambda p: "/" + "/".join(p)),
    st.sampled_from(["x\0f", "../outside/f", "x/../../outside/f", "\udc2f", "y/\udcff"]),
)
_ENTRIES = st.lists(st.tuples(_RELS, st.sampled_from(["f", "d", "l"]),
                              st.sampled_from(["../outside", "/", "y", "x/f"])), max_size=8)
_SWAPS = st.lists(st.sampled_from(["x", "y", "x/y", "y/x", "f", "x/f"]), max_size=4)


def _tree(root):
    """Directories x, y, x/y, y/x, each with a file f, and f at the top."""
    for d in ("x", "y", "x/y", "y/x"):
        (root / d).mkdir(parents=True, exist_ok=True)
        (root / d / "f").write_text(f"{d}/f on the box\n")
    (root / "f").write_text("f on the box\n")


@pytest.fixture(scope="module")
def sftp_target(sftp_box):
    t = target_for(sftp_box.spec)
    yield t
    t.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=_ENTRIES, swaps=_SWAPS)
def test_no_manifest_and_no_symlink_in_dst_makes_the_sftp_download_write_outside(sftp_target, tmp_path_factory,
                                                                                  entries, swaps):
    """Adversarial manifests (absolute paths, '..', NUL, bytes no name has) meet a --dst whose
    directories were swapped for symlinks to a directory outside it: whatever the SFTP engine
    writes, nothing outside --dst changes."""
    world = tmp_path_factory.mktemp("world")
    remote, dst, outside = world / "remote", world / "dst", world / "outside"
    _tree(remote)
    _tree(dst)
    outside.mkdir()
    (outside / "f").write_text("precious\n")
    for rel in swaps:
        target = dst / rel
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        else:
            continue  # under a directory an earlier swap replaced
        target.symlink_to(outside)
    before = snapshot(outside, skip=())

    accepted = {}
    for rel, kind, link in entries:
        named = contained.problem(rel) is None
        size = (remote / rel).stat().st_size if named and kind == "f" and (remote / rel).is_file() else 0
        try:
            accepted.update(plan.by_path([[rel, kind, size, None, link if kind == "l" else None]], "box"))
        except BadAnswer as e:
            assert not named and repr(rel) in e.message
    engine = SftpEngine(sftp_target, "pull", str(dst), str(remote), accepted, io_timeout=10)
    engine.run(sorted(accepted))
    assert snapshot(outside, skip=()) == before
