"""Checkpoints a run can resume from: the newest *complete* one in a directory, retention that
prunes older complete ones, and whether the disk holds the next one.

Complete means its write finished. A run that dies mid-save leaves a checkpoint that loads as
garbage or not at all (U6: torch.save on a full disk leaves latest.pth.tmp; a rank killed mid-save
leaves a torch.distributed.checkpoint directory without .metadata), and a retry resuming from it
fails again. An entry of the checkpoint directory (a file or a directory) is complete when

  * its name is not a temporary one: hidden (`.name`, where atomic writers put their temp file), a
    tmp/temp/partial/incomplete/inprogress word in it (`latest.pth.tmp`, `ckpt.partial`,
    `100.orbax-checkpoint-tmp-1700000000`, `tmp-checkpoint-500`), or a .part/.lock/~ ending;
  * its size, newest mtime and file count are the same at two looks `interval_s` apart;
  * it holds the marker its framework writes last, where it writes one:
      trainer_state.json   HF Transformers Trainer, in checkpoint-N after the model, optimizer,
                           scheduler and RNG files (transformers/trainer.py, _save_checkpoint)
      .metadata            torch.distributed.checkpoint, by the coordinator after every rank's
                           .distcp file, through a temp name and a rename (torch/distributed/
                           checkpoint/filesystem.py, FileSystemWriter.finish); Lightning's and
                           Megatron's sharded checkpoints are this format
      commit_success.txt   orbax, on filesystems without atomic rename (orbax/checkpoint/_src/path/
                           atomicity.py, CommitFileTemporaryPath.finalize); elsewhere orbax renames
                           <step>.orbax-checkpoint-tmp into place, a temporary name above
    (a marker one directory has is asked of every directory beside it: same writer, same rule);
  * no tracker file says otherwise. DeepSpeed writes `latest` (the last save's tag) after the
    tag's files (deepspeed/runtime/engine.py, save_checkpoint); Megatron writes
    latest_checkpointed_iteration.txt (N of iter_{N:07d}, or `release`) after a save
    (megatron/training/checkpointing.py, get_checkpoint_tracker_filename). A directory written
    after the tracker that the tracker does not name is a save that never finished.

PyTorch Lightning's `epoch=E-step=S.ckpt` files carry no marker (lightning/fabric/utilities/
cloud_io.py, _atomic_save: an fsspec transaction that recent fsspec commits by a move, older
versions wrote in place): the name and stability checks are all there is for them.

Candidates: the entries `glob` matches; without a glob, the entries with a step number in their
name (so `runs/`, `logs/` or `config.json` beside the checkpoints are never resumed from), or all
when none has one. Newest: by step number when every candidate has one, else by mtime (a copied
checkpoint gets a new mtime; its name keeps its step).

Names come from the box and are untrusted: one with a control character, `..` or bytes that are
not UTF-8 is skipped and reported (`unsafe`), never returned; a returned path is the directory
joined with a plain name, for the caller to quote. Symlinks are never candidates, and what one
points at is never pruned (Lightning's last.ckpt link).

`judge`, `prune_plan` and `disk_need` are pure over listings; `look`, `newest_complete`, `prune`
and `disk_watch` do the I/O.
"""

import fnmatch
import os
import re
import shutil
import stat
import time

from . import disk

TRACKERS = {"latest": "deepspeed", "latest_checkpointed_iteration.txt": "megatron"}
MARKERS = (".metadata", "trainer_state.json", "commit_success.txt")
INTERVAL_S = 2.0
MAX_ENTRIES = 10000     # entries of the checkpoint directory looked at
MAX_FILES = 200000      # files walked in one checkpoint directory before it is called too large to judge
MAX_TOP = 10000         # names kept of a checkpoint directory's top level (its markers are there)
DISK_MARGIN = 0.1

_TEMP_WORDS = frozenset(("tmp", "temp", "partial", "incomplete", "inprogress", "unfinished"))
_TEMP_TOKEN = re.compile(r"tmp\d+$|tmp[a-z0-9_]{6,8}$")
_TEMP_ENDINGS = ("part", "crdownload", "lock", "swp")
_STEP_WORD = re.compile(r"(?i)(?:global_step|step|iteration|iter)[=_-]?(\d+)")
_CKPT_WORD = re.compile(r"(?i)(?:checkpoint|ckpt)[=_-]?(\d+)")
_NUMBER = re.compile(r"\d+")


def unsafe(name):
    """Why a name from the box must not reach a command line or a path, or None."""
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        return "a control character in its name"
    if ".." in name:
        return "'..' in its name"
    if "/" in name or any(0xDC80 <= ord(c) <= 0xDCFF for c in name):
        return "bytes in its name that are not UTF-8"
    return None


def temporary(name):
    """Why a name says its write has not finished, or None."""
    if name.startswith("."):
        return "a hidden name (where atomic writers keep the file until it is done)"
    if name.endswith("~"):
        return "a backup or temporary name"
    tokens = [t for t in re.split(r"[._=\-]+", name.lower()) if t]
    if any(t in _TEMP_WORDS or _TEMP_TOKEN.match(t) for t in tokens) or (tokens and tokens[-1] in _TEMP_ENDINGS):
        return "a temporary name"
    return None


def step_of(name):
    """The training step a checkpoint's name carries: after step/iter, else checkpoint/ckpt, else
    its last number (Lightning's `epoch=3-step=1200-v1.ckpt` is 1200); None without a number."""
    for rx in (_STEP_WORD, _CKPT_WORD, _NUMBER):
        found = rx.findall(name)
        if found:
            return int(found[-1])
    return None


def check_glob(pattern):
    """A checkpoint glob matches names in the checkpoint directory itself. ValueError otherwise."""
    if not pattern or "/" in pattern or unsafe(pattern):
        raise ValueError("a checkpoint glob matches names in the checkpoint directory (like 'step-*' or "
                         "'*.ckpt'), not %r" % (pattern,))
    return pattern


def _signature(e):
    return (e.get("kind"), e.get("size"), e.get("mtime"), e.get("files"))


def _tracked(name, text):
    """The entry a tracker file names."""
    text = (text or "").strip()
    if TRACKERS.get(name) == "megatron":
        return "release" if text == "release" else ("iter_%07d" % int(text) if text.isdigit() else None)
    return text if text and not unsafe(text) and "/" not in text else None


def judge(first, second=None, glob=None):
    """The verdict on a checkpoint directory from two looks (`second` None: one look, no
    stability check). {dir, newest, path, complete: newest first, incomplete: [{name, why}],
    unsafe: [{name, why}], order: 'step'|'mtime', protected: [names], trackers}."""
    second = first if second is None else second
    before = dict((e["name"], e) for e in first.get("entries") or [])
    entries = second.get("entries") or []
    verdict = {"dir": second.get("dir"), "newest": None, "path": None, "complete": [], "incomplete": [],
               "unsafe": [], "order": "step", "protected": [], "trackers": {}, "error": second.get("error")}
    named = {}
    for tname, t in (second.get("trackers") or {}).items():
        target = _tracked(tname, t.get("text"))
        verdict["trackers"][tname] = {"names": target, "mtime": t.get("mtime")}
        if target:
            named[target] = t.get("mtime")
    links = [e for e in entries if e["kind"] == "link"]
    verdict["protected"] = sorted(set(named) | set(e.get("target") for e in links if e.get("target")))
    pool = []
    for e in entries:
        why = unsafe(e["name"])
        if why:
            verdict["unsafe"].append({"name": e["name"], "why": why})
            continue
        if e["name"] in TRACKERS or e["kind"] == "link" or (glob and not fnmatch.fnmatchcase(e["name"], glob)):
            continue
        pool.append(e)
    if not glob and any(step_of(e["name"]) is not None for e in pool):
        pool = [e for e in pool if step_of(e["name"]) is not None]
    dirs = [e for e in pool if e["kind"] == "dir"]
    shared = set(m for m in MARKERS for e in dirs if m in e.get("top", ()))
    newest_tracker = max(named.values()) if named else None
    kept = []
    for e in pool:
        why = _incomplete(e, before.get(e["name"]), shared, named, newest_tracker)
        if why:
            verdict["incomplete"].append({"name": e["name"], "why": why})
        else:
            kept.append(e)
    if any(step_of(e["name"]) is None for e in kept):
        verdict["order"] = "mtime"
        kept.sort(key=lambda e: (e.get("mtime") or 0, e["name"]), reverse=True)
    else:
        kept.sort(key=lambda e: (step_of(e["name"]), e.get("mtime") or 0), reverse=True)
    verdict["complete"] = kept
    if kept:
        verdict["newest"] = kept[0]
        verdict["path"] = os.path.join(second.get("dir") or "", kept[0]["name"])
    return verdict


def _incomplete(e, before, shared, named, newest_tracker):
    """Why one candidate is not a complete checkpoint, or None."""
    why = temporary(e["name"])
    if why:
        return why
    if e["kind"] not in ("file", "dir"):
        return "neither a file nor a directory"
    if e.get("truncated"):
        return "more than %d files: too large to judge" % MAX_FILES
    if before is None or _signature(before) != _signature(e):
        return "still being written (it changed between two looks)"
    if e["kind"] == "dir":
        top = set(e.get("top", ()))
        needed = set(shared)
        if any(n.endswith(".distcp") for n in top):
            needed.add(".metadata")
        if re.match(r"checkpoint-\d+$", e["name"]):
            needed.add("trainer_state.json")
        missing = sorted(needed - top)
        if missing:
            return "no %s, which its writer puts there last" % " or ".join(missing)
    if (newest_tracker is not None and e["name"] not in named and e.get("mtime") is not None
            and e["mtime"] > newest_tracker):
        return "written after the tracker file, which does not name it: a save that did not finish"
    return None


def prune_plan(verdict, keep, keep_names=()):
    """The complete checkpoints retention deletes: all but the `keep` newest (at least one: the
    newest complete one is never deleted), sparing what a tracker names, what a link points at,
    and `keep_names` (the one an attempt is resuming from). Incomplete entries are never in it:
    one may be a save in progress."""
    spared = set(verdict.get("protected") or []) | set(keep_names)
    return [e for e in verdict["complete"][max(1, int(keep)):] if e["name"] not in spared]


def disk_need(verdict, last_n=3, margin=DISK_MARGIN):
    """Bytes the next checkpoint needs: the largest of the last `last_n` complete ones, plus
    `margin`; None before there is one to measure."""
    sizes = [e.get("size") for e in verdict["complete"][:last_n] if e.get("size") is not None]
    return int(max(sizes) * (1 + margin)) if sizes else None


# ---------------------------------------------------------------- I/O


def _walk(path, max_files):
    """(total bytes, newest mtime, files, top-level names, truncated) of a directory, links not
    followed."""
    size, newest, files, top = 0, os.lstat(path).st_mtime, 0, []
    for root, dirnames, filenames in os.walk(path, followlinks=False):
        if root == path:
            top = (dirnames + filenames)[:MAX_TOP]
        for name, is_file in [(n, False) for n in dirnames] + [(n, True) for n in filenames]:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue  # removed while we walked: the second look sees the change
            newest = max(newest, st.st_mtime)
            if is_file:
                files += 1
                size += st.st_size
                if files > max_files:
                    return size, newest, files, top, True
    return size, newest, files, top, False


def _entry(directory, name, max_files):
    path = os.path.join(directory, name)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    e = {"name": name, "size": st.st_size, "mtime": st.st_mtime, "files": 1}
    if stat.S_ISLNK(st.st_mode):
        try:
            inside = os.path.normpath(os.path.join(directory, os.readlink(path)))
        except OSError:
            inside = ""
        e.update(kind="link", target=os.path.basename(inside) if os.path.dirname(inside) == directory else None)
    elif stat.S_ISDIR(st.st_mode):
        size, newest, files, top, truncated = _walk(path, max_files)
        e.update(kind="dir", size=size, mtime=newest, files=files, top=top, truncated=truncated)
    else:
        e["kind"] = "file" if stat.S_ISREG(st.st_mode) else "other"
    return e


def look(directory, max_files=MAX_FILES):
    """One listing of a checkpoint directory: {dir, entries, trackers: {name: {text, mtime}},
    error}. A directory that does not exist yet (the run has not saved) has no entries."""
    directory = os.path.abspath(directory)
    out = {"dir": directory, "entries": [], "trackers": {}, "error": None}
    try:
        names = sorted(os.listdir(directory))[:MAX_ENTRIES]
    except OSError as e:
        out["error"] = getattr(e, "strerror", None) or str(e)
        return out
    for name in names:
        if name in TRACKERS and os.path.isfile(os.path.join(directory, name)):
            try:
                with open(os.path.join(directory, name), "rb") as f:
                    text = f.read(256).decode("utf-8", "replace")
                out["trackers"][name] = {"text": text, "mtime": os.stat(os.path.join(directory, name)).st_mtime}
            except OSError:
                pass
        e = _entry(directory, name, max_files)
        if e is not None:
            out["entries"].append(e)
    return out


def newest_complete(directory, glob=None, interval_s=INTERVAL_S, sleep=time.sleep):
    """The verdict on `directory` from two looks `interval_s` apart (see judge)."""
    if glob:
        check_glob(glob)
    first = look(directory)
    if interval_s > 0:
        sleep(interval_s)
    return judge(first, look(directory) if interval_s > 0 else first, glob)


def prune(directory, plan, dry_run=False):
    """Delete the entries of `plan` that are unchanged since they were judged. {deleted: [names],
    freed_bytes, spared: [{name, why}]}; with dry_run nothing is deleted and `deleted` lists what
    would be."""
    directory = os.path.abspath(directory)
    out = {"deleted": [], "freed_bytes": 0, "spared": [], "dry_run": bool(dry_run)}
    for planned in plan:
        name = planned["name"]
        now = _entry(directory, name, MAX_FILES) if not unsafe(name) else None
        if now is None or _signature(now) != _signature(planned) or now["kind"] not in ("file", "dir"):
            out["spared"].append({"name": name, "why": "changed or gone since it was judged"})
            continue
        if not dry_run:
            try:
                path = os.path.join(directory, name)
                shutil.rmtree(path) if now["kind"] == "dir" else os.unlink(path)
            except OSError as e:
                out["spared"].append({"name": name, "why": "could not delete: %s" % (e.strerror or e)})
                continue
        out["deleted"].append(name)
        out["freed_bytes"] += now["size"]
    return out


def disk_watch(directory, verdict, last_n=3, margin=DISK_MARGIN):
    """Free space on the checkpoint filesystem against what the next checkpoint needs:
    {free_bytes, need_bytes, low: True/False/None (None: nothing to measure yet), mount}."""
    doc = disk.measure("checkpoints", directory)
    need = disk_need(verdict, last_n, margin)
    free = doc.get("free_bytes")
    low = None if need is None or free is None else free < need
    return {"free_bytes": free, "need_bytes": need, "low": low, "mount": doc.get("mount"), "error": doc.get("error")}
