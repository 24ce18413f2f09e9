"""Issue 34's checkpoint bullets against a real sshd box: retention deletes only the run's own
checkpoints (never the user's numbered files, never the best one), and resume picks the right one
(never a file cut mid-write under its final name, the one before a checkpoint that fails to load,
ckpt-10050 after ckpt-9999, with the resume argument where the command says, before a pipe).
Real torch on the CPU for the loads; the runs' own records decide, no sleep does.
The refusals at launch (a --resume-arg after a pipe or in a comment, two runs on one checkpoint
directory) are in test_runflags."""

import sys

from tests.conftest import FIXTURES
from tests.jobs.helpers import event_kinds as kinds, run_record as record, wait_run_end as wait_end
from tests.jobs.test_runloop import launch

HF_LAYOUT = FIXTURES / "runs" / "hf_layout.py"
INPLACE = FIXTURES / "runs" / "inplace_save.py"
USER_FILES = ["eval-epoch99.json", "eval_results_epoch3.json", "model-00001-of-00002.safetensors",
              "model-00002-of-00002.safetensors", "notes-v2.txt", "zero_to_fp32.py"]


def test_retention_keeps_the_users_files_and_the_best_and_a_retry_resumes_from_a_checkpoint(box, jobs_dir, tmp_path):
    """With any numbered name a candidate, keep 1 deleted model-00001-of-00002.safetensors,
    notes-v2.txt and eval_results_epoch3.json, deleted the best checkpoint, and a retry resumed from
    eval-epoch99.json."""
    out = tmp_path / "out"
    run = launch(box, jobs_dir, f"{sys.executable} {HF_LAYOUT} --out {out} --saves 8 --best 2 --die-after 6 "
                                f"--once {tmp_path / 'died'}", max_retries="1", checkpoint_dir=str(out),
                 resume_arg="--resume {checkpoint}", keep_checkpoints="1", checkpoint_every_s=1)
    doc = wait_end(box, jobs_dir, run, timeout=120)
    resumed = next(e for e in doc["data"]["events"] if e["kind"] == "resumed")
    assert resumed["checkpoint"] == f"{out}/checkpoint-6" and resumed["step"] == 6
    assert sorted(p.name for p in out.iterdir()) == sorted(USER_FILES + ["checkpoint-2", "checkpoint-8"])
    assert set(record(jobs_dir, run)["pruned"]) == {f"checkpoint-{s}" for s in (1, 3, 4, 5, 6, 7)}
    assert "retention-refused" not in kinds(doc)


def test_resume_passes_over_a_cut_save_and_falls_back_from_one_that_fails_to_load(box, jobs_dir, tmp_path):
    """A save cut mid-write under its final name was resumed from; a checkpoint that failed to load
    ended the run; past ckpt-9999 the order was lexical; the resume argument appended after
    `| tee` never reached the trainer."""
    ckpt, once = tmp_path / "ckpt", tmp_path / "once"
    once.mkdir()
    cmd = (f"set -o pipefail; {sys.executable} {INPLACE} --ckpt {ckpt} --start 9991 --steps 10070 --every 5 "
           f"--bad-at 10055 --cut-at 10060 --once {once} {{checkpoint}} 2>&1 | tee -a {tmp_path / 'out.log'}")
    run = launch(box, jobs_dir, cmd, max_retries="2", checkpoint_dir=str(ckpt), resume_arg="--resume {checkpoint}")
    doc = wait_end(box, jobs_dir, run, timeout=180)
    events = doc["data"]["events"]
    resumed = [e for e in events if e["kind"] == "resumed"]
    assert [e["checkpoint"] for e in resumed] == [f"{ckpt}/ckpt-10055.pt", f"{ckpt}/ckpt-10050.pt"]
    assert {"name": "ckpt-10060.pt", "why": "a zip (torch.save) without its end record: cut mid-write"} in \
        resumed[0]["skipped"]
    fallback = next(e for e in events if e["kind"] == "checkpoint-fallback")
    assert fallback["checkpoint"] == f"{ckpt}/ckpt-10055.pt" and fallback["attempt"] == 2
    rec = record(jobs_dir, run)
    assert [d["class"] for d in rec["decisions"]][1:] == ["checkpoint-load-fail", None]
    log = (tmp_path / "out.log").read_text()
    assert f"resumed from {ckpt}/ckpt-10050.pt at step 10051" in log and "final step 10070" in log


def test_retention_that_would_be_ambiguous_deletes_nothing_and_says_so_once(box, jobs_dir, tmp_path):
    """Two name patterns in one directory (DeepSpeed's tags beside a loop's step_N.pt): which are
    this run's is not known, so keep 1 deletes nothing, and one retention-refused event says why."""
    ck = tmp_path / "ck"
    made = " ".join(f"{ck}/global_step{s}/mp_rank_00_model_states.pt {ck}/step_{s}.pt" for s in (1, 2, 3))
    cmd = (f"mkdir -p {' '.join(f'{ck}/global_step{s}' for s in (1, 2, 3))} && touch {made} && echo saved && "
           "sleep 4")
    run = launch(box, jobs_dir, cmd, checkpoint_dir=str(ck), keep_checkpoints="1", checkpoint_every_s=1)
    doc = wait_end(box, jobs_dir, run, timeout=60)
    refused = [e for e in doc["data"]["events"] if e["kind"] == "retention-refused"]
    assert len(refused) == 1 and "several checkpoint name patterns" in refused[0]["why"], refused
    assert len(list(ck.iterdir())) == 6 and not record(jobs_dir, run).get("pruned")
