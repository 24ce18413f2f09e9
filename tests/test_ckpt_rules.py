"""The pure rules of issue 34's checkpoint bullets, without a process: what a checkpoint of the run
is called (gpuops.onbox.run.ckptnames), where a resume argument may go (gpuops.onbox.run.cmdtail,
boxpolicy.resumed), two runs on one checkpoint directory, and the fallback from a checkpoint that
fails to load (retrypolicy)."""

import pytest

from gpuops.onbox.run import ckptnames, cmdtail, boxpolicy
from gpuops.onbox.triage import retrypolicy
from gpuops.onbox.host.jobrecord import JobError


@pytest.mark.parametrize("name,kind,template,step", [
    ("checkpoint-500", "dir", "checkpoint-{N}", 500),                       # transformers PREFIX_CHECKPOINT_DIR
    ("global_step1200", "dir", "global_step{N}", 1200),                     # deepspeed engine.py tag
    ("iter_0000100", "dir", "iter_{N}", 100),                               # megatron 'iter_{:07d}'
    ("epoch=3-step=1200.ckpt", "file", "epoch={E}-step={N}.ckpt", 1200),    # lightning "{epoch}-{step}"
    ("epoch=3-step=1200-v1.ckpt", "file", "epoch={E}-step={N}.ckpt", 1200),  # its STARTING_VERSION suffix
    ("iter_8000.pth", "file", "iter_{N}.pth", 8000),                        # mmengine filename_tmpl
    ("model_0004999.pth", "file", "model_{N}.pth", 4999),                   # fvcore "{}_{:07d}"
    ("checkpoint_7", "dir", "checkpoint_{N}", 7),                           # accelerate automatic naming
    ("300", "dir", "{N}", 300),                                             # orbax step directories
    ("ckpt-10050.pt", "file", "ckpt-{N}.pt", 10050),
    ("step_42", "dir", "step_{N}", 42),
])
def test_the_names_the_libraries_write_are_checkpoints(name, kind, template, step):
    assert ckptnames.named(name, kind)[1:] == (template, step)


@pytest.mark.parametrize("name", ["model-00001-of-00002.safetensors", "notes-v2.txt", "eval_results_epoch3.json",
                                  "zero_to_fp32.py", "eval-epoch99.json", "config.json", "last.ckpt", "best.pt",
                                  "runs", "pytorch_model.bin", "optimizer.pt", "latest"])
def test_numbered_user_files_are_never_checkpoints(name):
    assert ckptnames.named(name, "file") is None and ckptnames.named(name, "dir") is None


def test_a_name_is_only_its_writers_for_the_kind_it_writes():
    assert ckptnames.named("300", "file") is None, "a bare number is orbax's only as a directory"
    assert ckptnames.named("model_0004999.pth", "dir") is None, "fvcore's is a file"


@pytest.mark.parametrize("cmd", [
    "python3 train.py --lr 3e-4",
    "python3 train.py > out.log 2>&1",
    "cd /work\npython3 train.py",
    "python3 train.py --tag 'a|b;c # d'",
    "python3 train.py --when \"$(date +%s; echo x)\"",
    "python3 train.py \\\n  --steps 10",
    "echo 'x' | tee a.log\npython3 train.py",
])
def test_appending_reaches_the_program_of_a_plain_last_line(cmd):
    assert cmdtail.problem(cmd) is None


@pytest.mark.parametrize("cmd,said", [
    ("python3 train.py  # sweep", "comment"),
    ("python3 train.py | tee out.log", "pipe"),
    ("python3 train.py 2>&1 | tee out.log", "pipe"),
    ("python3 train.py; echo done", "';'"),
    ("python3 train.py && echo ok", "'&'"),
    ("python3 train.py || true", "pipe"),
    ("python3 train.py &", "'&'"),
    ("(cd x && python3 train.py)", "subshell"),
    ("python3 - <<EOF\nprint(1)\nEOF", "here-document"),
    ("if true; then\n python3 train.py\nfi", "compound"),
    ("python3 train.py 'unclosed", "not closed"),
])
def test_appending_is_refused_where_it_would_miss_the_program(cmd, said):
    assert said in cmdtail.problem(cmd)


def test_launch_refuses_an_append_that_would_miss_and_takes_a_placeholder_instead():
    with pytest.raises(JobError) as e:
        boxpolicy.placed("cmd", "python3 train.py | tee out.log", None, "--resume {checkpoint}")
    assert e.value.kind == "usage" and "Put {checkpoint} in --cmd" in str(e.value)
    boxpolicy.placed("cmd", "python3 train.py {checkpoint} | tee out.log", None, "--resume {checkpoint}")
    boxpolicy.placed("cmd", "python3 train.py | tee out.log", None, None)  # nothing appended: nothing refused


def test_the_placeholder_in_the_command_takes_the_resume_words_quoted_or_nothing():
    body = b"python3 train.py {checkpoint} 2>&1 | tee out.log\n"
    cmd = body.decode().rstrip("\n")
    got = boxpolicy.resumed("cmd", body, None, cmd, "--resume {checkpoint}", "/c/ckpt-5 $(x)")
    assert got[0] == b"python3 train.py --resume '/c/ckpt-5 $(x)' 2>&1 | tee out.log\n"
    assert got[2] == "python3 train.py --resume '/c/ckpt-5 $(x)' 2>&1 | tee out.log"
    assert boxpolicy.resumed("cmd", body, None, cmd, "--resume {checkpoint}", None)[0] == \
        b"python3 train.py  2>&1 | tee out.log\n"


def test_a_bare_placeholder_is_the_checkpoints_path_or_an_empty_word():
    body = b"python3 train.py --resume {checkpoint} --steps 30\n"
    assert boxpolicy.resumed("cmd", body, None, "", None, "/c/step_5")[0] == \
        b"python3 train.py --resume /c/step_5 --steps 30\n"
    assert boxpolicy.resumed("cmd", body, None, "", None, None)[0] == b"python3 train.py --resume '' --steps 30\n"
    plain = b"python3 train.py\n"
    assert boxpolicy.resumed("cmd", plain, None, "", None, "/c/step_5")[0] == plain, "nothing asked: nothing added"
    assert boxpolicy.resumed("cmd", plain, None, "", "--resume {checkpoint}", "/c/s")[0] == \
        b"python3 train.py --resume /c/s\n"


def test_two_live_runs_on_one_checkpoint_directory_are_refused_unless_both_share():
    live = [("r1", {"checkpoint_dir": "/w/out"}), ("r2", {"checkpoint_dir": "/w/other"})]
    for mine in ("/w/out", "/w/out/sub", "/w"):
        with pytest.raises(JobError) as e:
            boxpolicy.check_sharing({"checkpoint_dir": mine}, live)
        assert "run r1" in str(e.value) and "--share-checkpoint-dir" in str(e.value)
    boxpolicy.check_sharing({"checkpoint_dir": "/w/outside"}, live)
    boxpolicy.check_sharing({"checkpoint_dir": "/w/out", "share_checkpoint_dir": True},
                            [("r1", {"checkpoint_dir": "/w/out", "share_checkpoint_dir": True})])
    with pytest.raises(JobError):
        boxpolicy.check_sharing({"checkpoint_dir": "/w/out", "share_checkpoint_dir": True}, live)
    gang = {"checkpoint_dir": "/w/out", "gang": {"token": "a" * 32, "node": 1}}
    boxpolicy.check_sharing(gang, [("r0", dict(gang, gang={"token": "a" * 32, "node": 0}))])  # one gang, one run
    with pytest.raises(JobError):
        boxpolicy.check_sharing(gang, [("r0", dict(gang, gang={"token": "b" * 32, "node": 0}))])


def _load_fail():
    return {"exit_code": 1, "triage_class": retrypolicy.LOAD_FAIL, "oom_before": 0, "oom_after": 0}


def test_a_checkpoint_that_fails_to_load_is_retried_only_as_a_fallback():
    assert retrypolicy.decide(_load_fail(), 2, 3)["retry"] is False, "on its own it is final"
    got = retrypolicy.decide(_load_fail(), 2, 3, fallback=True, rand=lambda: 0.5)
    assert got["retry"] is True and got["class"] == retrypolicy.LOAD_FAIL
    assert retrypolicy.decide(_load_fail(), 4, 3, fallback=True)["retry"] is False, "within --max-retries"


def test_the_checkpoint_glob_is_dir_glob_given_apart_and_globs_stay_in_the_directory():
    from gpuops.errors import UsageError
    from gpuops.jobs import runpolicy as asked

    policy = asked.build(checkpoint_dir="ck", checkpoint_glob="model_*.pt", keep_checkpoints="2", keep_best="best_*")
    assert (policy["checkpoint_dir"], policy["checkpoint_glob"], policy["keep_best"]) == ("ck", "model_*.pt", "best_*")
    for wrong in (dict(checkpoint_dir="ck:a*", checkpoint_glob="b*"), dict(checkpoint_glob="b*"),
                  dict(checkpoint_dir="ck", keep_best="../x"), dict(checkpoint_dir="ck", checkpoint_glob="a/b")):
        with pytest.raises(UsageError):
            asked.build(**wrong)
