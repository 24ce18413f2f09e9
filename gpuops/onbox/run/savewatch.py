"""Is a checkpoint being written now? The run's checkpoint directory, sampled while its output is
silent: a save shows as bytes, entries or mtimes that change between two samples.

A sample is cheap and bounded: every entry of the directory's top level (lstat), and inside the
FOLLOW newest directories among them (where a save in progress writes: HF's checkpoint-N/,
DeepSpeed's global_stepN/, torch.distributed.checkpoint's shards) a walk of at most MAX_STATS
entries, links never followed. What the directory holds is never read, only its metadata.
"""

import os
import stat

FOLLOW = 3
MAX_STATS = 4096
MAX_DEPTH = 4
SAMPLE_EVERY_S = 1.0


def _lstat(path):
    try:
        return os.lstat(path)
    except OSError:
        return None


def _walk(path, budget, depth: int = 0):
    """(entries, bytes, newest mtime_ns) under `path`, at most `budget` entries."""
    entries, size, newest = 0, 0, 0
    try:
        names = os.listdir(path)
    except OSError:
        return 0, 0, 0
    for name in names[:budget]:
        st = _lstat(os.path.join(path, name))
        if st is None:
            continue
        entries += 1
        size += st.st_size
        newest = max(newest, st.st_mtime_ns)
        if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH and budget - entries > 0:
            e, s, n = _walk(os.path.join(path, name), budget - entries, depth + 1)
            entries, size, newest = entries + e, size + s, max(newest, n)
        if entries >= budget:
            break
    return entries, size, newest


def fingerprint(directory):
    """(entries, bytes, newest mtime_ns) of the top level and of the FOLLOW newest directories in
    it; None when the directory cannot be read (not made yet)."""
    top = _lstat(directory)
    if top is None or not stat.S_ISDIR(top.st_mode):
        return None
    try:
        names = os.listdir(directory)[:MAX_STATS]
    except OSError:
        return None
    entries, size, newest, dirs = len(names), 0, top.st_mtime_ns, []
    for name in names:
        st = _lstat(os.path.join(directory, name))
        if st is None:
            continue
        size += st.st_size
        newest = max(newest, st.st_mtime_ns)
        if stat.S_ISDIR(st.st_mode):
            dirs.append((st.st_mtime_ns, name))
    for _, name in sorted(dirs, reverse=True)[:FOLLOW]:
        e, s, n = _walk(os.path.join(directory, name), MAX_STATS)
        entries, size, newest = entries + e, size + s, max(newest, n)
    return entries, size, newest


class Watch(object):
    """Samples of one checkpoint directory: `changed_at` is when a sample last differed from the
    one before it (None until one did)."""

    def __init__(self, directory, read=fingerprint) -> None:
        self.directory, self.read = directory, read
        self.last, self.sampled_at, self.changed_at = None, None, None  # sampled_at None: no baseline yet

    def reset(self) -> None:
        """Forget the last sample: the output moved, and a later silence is judged afresh."""
        self.last = self.sampled_at = None

    def sample(self, now):
        """Sample the directory (at most every SAMPLE_EVERY_S); `changed_at`."""
        if self.sampled_at is not None and now - self.sampled_at < SAMPLE_EVERY_S:
            return self.changed_at
        seen, baseline, self.sampled_at = self.read(self.directory), self.sampled_at is not None, now
        if baseline and seen != self.last:  # a directory made since the last sample is a save begun
            self.changed_at = now
        self.last = seen
        return self.changed_at
