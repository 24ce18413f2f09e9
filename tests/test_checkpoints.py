"""Which checkpoint a retry resumes from (gpuops.onbox.run.checkpoints): directories laid out the way
each framework writes them (real torch.distributed.checkpoint saves through torch 2.13 CPU),
killed mid-save, with untrusted names; retention; the disk watch."""

import json
import os
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from gpuops.onbox.run import checkpoints as ck
from gpuops.onbox.run import retention


def safetensors_bytes(size=64):
    """A safetensors file as the format lays it out (huggingface/safetensors, docs/safetensors.md:
    an 8-byte little-endian header length, the JSON header, then the tensors' bytes)."""
    header = json.dumps({"w": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * size


def _file(path, size=64, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(safetensors_bytes(size) if path.name.endswith(".safetensors") else b"\0" * size)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def _dir(path, names, mtime=None, size=64):
    for name in names:
        _file(path / name, size, mtime)
    if mtime is not None:
        for inner in [p for p in path.rglob("*") if p.is_dir()] + [path]:
            os.utime(inner, (mtime, mtime))
    return path


def _verdict(directory, glob=None):
    return ck.newest_complete(str(directory), glob, interval_s=0)


HF_FILES = ["config.json", "model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"]


def test_an_hf_checkpoint_killed_before_trainer_state_is_never_resumed_from(tmp_path):
    """Trainer._save_checkpoint writes trainer_state.json after the model and optimizer: a
    checkpoint-N without it died mid-save, whatever its size."""
    _dir(tmp_path / "checkpoint-500", HF_FILES)
    _dir(tmp_path / "checkpoint-1000", HF_FILES[:-1], size=4096)
    _dir(tmp_path / "runs" / "Jan01", ["events.out.tfevents.1.host"])
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "checkpoint-500" and v["path"] == str(tmp_path / "checkpoint-500")
    assert v["incomplete"] == [{"name": "checkpoint-1000", "why": "no trainer_state.json, which its writer puts there last"}]
    assert "runs" not in [e["name"] for e in v["complete"]], "a tensorboard dir is never a checkpoint"


def test_the_newest_is_by_step_not_by_name_order_or_mtime(tmp_path):
    _dir(tmp_path / "checkpoint-1000", HF_FILES, mtime=1000)
    _dir(tmp_path / "checkpoint-500", HF_FILES, mtime=2000)  # copied back later: newer mtime, older step
    v = _verdict(tmp_path)
    assert [e["name"] for e in v["complete"]] == ["checkpoint-1000", "checkpoint-500"] and v["order"] == "step"


def _dcp_save(root, steps):
    code = textwrap.dedent("""
        import sys, warnings, torch, torch.distributed.checkpoint as dcp
        warnings.simplefilter("ignore")
        for step in sys.argv[2:]:
            dcp.save({"w": torch.full((64, 64), float(step)), "step": torch.tensor(int(step))},
                     checkpoint_id="%s/step-%s" % (sys.argv[1], step))
    """)
    subprocess.run([sys.executable, "-c", code, str(root)] + [str(s) for s in steps], check=True, timeout=120)


def test_a_distributed_checkpoint_without_its_metadata_is_skipped(tmp_path):
    """torch.distributed.checkpoint's coordinator writes .metadata after every rank's .distcp: a
    rank killed mid-save leaves the shards without it, and loading that fails the retry too."""
    _dcp_save(tmp_path, [100, 200])
    os.unlink(tmp_path / "step-200" / ".metadata")
    _file(tmp_path / "step-200" / ".metadata.tmp")  # the coordinator's temp name, never renamed
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "step-100" and v["newest"]["files"] == 2
    assert v["incomplete"] == [{"name": "step-200", "why": "no .metadata, which its writer puts there last"}]


def test_deepspeed_latest_tag_rules_out_a_newer_save_that_never_finished(tmp_path):
    now = time.time()
    for n, step in enumerate((100, 200)):
        _dir(tmp_path / f"global_step{step}", ["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"],
             mtime=now - 300 + n * 100)
    (tmp_path / "latest").write_text("global_step200")
    os.utime(tmp_path / "latest", (now - 150, now - 150))
    _dir(tmp_path / "global_step300", ["mp_rank_00_model_states.pt"], mtime=now - 10)
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "global_step200" and "global_step200" in v["protected"]
    assert v["incomplete"][0]["name"] == "global_step300" and "tracker" in v["incomplete"][0]["why"]
    assert v["trackers"]["latest"]["names"] == "global_step200"


def test_megatrons_tracker_names_its_iteration_directory(tmp_path):
    now = time.time()
    _dir(tmp_path / "iter_0000100", ["mp_rank_00/model_optim_rng.pt"], mtime=now - 300)
    _dir(tmp_path / "iter_0000200", ["mp_rank_00/model_optim_rng.pt"], mtime=now - 200)
    _file(tmp_path / "latest_checkpointed_iteration.txt").write_text("200\n")
    os.utime(tmp_path / "latest_checkpointed_iteration.txt", (now - 150, now - 150))
    _dir(tmp_path / "iter_0000300", ["mp_rank_00/model_optim_rng.pt"], mtime=now)
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "iter_0000200" and v["protected"] == ["iter_0000200"]
    assert [i["name"] for i in v["incomplete"]] == ["iter_0000300"]


def test_orbax_temp_directories_and_missing_commit_files(tmp_path):
    _dir(tmp_path / "100", ["_CHECKPOINT_METADATA", "commit_success.txt", "state/manifest.ocdbt"])
    _dir(tmp_path / "200", ["_CHECKPOINT_METADATA", "state/manifest.ocdbt"])
    _dir(tmp_path / "300.orbax-checkpoint-tmp-1700000000", ["_CHECKPOINT_METADATA"])
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "100"
    assert sorted((i["name"], i["why"]) for i in v["incomplete"]) == [
        ("200", "no commit_success.txt, which its writer puts there last"),
        ("300.orbax-checkpoint-tmp-1700000000", "a temporary name")]


def test_lightning_files_by_step_and_the_last_ckpt_link_is_never_a_candidate(tmp_path):
    _file(tmp_path / "epoch=0-step=100.ckpt", 100, mtime=1000)
    _file(tmp_path / "epoch=1-step=200.ckpt", 100, mtime=2000)
    _file(tmp_path / "epoch=1-step=50-v1.ckpt", 100, mtime=3000)
    os.symlink("epoch=0-step=100.ckpt", tmp_path / "last.ckpt")
    v = _verdict(tmp_path, glob="*.ckpt")
    assert [e["name"] for e in v["complete"]] == ["epoch=1-step=200.ckpt", "epoch=0-step=100.ckpt",
                                                  "epoch=1-step=50-v1.ckpt"]
    assert v["protected"] == ["epoch=0-step=100.ckpt"], "what last.ckpt points at is never pruned"
    assert [e["name"] for e in retention.plan(v, keep=1)["delete"]] == ["epoch=1-step=50-v1.ckpt"]


def test_a_torch_save_left_as_tmp_on_a_full_disk_is_never_resumed_from(tmp_path):
    """U6: torch.save hit a full disk and left `latest.pth.tmp`; atomic writers' hidden temp
    files are the same case."""
    _file(tmp_path / "step_1000.pth", 1000, mtime=1000)
    _file(tmp_path / "step_2000.pth.tmp", 300, mtime=2000)
    _file(tmp_path / ".step_3000.pth.Xk2q9a", 10, mtime=3000)
    _file(tmp_path / "step_4000.pth.partial", 10, mtime=4000)
    _file(tmp_path / "tmp-checkpoint-5000", 10, mtime=5000)
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "step_1000.pth" and len(v["incomplete"]) == 4


def test_a_checkpoint_still_being_written_is_not_the_newest(tmp_path):
    """The two looks: a save in progress changes size between them."""
    _file(tmp_path / "step-100.pt", 100)
    growing = _file(tmp_path / "step-200.pt", 100)

    def meanwhile(_seconds):
        with open(growing, "ab") as f:
            f.write(b"more")

    v = ck.newest_complete(str(tmp_path), interval_s=0.01, sleep=meanwhile)
    assert v["newest"]["name"] == "step-100.pt"
    assert v["incomplete"] == [{"name": "step-200.pt", "why": "still being written (it changed between two looks)"}]


def test_a_real_writer_is_caught_between_two_looks(tmp_path):
    _file(tmp_path / "step-100.pt", 100)
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        with open(sys.argv[1], "wb") as f:
            while True:
                f.write(b"x" * 4096); f.flush(); time.sleep(0.05)
    """), str(tmp_path / "step-200.pt")])
    try:
        while not (tmp_path / "step-200.pt").exists():  # the writer's python may start slowly under load
            time.sleep(0.05)
        v = ck.newest_complete(str(tmp_path), interval_s=0.5)
    finally:
        writer.kill()
        writer.wait()
    assert v["newest"]["name"] == "step-100.pt" and [i["name"] for i in v["incomplete"]] == ["step-200.pt"]


@pytest.mark.parametrize("name,why", [
    ("step-900\n.pt", "a control character in its name"),
    ("step-901\x1b[2J.pt", "a control character in its name"),
    ("step..902.pt", "'..' in its name"),
])
def test_a_checkpoint_name_that_could_inject_is_skipped_and_reported(tmp_path, name, why):
    """Names reach the job's command line: one that could break out of it or of the terminal is
    reported (a checkpoint-skipped event), never returned, even when it is the newest."""
    _file(tmp_path / "step-100.pt", 10)
    _file(tmp_path / name, 10)
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "step-100.pt" and v["unsafe"] == [{"name": name, "why": why}]


def test_a_name_that_is_not_utf8_is_skipped(tmp_path):
    _file(tmp_path / "step-100.pt", 10)
    with open(os.path.join(os.fsencode(str(tmp_path)), b"step-200\xff.pt"), "wb") as f:
        f.write(b"x")
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "step-100.pt" and v["unsafe"][0]["why"] == "bytes in its name that are not UTF-8"


def test_retention_keeps_k_and_never_the_newest_or_what_a_tracker_names(tmp_path):
    now = time.time()
    for n, step in enumerate((100, 200, 300, 400)):
        _dir(tmp_path / f"global_step{step}", ["mp_rank_00_model_states.pt"], mtime=now - 1000 + n * 100)
    (tmp_path / "latest").write_text("global_step200")  # resumed from an older tag by hand
    os.utime(tmp_path / "latest", (now, now))
    _file(tmp_path / "global_step500.tmp" / "mp_rank_00_model_states.pt")
    v = _verdict(tmp_path)
    assert [e["name"] for e in retention.plan(v, keep=2)["delete"]] == ["global_step100"]
    assert [e["name"] for e in retention.plan(v, keep=0)["delete"]] == ["global_step300", "global_step100"], "0 keeps 1"
    plan = retention.plan(v, keep=1, keep_names=["global_step100"])["delete"]
    assert [e["name"] for e in plan] == ["global_step300"]
    dry = ck.prune(str(tmp_path), plan, dry_run=True)
    assert dry["deleted"] == ["global_step300"] and (tmp_path / "global_step300").exists()
    done = ck.prune(str(tmp_path), plan)
    assert done["deleted"] == ["global_step300"] and done["freed_bytes"] == 64
    assert sorted(os.listdir(tmp_path)) == ["global_step100", "global_step200", "global_step400",
                                            "global_step500.tmp", "latest"]


def test_retention_spares_a_checkpoint_that_changed_after_it_was_judged(tmp_path):
    for step in (1, 2, 3):
        _file(tmp_path / f"step-{step}.pt", 10)
    plan = retention.plan(_verdict(tmp_path), keep=1)["delete"]
    with open(tmp_path / "step-1.pt", "ab") as f:
        f.write(b"rewritten")
    done = ck.prune(str(tmp_path), plan)
    assert done["deleted"] == ["step-2.pt"] and done["spared"][0]["name"] == "step-1.pt"


def test_the_disk_watch_warns_when_the_next_checkpoint_will_not_fit(tmp_path):
    """A sparse file stands for a checkpoint larger than the free space: statvfs stays real."""
    free = os.statvfs(str(tmp_path)).f_bavail * os.statvfs(str(tmp_path)).f_frsize
    with open(tmp_path / "step-1.pt", "wb") as f:
        f.truncate(free + (1 << 30))
    v = _verdict(tmp_path)
    watch = ck.disk_watch(str(tmp_path), v)
    assert watch["low"] is True and watch["need_bytes"] == int((free + (1 << 30)) * 1.1)
    (tmp_path / "step-1.pt").unlink()
    _file(tmp_path / "step-2.pt", 4096)
    assert ck.disk_watch(str(tmp_path), _verdict(tmp_path))["low"] is False
    assert ck.disk_watch(str(tmp_path / "not-yet"), _verdict(tmp_path / "not-yet"))["low"] is None


def test_the_need_is_the_largest_of_the_last_few():
    verdict = {"complete": [{"size": 10}, {"size": 30}, {"size": 20}, {"size": 999}]}
    assert ck.disk_need(verdict) == 33 and ck.disk_need({"complete": []}) is None


def test_a_directory_the_run_has_not_created_yet_has_no_checkpoint(tmp_path):
    v = _verdict(tmp_path / "missing")
    assert v["newest"] is None and v["path"] is None and v["error"] == "No such file or directory"


def test_a_checkpoint_too_large_to_walk_is_not_claimed_complete(tmp_path):
    _dir(tmp_path / "step-1", ["a", "b", "c", "d"])
    listing = ck.look(str(tmp_path), max_files=3)
    assert ck.judge(listing)["incomplete"][0]["why"].startswith("more than")


def test_a_glob_picks_the_candidates_and_nothing_else(tmp_path):
    _file(tmp_path / "model-100.pt", mtime=1000)
    _file(tmp_path / "optim-200.pt", mtime=2000)
    _file(tmp_path / "latest.pt", mtime=3000)
    assert _verdict(tmp_path, glob="model-*")["newest"]["name"] == "model-100.pt"
    v = _verdict(tmp_path, glob="*.pt")
    assert v["order"] == "mtime" and v["newest"]["name"] == "latest.pt", "an unnumbered name: newest by mtime"
    for bad in ("", "../x", "a/b", "x\n"):
        with pytest.raises(ValueError):
            ck.check_glob(bad)


def test_without_a_checkpoints_name_nothing_is_a_candidate_until_a_glob_says_so(tmp_path):
    _file(tmp_path / "best.pt", mtime=1000)
    _file(tmp_path / "last.pt", mtime=2000)
    v = _verdict(tmp_path)
    assert v["newest"] is None and v["complete"] == [] and v["pattern"] is None
    assert _verdict(tmp_path, glob="*.pt")["newest"]["name"] == "last.pt"


@pytest.mark.parametrize("name,step", [
    ("checkpoint-500", 500), ("epoch=3-step=1200-v1.ckpt", 1200), ("iter_0000100", 100), ("global_step42", 42),
    ("100", 100), ("model_00010.pt", 10), ("step-7.pt", 7), ("best.pt", None),
])
def test_the_step_a_name_carries(name, step):
    assert ck.step_of(name) == step


@pytest.mark.parametrize("name", ["template-100.pt", "temperature-5.pt", "attempt-3.pt", "model-part-1.pt"])
def test_ordinary_words_are_not_taken_for_temporary_names(name):
    assert ck.temporary(name) is None


USER_FILES = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "notes-v2.txt",
              "eval_results_epoch3.json", "zero_to_fp32.py", "eval-epoch99.json", "config.json"]


def test_numbered_user_files_are_never_counted_deleted_or_resumed_from(tmp_path):
    """Issue 34: with any numbered name a candidate, keep 1 deleted these and a retry resumed from
    eval-epoch99.json. Only the run's own pattern (HF's checkpoint-N here) is ever a candidate."""
    for step in range(1, 7):
        _dir(tmp_path / f"checkpoint-{step}", HF_FILES, mtime=1000 + step)
    for name in USER_FILES:
        _file(tmp_path / name, mtime=5000)
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "checkpoint-6" and v["pattern"] == "checkpoint-{N}" and v["ambiguous"] is None
    assert [e["name"] for e in v["complete"]] == [f"checkpoint-{s}" for s in range(6, 0, -1)]
    done = retention.apply(str(tmp_path), v, keep=1)
    assert done["deleted"] == [f"checkpoint-{s}" for s in range(5, 0, -1)] and done["refused"] is None
    assert sorted(os.listdir(tmp_path)) == sorted(USER_FILES + ["checkpoint-6"])


def test_steps_order_as_numbers_whatever_the_mtimes_and_past_the_listing_cap(tmp_path, monkeypatch):
    for name in ("ckpt-9999.pt", "ckpt-10000.pt", "ckpt-10050.pt", "ckpt-998.pt"):
        _file(tmp_path / name, mtime=1000)  # one second for all: a copy, or a coarse filesystem
    v = _verdict(tmp_path)
    assert [e["name"] for e in v["complete"]] == ["ckpt-10050.pt", "ckpt-10000.pt", "ckpt-9999.pt", "ckpt-998.pt"]
    monkeypatch.setattr(ck, "MAX_ENTRIES", 2)  # a directory too large to list whole keeps its newest
    v = _verdict(tmp_path)
    assert [e["name"] for e in v["complete"]] == ["ckpt-10050.pt", "ckpt-10000.pt"] and v["truncated"]
    assert "only part" in retention.plan(v, keep=1)["refused"]


def test_hf_best_model_checkpoint_is_never_deleted(tmp_path):
    """transformers' TrainerState.save_to_json (sort_keys=True) records best_model_checkpoint as
    the path the trainer saved it to: keep-1 must not delete the result itself."""
    for step in (100, 200, 300, 400):
        _dir(tmp_path / f"checkpoint-{step}", HF_FILES[:-1], mtime=1000 + step)
        state = {"best_metric": 0.12, "best_model_checkpoint": f"out/run/checkpoint-{min(step, 200)}",
                 "epoch": 1.0, "global_step": step, "log_history": []}
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    v = _verdict(tmp_path)
    assert v["best"] == ["checkpoint-200"]
    decided = retention.plan(v, keep=1)
    assert [e["name"] for e in decided["delete"]] == ["checkpoint-300", "checkpoint-100"]
    assert "best" in decided["kept"]["checkpoint-200"]


def test_best_names_and_keep_best_are_never_deleted(tmp_path):
    for step in (1, 2, 3, 4):
        _file(tmp_path / f"best-step={step}.ckpt" if step == 2 else tmp_path / f"epoch=0-step={step}.ckpt", mtime=step)
    v = _verdict(tmp_path, glob="*.ckpt")
    assert [e["name"] for e in retention.plan(v, keep=1)["delete"]] == ["epoch=0-step=3.ckpt", "epoch=0-step=1.ckpt"]
    kept = retention.plan(v, keep=1, keep_best="*step=3*")
    assert [e["name"] for e in kept["delete"]] == ["epoch=0-step=1.ckpt"]


def test_two_name_patterns_resume_from_the_one_written_last_and_retention_deletes_nothing(tmp_path):
    for step in (1, 2, 3):
        _dir(tmp_path / f"global_step{step}", ["mp_rank_00_model_states.pt"], mtime=100 + step)
        _file(tmp_path / f"step_{step}.pt", mtime=200 + step)
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "step_3.pt" and v["pattern"] == "step_{N}.pt"
    assert "global_step{N}" in v["ambiguous"] and "step_{N}.pt" in v["ambiguous"]
    done = retention.apply(str(tmp_path), v, keep=1)
    assert done["deleted"] == [] and "several checkpoint name patterns" in done["refused"]
    assert len(os.listdir(tmp_path)) == 6


def test_a_glob_of_unnumbered_names_or_two_of_one_step_is_never_pruned(tmp_path):
    _file(tmp_path / "a.pt", mtime=1)
    _file(tmp_path / "b.pt", mtime=2)
    assert "order" in retention.plan(_verdict(tmp_path, glob="*.pt"), keep=1)["refused"]
    _file(tmp_path / "c-step5.pt", mtime=3)
    _file(tmp_path / "d-step5.pt", mtime=4)
    assert "same step (5)" in retention.plan(_verdict(tmp_path, glob="*step*"), keep=1)["refused"]


def _torch_save(path, cut=None):
    """A real torch.save (zip since torch 1.6); `cut`: only the first bytes reach the file, as a
    writer killed mid-write under the final name leaves it."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save({"w": torch.zeros(64, 64), "step": 5}, buf)
    data = buf.getvalue()
    path.write_bytes(data if cut is None else data[:cut])
    return data


def test_a_torch_save_cut_mid_write_under_its_final_name_is_not_complete(tmp_path):
    data = _torch_save(tmp_path / "ckpt-5.pt")
    _torch_save(tmp_path / "ckpt-10.pt", cut=len(data) // 2)
    _torch_save(tmp_path / "ckpt-15.pt", cut=len(data) - 10)  # all but the end record
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "ckpt-5.pt"
    assert {i["name"]: i["why"] for i in v["incomplete"]} == {
        "ckpt-10.pt": "a zip (torch.save) without its end record: cut mid-write",
        "ckpt-15.pt": "a zip (torch.save) without its end record: cut mid-write"}


def test_a_safetensors_file_cut_short_is_not_complete(tmp_path):
    whole = safetensors_bytes(4096)
    (tmp_path / "step_1.safetensors").write_bytes(whole)
    (tmp_path / "step_2.safetensors").write_bytes(whole[:-100])
    (tmp_path / "step_3.safetensors").write_bytes(whole[:20])
    v = _verdict(tmp_path)
    assert v["newest"]["name"] == "step_1.safetensors"
    why = {i["name"]: i["why"] for i in v["incomplete"]}
    assert "where its header says" in why["step_2.safetensors"] and "cannot hold" in why["step_3.safetensors"]


def test_a_checkpoint_held_open_for_writing_is_not_complete_though_its_size_stands_still(tmp_path):
    """A writer that writes in place and pauses longer than the two looks are apart."""
    _torch_save(tmp_path / "ckpt-1.pt")
    _torch_save(tmp_path / "ckpt-2.pt")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        f = open(sys.argv[1], "ab")
        print("open", flush=True)
        time.sleep(60)
    """), str(tmp_path / "ckpt-2.pt")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"open\n"
        v = ck.newest_complete(str(tmp_path), interval_s=0.2)
        assert v["newest"]["name"] == "ckpt-1.pt"
        assert v["incomplete"] == [{"name": "ckpt-2.pt",
                                    "why": f"still being written (process {holder.pid} holds it open for writing)"}]
        plan = [dict(e) for e in ck.look(str(tmp_path))["entries"] if e["name"] == "ckpt-2.pt"]
        assert ck.prune(str(tmp_path), plan)["deleted"] == [], "never deleted while open for writing"
    finally:
        holder.kill()
        holder.wait()
    assert ck.newest_complete(str(tmp_path), interval_s=0)["newest"]["name"] == "ckpt-2.pt"


def test_a_checkpoint_that_failed_to_load_is_passed_over(tmp_path):
    for step in (1, 2, 3):
        _torch_save(tmp_path / f"ckpt-{step}.pt")
    v = ck.newest_complete(str(tmp_path), interval_s=0, failed=["ckpt-3.pt"])
    assert v["newest"]["name"] == "ckpt-2.pt" and {"name": "ckpt-3.pt", "why": ck.FAILED_WHY} in v["incomplete"]
    assert "ckpt-3.pt" not in [e["name"] for e in retention.plan(v, keep=1)["delete"]]


def _lightning_ckpt(path, step, best):
    """A .ckpt as Lightning's Trainer saves one (trainer/connectors/checkpoint_connector.py,
    dump_checkpoint: epoch, global_step, state_dict, callbacks keyed by the callback's state_key,
    ModelCheckpoint.state_dict()'s fields), through the real torch.save."""
    import torch

    key = ("ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, 'every_n_epochs': 1, "
           "'train_time_interval': None}")
    state = {"monitor": "val_loss", "best_model_score": torch.tensor(0.1), "best_model_path": best,
             "current_score": torch.tensor(0.3), "dirpath": str(path.parent),
             "best_k_models": {best: torch.tensor(0.1)}, "kth_best_model_path": best, "kth_value": torch.tensor(0.1),
             "last_model_path": ""}
    torch.save({"epoch": 0, "global_step": step, "pytorch-lightning_version": "2.4.0",
                "state_dict": {"w": torch.zeros(4)}, "callbacks": {key: state}}, path)


def test_lightnings_best_model_path_is_read_from_its_newest_checkpoints_and_never_deleted(tmp_path):
    for step in (100, 200, 300, 400):
        _lightning_ckpt(tmp_path / f"epoch=0-step={step}.ckpt", step, best=str(tmp_path / "epoch=0-step=200.ckpt"))
    v = _verdict(tmp_path)
    assert v["best"] == ["epoch=0-step=200.ckpt"] and v["pattern"] == "epoch={E}-step={N}.ckpt"
    deleted = [e["name"] for e in retention.plan(v, keep=1)["delete"]]
    assert deleted == ["epoch=0-step=300.ckpt", "epoch=0-step=100.ckpt"]
