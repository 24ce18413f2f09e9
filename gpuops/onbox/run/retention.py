"""What --keep-checkpoints K may delete, and nothing more: the complete checkpoints of the run
(gpuops.onbox.run.checkpoints' verdict, over ckptnames' one definition) older than its K newest.

Never deleted:
  * anything that is not a candidate: a file the run's pattern (or --checkpoint-glob) does not name,
    whatever number it carries; a temporary, incomplete or changing entry (a save in progress);
  * the newest complete checkpoint (K below 1 keeps 1), and the one an attempt resumed from;
  * the best: the checkpoint HF Trainer's trainer_state.json names as best_model_checkpoint, the
    one Lightning's ModelCheckpoint state in its newest .ckpt names as best_model_path
    (gpuops.onbox.run.ckptintact), a `best*` name, what the user's --keep-best GLOB matches;
  * what a tracker names (DeepSpeed's `latest`, Megatron's latest_checkpointed_iteration.txt), what
    a link points at (Lightning's last.ckpt).

Refused, deleting nothing, when what it would delete is ambiguous: the directory holds more than
one checkpoint name pattern; a --checkpoint-glob picked names without step numbers (they could only
be ordered by mtime); two candidates carry the same step; the directory could not be listed, or
only in part. Each refusal is told once per run as a retention-refused event.

`plan` is pure; `apply` deletes through checkpoints.prune, which looks at each entry once more.
"""

from . import checkpoints, ckptnames
from typing import Sequence


def refusal(verdict):
    """Why retention must delete nothing in this directory now, or None."""
    if verdict.get("error"):
        return "the checkpoint directory could not be listed (%s)" % verdict["error"]
    if verdict.get("truncated"):
        return "the checkpoint directory holds more than %d entries: only part of it was looked at" % (
            checkpoints.MAX_ENTRIES)
    if verdict.get("ambiguous"):
        return verdict["ambiguous"] + ": name the checkpoints with --checkpoint-glob"
    if verdict.get("order") != "step":
        return "some checkpoints the glob names carry no step number: their order is not known"
    if verdict.get("duplicate_steps"):
        return "several checkpoints carry the same step (%s)" % ", ".join(map(str, verdict["duplicate_steps"][:5]))
    return None


def plan(verdict, keep, keep_names: Sequence[str]=(), keep_best=None):
    """{delete: [entries], kept: {name: why}, refused: why or None}: the complete checkpoints past
    the `keep` newest (at least one), less everything the module's docstring spares."""
    refused = refusal(verdict)
    if refused:
        return {"delete": [], "kept": {}, "refused": refused}
    spared = {}
    for name in verdict.get("protected") or []:
        spared[name] = "a tracker or a link names it"
    for name in verdict.get("best") or []:
        spared[name] = "the best checkpoint (HF's best_model_checkpoint, Lightning's best_model_path)"
    for name in keep_names:
        spared[name] = "an attempt resumed from it"
    delete = []
    for e in verdict["complete"][max(1, int(keep)):]:
        if e["name"] in spared:
            continue
        if ckptnames.best_name(e["name"], keep_best):
            spared[e["name"]] = "a best checkpoint (its name, or --keep-best)"
            continue
        delete.append(e)
    return {"delete": delete, "kept": spared, "refused": None}


def apply(directory, verdict, keep, keep_names: Sequence[str]=(), keep_best=None, dry_run=False):
    """Plan and delete: {deleted, freed_bytes, spared, refused}."""
    decided = plan(verdict, keep, keep_names, keep_best)
    if decided["refused"] or not decided["delete"]:
        return {"deleted": [], "freed_bytes": 0, "spared": [], "refused": decided["refused"]}
    return dict(checkpoints.prune(directory, decided["delete"], dry_run), refused=None)
