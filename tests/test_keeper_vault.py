"""The vault's rules on this machine's disk (gpuops.keeper.vault) and what a kept launch needs
(gpuops.keeper.start.spec_of): only a claimed copy with its manifest is held, a copy in flight or a
manifest alone never is, a changed file is caught before a push, names from the box stay plain."""

import hashlib
import json
import os

import pytest

from gpuops import errors
from gpuops.keeper import start, vault
from gpuops.pullindex import manifest_for


def _copied(v, name, files):
    """What a verified pull leaves: the files in an incoming place, its manifest beside them."""
    where = v.incoming(name)
    os.makedirs(where)
    listed = []
    for rel, data in files.items():
        with open(os.path.join(where, rel), "wb") as f:
            f.write(data)
        listed.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    with open(manifest_for(where), "w") as f:
        json.dump({"schema": 1, "files": listed, "verified_at": "now"}, f)
    return where


def test_only_a_claimed_copy_is_held_and_a_copy_in_flight_never_is(tmp_path):
    v = vault.Vault(str(tmp_path), "run1")
    where = _copied(v, "checkpoint-5", {"state.pt": b"x" * 10})
    assert v.held() == []  # verified, but not claimed: a keeper killed now leaves nothing held
    v.claim("checkpoint-5", where)
    assert [h["name"] for h in v.held()] == ["checkpoint-5"] and v.verify("checkpoint-5") == []
    again = v.incoming("checkpoint-5")  # a later copy of the same name starts clean, in a place of its own
    assert again != where and os.listdir(v.path(vault.INCOMING)) == []


def test_clear_removes_what_a_copy_of_that_name_left_and_nothing_else(tmp_path):
    """A copy that ended unclaimed (its pull failed) leaves nothing staged: a name past the newest K
    is never copied again, so its place would otherwise stay, gigabytes of it."""
    v = vault.Vault(str(tmp_path), "run1")
    v.claim("checkpoint-5", _copied(v, "checkpoint-5", {"state.pt": b"5"}))
    _copied(v, "checkpoint-5", {"state.pt": b"5"})  # a later copy of the same name, left unclaimed
    other = _copied(v, "checkpoint-50", {"state.pt": b"50"})  # another name's copy, under way
    v.clear("checkpoint-5")
    assert sorted(os.listdir(v.path(vault.INCOMING))) == sorted([os.path.basename(other),
                                                                 os.path.basename(manifest_for(other))])
    assert [h["name"] for h in v.held()] == ["checkpoint-5"] and v.verify("checkpoint-5") == []


def test_a_manifest_without_its_directory_or_a_directory_without_its_manifest_is_not_held(tmp_path):
    v = vault.Vault(str(tmp_path), "run1")
    v.claim("c-1", _copied(v, "c-1", {"a": b"1"}))
    v.claim("c-2", _copied(v, "c-2", {"a": b"2"}))
    os.unlink(manifest_for(v.path(vault.CHECKPOINTS, "c-1")))
    os.rename(v.path(vault.CHECKPOINTS, "c-2"), v.path(vault.CHECKPOINTS, "elsewhere"))
    assert v.held() == []


def test_a_file_changed_in_the_vault_is_caught_before_it_is_pushed(tmp_path):
    v = vault.Vault(str(tmp_path), "run1")
    v.claim("c-1", _copied(v, "c-1", {"a": b"good", "b": b"kept"}))
    with open(v.path(vault.CHECKPOINTS, "c-1", "a"), "wb") as f:
        f.write(b"evil")
    assert v.verify("c-1") == ["a"]


@pytest.mark.parametrize("name", ["../x", ".hidden", "a/b", "bad\x1bname", "", "x" * 300])
def test_a_name_from_the_box_that_is_not_plain_is_never_used(tmp_path, name):
    v = vault.Vault(str(tmp_path), "run1")
    with pytest.raises(errors.BadAnswer):
        v.incoming(name)


def test_a_kept_launch_needs_checkpoints_and_a_resume_arg_and_resolves_its_fleet_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(errors.UsageError, match="--checkpoint-dir"):
        start.spec_of(command="x", fleet="f.toml", vault_dir="v", policy={"checkpoint_dir": "c"}, request={})
    spec = start.spec_of(command="x", fleet="f.toml", vault_dir="v", request={}, lost_after_s=20.0,
                         policy={"checkpoint_dir": "c", "resume_arg": "--resume {checkpoint}"})
    assert spec["fleet"] == str(tmp_path / "f.toml") and spec["vault"] == str(tmp_path / "v")
    assert spec["poll_s"] == 5.0 and spec["keep"] == 3  # four looks within --lost-after, at most one each 5 s
    named = start.spec_of(command="x", fleet="train", vault_dir="v", request={}, lost_after_s=6.0,
                          policy={"checkpoint_dir": "c", "resume_arg": "--resume {checkpoint}"})
    assert named["fleet"] == "train" and named["poll_s"] == 1.5


def test_a_kept_run_resumes_where_its_command_holds_checkpoint_or_by_its_resume_arg():
    """{checkpoint} may stand anywhere in --cmd (issue 34): a relaunch from the vault fills it there,
    as the box's supervisor does, where it once required --resume-arg and appended it."""
    from gpuops.keeper import attempt

    placed = start.spec_of(command="python3 train.py --resume {checkpoint} | tee out.log", fleet="train",
                           vault_dir="v", request={}, policy={"checkpoint_dir": "c"})
    assert attempt.command_resuming(placed, "/c/ckpt 9") == "python3 train.py --resume '/c/ckpt 9' | tee out.log"
    appended = start.spec_of(command="python3 train.py", fleet="train", vault_dir="v", request={},
                             policy={"checkpoint_dir": "c", "resume_arg": "--resume {checkpoint}"})
    assert attempt.command_resuming(appended, "/c/ckpt-9") == "python3 train.py --resume /c/ckpt-9"


@pytest.mark.parametrize("args, words", [
    (["--vault", "v", "--host", "a"], "--vault keeps a run across the boxes of a --fleet"),
    (["--lost-after", "30", "--host", "a"], "go with --vault DIR"),
    (["--vault", "v", "--fleet", "f.toml"], "give --checkpoint-dir DIR[:GLOB] and --resume-arg"),
    (["--vault", "v", "--fleet", "f.toml", "--gpus", "0,1", "--checkpoint-dir", "c",
      "--resume-arg=--resume {checkpoint}"], "--gpus is how many GPUs the job needs"),
])
def test_a_kept_launch_asked_wrongly_is_a_usage_error_before_anything_starts(cli_inproc, args, words):
    r = cli_inproc("launch", "--cmd", "python train.py", *args)
    assert r.returncode == 2 and words in r.stderr, r.stderr


def test_what_a_box_says_of_its_checkpoints_is_kept_only_where_the_keeper_may_act_on_it():
    from gpuops.keeper.attempt import checked_run

    answer = checked_run({"checkpoints": {"dir": "/c", "best": ["../x", "c-2", "gone"], "complete": [
        {"name": "c-2", "step": 2, "mtime": 1.5}, {"name": "../x", "step": 1}, {"name": "c-1", "step": "1"},
        {"name": ".tmp-3", "step": 3}, "junk"]}, "run_dir": "/jobs/..", "attempt_dir": "/jobs/20261128-1"})
    assert answer["checkpoints"] == {"dir": "/c", "best": ["c-2"], "complete": [{"name": "c-2", "step": 2, "mtime": 1.5}]}
    assert answer["run_dir"] is None and answer["attempt_dir"] == "/jobs/20261128-1"
    assert checked_run({"checkpoints": {"dir": "relative", "complete": []}})["checkpoints"] is None


def test_a_flag_a_kept_run_would_drop_at_its_relaunch_is_refused(cli_inproc):
    r = cli_inproc("launch", "--cmd", "python train.py", "--vault", "v", "--fleet", "f.toml", "--key", "k")
    assert r.returncode == 2 and "--key does not apply here: a run kept with --vault is relaunched without it" in \
        r.stderr, r.stderr


@pytest.mark.parametrize("best, names", [(None, []), ("/c/checkpoint-7", ["checkpoint-7"]),
                                         (["checkpoint-2", "", 3], ["checkpoint-2"]), ({"name": "c-1"}, ["c-1"])])
def test_the_best_checkpoints_are_read_however_the_checkpoint_rules_name_them(best, names):
    from gpuops.onbox.facts import keeper_facts

    assert keeper_facts._best({"best": best}) == names


def _box_dir(tmp_path, names):
    """A box's checkpoint directory (here, pulled over the local target by the real rsync engine)."""
    box = tmp_path / "box" / "ckpt"
    box.mkdir(parents=True)
    for name in names:
        (box / name).write_bytes(name.encode() * 1000)
    return box


def _pull_file(v, box, name):
    from gpuops.ops import pull
    from gpuops.ops import sync as S
    from gpuops.remote.local import LocalTarget

    where = v.incoming(name)
    doc = pull.pull(LocalTarget(), str(box), where, S.Options(excludes=vault.only(name)))
    assert doc["ok"], doc["summary"]
    return where


def test_a_single_file_checkpoint_is_pulled_alone_staged_then_held_as_that_file(tmp_path):
    odd = "ck [1]*?\\!#.pt"  # every glob and rule character, matched as itself
    box = _box_dir(tmp_path, ["checkpoint-5.pt", "checkpoint-10.pt", odd, "checkpoint-15.pt.tmp"])
    v = vault.Vault(str(tmp_path / "vault"), "run1")
    where = _pull_file(v, box, "checkpoint-5.pt")
    assert os.listdir(where) == ["checkpoint-5.pt"]  # the box's other entries were never carried
    assert v.held() == []  # verified and staged, not claimed: not held
    v.claim("checkpoint-5.pt", where, vault.FILE)
    held = v.path(vault.CHECKPOINTS, "checkpoint-5.pt")
    assert os.path.isfile(held) and open(held, "rb").read() == (box / "checkpoint-5.pt").read_bytes()
    assert [(h["name"], h["files"]) for h in v.held()] == [("checkpoint-5.pt", 1)]
    assert v.verify("checkpoint-5.pt") == [] and os.listdir(v.path(vault.INCOMING)) == []
    v.claim(odd, _pull_file(v, box, odd), vault.FILE)
    assert [h["name"] for h in v.held()] == ["checkpoint-5.pt", odd] and v.verify(odd) == []
    with open(held, "r+b") as f:
        f.write(b"X")
    assert v.verify("checkpoint-5.pt") == ["checkpoint-5.pt"]
    with pytest.raises(errors.Refused):
        v.checkout("checkpoint-5.pt")
    v.drop("checkpoint-5.pt")
    assert [h["name"] for h in v.held()] == [odd] and not os.path.lexists(held)


def test_a_staged_partial_file_or_a_file_under_a_directory_manifest_is_never_held(tmp_path):
    box = _box_dir(tmp_path, ["checkpoint-5.pt"])
    v = vault.Vault(str(tmp_path / "vault"), "run1")
    where = _pull_file(v, box, "checkpoint-5.pt")
    with open(os.path.join(where, "checkpoint-5.pt"), "ab") as f:  # a copy cut short, or changed after
        f.write(b"more")
    v.claim("checkpoint-5.pt", where, vault.FILE)  # the rename trusts the pull's verdict...
    assert v.verify("checkpoint-5.pt") == ["checkpoint-5.pt"]  # ...and the push back checks it again
    partial = v.incoming("c-9.pt")
    os.makedirs(partial)
    open(os.path.join(partial, "c-9.pt"), "wb").write(b"half")  # no manifest: what a killed pull leaves
    with pytest.raises(errors.BadAnswer):
        v.claim("c-9.pt", partial, vault.FILE)
    assert [h["name"] for h in v.held()] == ["checkpoint-5.pt"]
    v.claim("c-1", _copied(v, "c-1", {"c-1": b"1"}))  # a directory holding a file of its own name
    os.rename(v.path(vault.CHECKPOINTS, "c-1"), v.path(vault.CHECKPOINTS, "gone"))
    os.rename(v.path(vault.CHECKPOINTS, "gone", "c-1"), v.path(vault.CHECKPOINTS, "c-1"))
    assert "c-1" not in [h["name"] for h in v.held()]  # a file where a directory's manifest is: not held
    with pytest.raises(errors.BadAnswer):  # a pull that carried more than the one file is not a file checkpoint
        v.claim("c-2", _copied(v, "c-2", {"c-2": b"2", "other": b"3"}), vault.FILE)


def test_a_held_file_checkpoint_goes_back_into_the_boxs_checkpoint_directory_under_its_name(tmp_path):
    from gpuops.keeper import attempt
    from gpuops.remote.local import LocalTarget

    box = _box_dir(tmp_path, ["checkpoint-5.pt", "checkpoint-10.pt"])
    v = vault.Vault(str(tmp_path / "vault"), "run1")
    v.claim("checkpoint-10.pt", _pull_file(v, box, "checkpoint-10.pt"), vault.FILE)
    v.claim("checkpoint-5.pt", _pull_file(v, box, "checkpoint-5.pt"), vault.FILE)
    new = tmp_path / "new" / "ckpt"
    new.mkdir(parents=True)
    (new / "mine.txt").write_bytes(b"kept")
    attempt.push_checkpoint(LocalTarget(), "new", v, "checkpoint-10.pt", f"{new}/checkpoint-10.pt")
    assert sorted(os.listdir(new)) == ["checkpoint-10.pt", "mine.txt"]  # the one file, beside what was there
    assert (new / "checkpoint-10.pt").read_bytes() == (box / "checkpoint-10.pt").read_bytes()
