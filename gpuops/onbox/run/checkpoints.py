"""Checkpoints a run can resume from: the newest *complete* one in a directory, the listing
retention decides over (gpuops.onbox.run.retention), and whether the disk holds the next one.

Candidates are the entries named as a checkpoint's (gpuops.onbox.run.ckptnames: the one definition,
from the names the libraries write, or the user's --checkpoint-glob); nothing else in the
directory is ever resumed from or counted. Without a glob, the run's pattern is the template its
candidates share; when several templates are there, the one written to last is resumed from and
the verdict says `ambiguous` (retention then deletes nothing).

Complete means its write finished. A run that dies mid-save leaves a checkpoint that loads as
garbage or not at all (U6: torch.save on a full disk leaves latest.pth.tmp; a rank killed mid-save
leaves a torch.distributed.checkpoint directory without .metadata), and a retry resuming from it
fails again. A candidate is complete when

  * its name is not a temporary one: hidden (`.name`, where atomic writers put their temp file), a
    tmp/temp/partial/incomplete/inprogress word in it (`latest.pth.tmp`, `ckpt.partial`,
    `100.orbax-checkpoint-tmp-1700000000`, `tmp-checkpoint-500`), or a .part/.lock/~ ending;
  * its size, newest mtime and file count are the same at two looks `interval_s` apart, and no
    process holds a file of it open for writing (gpuops.onbox.run.ckptintact: a writer that writes in
    place, under its final name, may pause longer than the looks are apart);
  * its format's own end is there where a cheap look finds it (ckptintact: a zip's end record for
    torch.save files, a safetensors header that parses and the length it promises);
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
    after the tracker that the tracker does not name is a save that never finished;
  * it did not fail to load in an earlier attempt of the run (`failed`: the run falls back to the
    one before it).

Newest: by step number, compared as numbers (ckpt-10050 after ckpt-9999); by mtime only when a
glob picked names without one. A directory with more than MAX_ENTRIES entries is looked at through
its highest-numbered ones, and says so (`truncated`).

Names come from the box and are untrusted: one with a control character, `..` or bytes that are
not UTF-8 is skipped and reported (`unsafe`), never returned; a returned path is the directory
joined with a plain name, for the caller to quote. Symlinks are never candidates, and what one
points at is never pruned (Lightning's last.ckpt link).

`judge` and `disk_need` are pure over listings; `look`, `newest_complete`, `prune` and
`disk_watch` do the I/O.
"""

import fnmatch
import os
import re
import shutil
import stat
import time

from . import ckptintact
from ..host import disk
from .ckptnames import check_glob, in_progress, named, step_of, temporary, unsafe
from typing import Sequence

TRACKERS = {"latest": "deepspeed", "latest_checkpointed_iteration.txt": "megatron"}
MARKERS = (".metadata", "trainer_state.json", "commit_success.txt")
INTERVAL_S = 2.0
MAX_ENTRIES = 10000     # entries of the checkpoint directory looked at: its highest-numbered ones
MAX_FILES = 200000      # files walked in one checkpoint directory before it is called too large to judge
MAX_TOP = 10000         # names kept of a checkpoint directory's top level (its markers are there)
BEST_LOOKS = 3          # HF checkpoints whose trainer_state.json is read for the best one
DISK_MARGIN = 0.1
FAILED_WHY = "it failed to load in an earlier attempt of this run"


def _signature(e):
    return (e.get("kind"), e.get("size"), e.get("mtime"), e.get("files"))


def _tracked(name: str, text: str):
    """The entry a tracker file names."""
    text = (text or "").strip()
    if TRACKERS.get(name) == "megatron":
        return "release" if text == "release" else ("iter_%07d" % int(text) if text.isdigit() else None)
    return text if text and not unsafe(text) and "/" not in text else None


def candidates(entries, glob=None):
    """(candidates [(entry, step)], pattern, ambiguous or None): the entries that are checkpoints
    of the run (see ckptnames), safe, plain files and directories; links and trackers never."""
    plain = [e for e in entries if not unsafe(e["name"]) and e["kind"] != "link" and e["name"] not in TRACKERS]
    if glob:
        return [(e, step_of(e["name"])) for e in plain if fnmatch.fnmatchcase(e["name"], glob)], glob, None
    groups = {}
    for e in plain:
        found = named(e["name"], e["kind"])
        if found:
            groups.setdefault(found[1], []).append((e, found[2]))
    if not groups:
        return [], None, None
    # the pattern the run writes to now: the template whose entries changed last
    pattern = max(groups, key=lambda t: (max(e.get("mtime") or 0 for e, _ in groups[t]), t))
    ambiguous = None
    if len(groups) > 1:
        ambiguous = "several checkpoint name patterns in the directory (%s)" % ", ".join(sorted(groups)[:6])
    return groups[pattern], pattern, ambiguous


def judge(first, second=None, glob=None, failed=()):
    """The verdict on a checkpoint directory from two looks (`second` None: one look, no
    stability check). {dir, newest, path, complete: newest first, incomplete: [{name, why}],
    unsafe: [{name, why}], order: 'step'|'mtime', protected: [names], trackers, pattern,
    ambiguous, duplicate_steps, best: [names], truncated}. `failed`: names that failed to load."""
    second = first if second is None else second
    before = dict((e["name"], e) for e in first.get("entries") or [])
    entries = second.get("entries") or []
    verdict = {"dir": second.get("dir"), "newest": None, "path": None, "complete": [], "incomplete": [],
               "unsafe": [], "order": "step", "protected": [], "trackers": {}, "error": second.get("error"),
               "pattern": None, "ambiguous": None, "duplicate_steps": [], "best": sorted(second.get("best") or []),
               "truncated": bool(second.get("truncated"))}
    named_by = {}
    for tname, t in (second.get("trackers") or {}).items():
        target = _tracked(tname, t.get("text"))
        verdict["trackers"][tname] = {"names": target, "mtime": t.get("mtime")}
        if target:
            named_by[target] = t.get("mtime")
    links = [e for e in entries if e["kind"] == "link"]
    verdict["protected"] = sorted(set(named_by) | set(e.get("target") for e in links if e.get("target")))
    verdict["unsafe"] = [{"name": e["name"], "why": unsafe(e["name"])} for e in entries if unsafe(e["name"])]
    pool, verdict["pattern"], verdict["ambiguous"] = candidates(entries, glob)
    verdict["incomplete"] = [{"name": e["name"], "why": temporary(e["name"])} for e in entries
                             if not glob and not unsafe(e["name"]) and in_progress(e["name"])]
    dirs = [e for e, _ in pool if e["kind"] == "dir"]
    shared = set(m for m in MARKERS for e in dirs if m in e.get("top", ()))
    newest_tracker = max(named_by.values()) if named_by else None
    writers = second.get("writers")
    kept = []
    for e, step in pool:
        why = (FAILED_WHY if e["name"] in failed else
               _incomplete(e, before.get(e["name"]), shared, named_by, newest_tracker, writers))
        if why:
            verdict["incomplete"].append({"name": e["name"], "why": why})
        else:
            kept.append((e, step))
    if any(step is None for _, step in kept):
        verdict["order"] = "mtime"
        kept.sort(key=lambda es: (es[0].get("mtime") or 0, es[0]["name"]), reverse=True)
    else:
        kept.sort(key=lambda es: (es[1], es[0].get("mtime") or 0, es[0]["name"]), reverse=True)
        steps = [step for _, step in kept]
        verdict["duplicate_steps"] = sorted(set(s for s in steps if steps.count(s) > 1))
    verdict["complete"] = [dict(e, step=step) for e, step in kept]
    if kept:
        verdict["newest"] = verdict["complete"][0]
        verdict["path"] = os.path.join(second.get("dir") or "", kept[0][0]["name"])
    return verdict


def _incomplete(e, before, shared, named_by, newest_tracker, writers):
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
    if writers and e["name"] in writers:
        return "still being written (process %d holds it open for writing)" % writers[e["name"]]
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
    if e.get("broken"):
        return e["broken"]
    if (newest_tracker is not None and e["name"] not in named_by and e.get("mtime") is not None
            and e["mtime"] > newest_tracker):
        return "written after the tracker file, which does not name it: a save that did not finish"
    return None


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


def _entry(directory, name: str, max_files):
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


def _listed(names: Sequence[str]):
    """The names looked at: trackers, then the MAX_ENTRIES with the highest numbers (a number is
    compared as one: ckpt-10050 is kept before ckpt-9999), and whether some were left out."""
    if len(names) <= MAX_ENTRIES:
        return sorted(names), False
    steps = dict((n, step_of(n)) for n in names)
    rank = sorted(names, key=lambda n: (n in TRACKERS, -1 if steps[n] is None else steps[n], n), reverse=True)
    return sorted(rank[:MAX_ENTRIES]), True


def look(directory, glob=None, max_files=MAX_FILES):
    """One listing of a checkpoint directory: {dir, entries, trackers: {name: {text, mtime}},
    writers, best, truncated, error}. A directory that does not exist yet (the run has not saved)
    has no entries. Candidates (`glob`'s, else ckptnames') get their format checked (`broken`)."""
    directory = os.path.abspath(directory)
    out = {"dir": directory, "entries": [], "trackers": {}, "error": None, "writers": None, "best": [],
           "truncated": False}
    try:
        names, out["truncated"] = _listed(os.listdir(directory))
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
        if e is None or e["kind"] not in ("file", "dir") or unsafe(name):
            if e is not None:
                out["entries"].append(e)
            continue
        if glob and fnmatch.fnmatchcase(name, glob) or not glob and named(name, e["kind"]):
            e["broken"] = ckptintact.first_broken(os.path.join(directory, name), e["kind"] == "dir")
        out["entries"].append(e)
    hf = sorted((e for e in out["entries"] if e["kind"] == "dir" and "trainer_state.json" in e.get("top", ())
                 and re.match(r"checkpoint-\d+$", e["name"])), key=lambda e: int(e["name"][11:]), reverse=True)
    lightning = sorted((e for e in out["entries"] if e["kind"] == "file" and e["name"].endswith(".ckpt")
                        and "broken" in e and not e["broken"]), key=lambda e: (step_of(e["name"]) or -1, e["mtime"]),
                       reverse=True)
    best = ([ckptintact.hf_best(os.path.join(directory, e["name"])) for e in hf[:BEST_LOOKS]] +
            [ckptintact.lightning_best(os.path.join(directory, e["name"])) for e in lightning[:BEST_LOOKS]])
    out["best"] = sorted(set(filter(None, best)))
    out["writers"] = ckptintact.writers(directory)
    return out


def newest_complete(directory, glob=None, interval_s=INTERVAL_S, sleep=time.sleep, failed=()):
    """The verdict on `directory` from two looks `interval_s` apart (see judge)."""
    if glob:
        check_glob(glob)
    first = look(directory, glob)
    if interval_s > 0:
        sleep(interval_s)
    return judge(first, look(directory, glob) if interval_s > 0 else first, glob, failed)


def prune(directory, plan, dry_run=False):
    """Delete the entries of `plan` that are unchanged since they were judged. {deleted: [names],
    freed_bytes, spared: [{name, why}]}; with dry_run nothing is deleted and `deleted` lists what
    would be."""
    directory = os.path.abspath(directory)
    out = {"deleted": [], "freed_bytes": 0, "spared": [], "dry_run": bool(dry_run)}
    open_now = ckptintact.writers(directory) if plan else {}
    for planned in plan:
        name = planned["name"]
        now = _entry(directory, name, MAX_FILES) if not unsafe(name) else None
        if now is None or _signature(now) != _signature(planned) or now["kind"] not in ("file", "dir"):
            out["spared"].append({"name": name, "why": "changed or gone since it was judged"})
            continue
        if open_now is None or name in open_now:
            out["spared"].append({"name": name, "why": "open for writing, or its writers could not be read"})
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


def disk_watch(directory, verdict, last_n=3, margin=DISK_MARGIN) -> dict:
    """Free space on the checkpoint filesystem against what the next checkpoint needs:
    {free_bytes, need_bytes, low: True/False/None (None: nothing to measure yet), mount}."""
    doc = disk.measure("checkpoints", directory)
    need = disk_need(verdict, last_n, margin)
    free = doc.get("free_bytes")
    low = None if need is None or free is None else free < need
    return {"free_bytes": free, "need_bytes": need, "low": low, "mount": doc.get("mount"), "error": doc.get("error")}
