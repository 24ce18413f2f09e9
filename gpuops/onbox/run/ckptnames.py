"""What a checkpoint of a run is called: the one definition resume and retention share
(gpuops.onbox.run.checkpoints judges what these rules name; gpuops.onbox.run.retention deletes only
among them).

A name is a checkpoint's when it is one its writer makes, whole, as the libraries spell it:

    checkpoint-N              dir   HF Transformers Trainer: f"{PREFIX_CHECKPOINT_DIR}-{global_step}",
                                    PREFIX_CHECKPOINT_DIR = "checkpoint" (transformers/trainer_utils.py)
    global_stepN              dir   DeepSpeed's default tag f"global_step{self.global_steps}"
                                    (deepspeed/runtime/engine.py, save_checkpoint)
    iter_NNNNNNN              dir   Megatron: 'iter_{:07d}'.format(iteration)
                                    (megatron/training/checkpointing.py, get_checkpoint_name)
    epoch=E-step=S[-vK].ckpt  any   PyTorch Lightning ModelCheckpoint: default filename "{epoch}-{step}",
                                    CHECKPOINT_EQUALS_CHAR "=", CHECKPOINT_JOIN_CHAR "-", FILE_EXTENSION
                                    ".ckpt", versions "-v1"... (lightning/pytorch/callbacks/model_checkpoint.py)
    epoch_N.pth, iter_N.pth   file  mmengine CheckpointHook: filename_tmpl 'epoch_{}.pth' / 'iter_{}.pth'
                                    (mmengine/hooks/checkpoint_hook.py)
    model_NNNNNNN.pth         file  detectron2/fvcore PeriodicCheckpointer: "{}_{:07d}".format(file_prefix,
                                    iteration) with file_prefix "model" (fvcore/common/checkpoint.py)
    checkpoint_N              any   Accelerate save_state with automatic_checkpoint_naming:
                                    f"checkpoint_{self.save_iteration}" (accelerate/accelerator.py); Flax's
                                    prefix "checkpoint_" (flax/training/checkpoints.py)
    N                         dir   orbax CheckpointManager: a step's directory is its number
                                    (orbax/checkpoint/checkpoint_manager.py, standard step names)
    ckpt-N, ckpt_N, step_N, step-N, iter_N, epoch_N, checkpoint_N ... with or without one of the
    extensions torch, safetensors and friends write (.pt .pth .bin .ckpt .safetensors ...): the
    hand-written loop's names (torchtune writes epoch_N directories).

Everything else is never a candidate: `model-00001-of-00002.safetensors` (a shard of one save),
`notes-v2.txt`, `eval_results_epoch3.json`, `zero_to_fp32.py` (DeepSpeed writes it beside its
tags), `runs/`, `config.json`, `last.ckpt`, `best.pt`. A name's *template* is the name with its
step number written {N} (Lightning's epoch {E}, its version dropped): `ckpt-{N}.pt`. The run's
pattern is the template its checkpoint directory holds; a directory holding more than one is
ambiguous, and retention then deletes nothing. A user's --checkpoint-glob replaces all of this:
then the glob's matches are the candidates, and their step is the number after step/iter, else
after checkpoint/ckpt, else the last one in the name.
"""

import fnmatch
import re

# (writer, regex over the whole name, kinds it holds for: None any; its step is group "n")
FAMILIES = (
    ("hf-trainer", re.compile(r"checkpoint-(?P<n>\d+)"), ("dir",)),
    ("deepspeed", re.compile(r"global_step(?P<n>\d+)"), ("dir",)),
    ("megatron", re.compile(r"iter_(?P<n>\d{7,})"), ("dir",)),
    ("lightning", re.compile(r"(?:(?P<pre>[^=]*?)-)?epoch=(?P<e>\d+)-step=(?P<n>\d+)(?P<v>-v\d+)?\.ckpt"), None),
    ("lightning", re.compile(r"(?:(?P<pre>[^=]*?)-)?step=(?P<n>\d+)(?P<v>-v\d+)?\.ckpt"), None),
    ("mmengine", re.compile(r"(?:epoch|iter)_(?P<n>\d+)\.pth"), ("file",)),
    ("detectron2", re.compile(r"model_(?P<n>\d{7})\.pth"), ("file",)),
    ("accelerate", re.compile(r"checkpoint_(?P<n>\d+)"), None),
    ("orbax", re.compile(r"(?P<n>\d+)"), ("dir",)),
    ("loop", re.compile(r"(?:ckpt|checkpoint|step|iter|iteration|epoch|global_step|global-step)[-_=]?(?P<n>\d+)"
                        r"(?:\.(?:pt|pth|bin|ckpt|safetensors|pkl|pickle|tar|pth\.tar|npz|h5|keras|msgpack"
                        r"|pdparams))?"), None),
)
# A name with one of these words and a number in it, under a temporary decoration (`tmp-checkpoint-5`,
# `.step_3.pth.Xk2q9a`, `300.orbax-checkpoint-tmp-1`), is a save in progress: reported, never a candidate.
_IN_PROGRESS = re.compile(r"(?i)(?:checkpoint|ckpt|step|iter|epoch)[-_=]?\d+|^\d+\.orbax-checkpoint-tmp")

_TEMP_WORDS = frozenset(("tmp", "temp", "partial", "incomplete", "inprogress", "unfinished"))
_TEMP_TOKEN = re.compile(r"tmp\d+$|tmp[a-z0-9_]{6,8}$")
_TEMP_ENDINGS = ("part", "crdownload", "lock", "swp")
_STEP_WORD = re.compile(r"(?i)(?:global_step|step|iteration|iter)[=_-]?(\d+)")
_CKPT_WORD = re.compile(r"(?i)(?:checkpoint|ckpt)[=_-]?(\d+)")
_NUMBER = re.compile(r"\d+")


def unsafe(name: str):
    """Why a name from the box must not reach a command line or a path, or None."""
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        return "a control character in its name"
    if ".." in name:
        return "'..' in its name"
    if "/" in name or any(0xDC80 <= ord(c) <= 0xDCFF for c in name):
        return "bytes in its name that are not UTF-8"
    return None


def temporary(name: str):
    """Why a name says its write has not finished, or None."""
    if name.startswith("."):
        return "a hidden name (where atomic writers keep the file until it is done)"
    if name.endswith("~"):
        return "a backup or temporary name"
    tokens = [t for t in re.split(r"[._=\-]+", name.lower()) if t]
    if any(t in _TEMP_WORDS or _TEMP_TOKEN.match(t) for t in tokens) or (tokens and tokens[-1] in _TEMP_ENDINGS):
        return "a temporary name"
    return None


def in_progress(name: str) -> bool:
    """Whether a temporary name is a checkpoint's on its way (worth reporting as incomplete)."""
    return bool(temporary(name)) and bool(_IN_PROGRESS.search(name))


def named(name: str, kind: str):
    """(writer, template, step) when `name` is a checkpoint's as its writer spells it, else None."""
    for writer, rx, kinds in FAMILIES:
        if kinds is not None and kind not in kinds:
            continue
        m = rx.fullmatch(name)
        if not m:
            continue
        step = int(m.group("n"))
        start, end = m.span("n")
        template = name[:start] + "{N}" + name[end:]
        if writer == "lightning":
            template = _lightning_template(m, name)
        return writer, template, step
    return None


def _lightning_template(m, name: str) -> str:
    """Lightning's name with its epoch {E}, its step {N} and its version dropped."""
    cut = [(m.span(g), text) for g, text in (("e", "{E}"), ("n", "{N}"), ("v", ""))
           if g in m.re.groupindex and m.group(g) is not None]
    out, at = [], 0
    for (start, end), text in sorted(cut):
        out += [name[at:start], text]
        at = end
    return "".join(out + [name[at:]])


def step_of(name: str):
    """The step a name a glob picked carries: its writer's, else after step/iter, else after
    checkpoint/ckpt, else its last number; None without a number."""
    for kind in ("dir", "file"):
        found = named(name, kind)
        if found:
            return found[2]
    for rx in (_STEP_WORD, _CKPT_WORD, _NUMBER):
        found = rx.findall(name)
        if found:
            return int(found[-1])
    return None


def check_glob(pattern: str) -> str:
    """A checkpoint glob matches names in the checkpoint directory itself. ValueError otherwise."""
    if not pattern or "/" in pattern or unsafe(pattern):
        raise ValueError("a checkpoint glob matches names in the checkpoint directory (like 'step-*' or "
                         "'*.ckpt'), not %r" % (pattern,))
    return pattern


def best_name(name: str, keep_best=None) -> bool:
    """Whether a name is one kept as the best: Lightning's and hand-written `best*` names, or the
    user's --keep-best glob."""
    return name.lower().startswith("best") or bool(keep_best and fnmatch.fnmatchcase(name, keep_best))
